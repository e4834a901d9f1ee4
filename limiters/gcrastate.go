package limiters

import (
	"context"
	"time"
)

// For implementers: GCRAParams and GCRAState are GCRA taken apart, for
// stores that keep many keys: the configuration is shared, and each key's
// whole state is one timestamp (16 bytes) that the store keeps wherever it
// likes — in a map value, say — under its own lock. repository.NewGCRA is
// built on them.
//
// They make exactly the decisions a GCRA limiter with the same rate and
// burst makes. Waiting is by reservation: Reserve takes the permits at the
// time they will be due and says how long to wait for it, so waiters are
// served in the order they reserved, and TryAcquire cannot overtake them.
//
// GCRAParams is immutable and safe for concurrent use; a GCRAState is not:
// guard each with the lock that guards the store.
type GCRAParams struct {
	b bucket
	// What GCRAStateOf read from the limiter it took apart, for NewLimiter:
	// a TokenBucket rather than a GCRA, and its options (nil: none).
	token bool
	cfg   *config
}

// GCRAState is one key's state: the theoretical arrival time of its next
// request. The zero value is a full bucket.
type GCRAState struct {
	tat fine
}

// NewGCRAParams returns the configuration of a GCRA with rate r and burst.
// It panics as NewGCRA does on a non-positive rate or burst, and saturates
// as NewGCRA does.
func NewGCRAParams(r Rate, burst int) *GCRAParams {
	mustRate(r, "NewGCRAParams")
	mustPositive(burst, "NewGCRAParams", "burst")
	return &GCRAParams{b: newBucket(r, burst)}
}

// Limit is the burst: the most permits one request may take.
func (p *GCRAParams) Limit() int { return p.b.burst }

// gcra is the algorithm with s's timestamp.
func (p *GCRAParams) gcra(s GCRAState) gcra { return gcra{bucket: p.b, tat: s.tat} }

// TryAcquire takes n permits from s now or not at all, with the Decision a
// GCRA limiter would return. n == 0 is a peek: Allowed when a permit is free.
func (p *GCRAParams) TryAcquire(s *GCRAState, n int) Decision {
	checkN(n)
	now := monoNow()
	if n > 0 && n <= p.b.burst && s.tat.ceil() < now {
		// A full bucket: what bucketLimiter.TryAcquire's fast path
		// decides, without a division.
		span := p.b.iv.times(n)
		s.tat = p.b.iv.add(fine{ns: now}, span)
		return Decision{Allowed: true, Limit: p.b.burst, Remaining: p.b.burst - n, ResetAfter: time.Duration(span.ceil())}
	}
	g := p.gcra(*s)
	allowed, retry := g.try(now, n)
	s.tat = g.tat
	lim, rem, reset := g.state(now, 0)
	return Decision{Allowed: allowed, Limit: lim, Remaining: rem,
		ResetAfter: time.Duration(reset), RetryAfter: time.Duration(retry)}
}

// Reserve takes n permits from s at the earliest time they can be granted
// and returns how long until then (0: now). maxWait is the time left before
// the caller's deadline (< 0: none). If the wait is longer, it takes nothing
// and returns a *RejectedError whose RetryAfter is the wait and whose Cause
// is context.DeadlineExceeded; n larger than the burst gets ErrExceedsLimit.
// A caller that gives up before its wait is over must Cancel.
func (p *GCRAParams) Reserve(s *GCRAState, n int, maxWait time.Duration) (time.Duration, error) {
	checkN(n)
	if n > p.b.burst {
		return 0, ErrExceedsLimit
	}
	g := p.gcra(*s)
	now := monoNow()
	d := g.wait(now, n)
	if maxWait >= 0 && time.Duration(d) > maxWait {
		return 0, &RejectedError{Limiter: AlgGCRA, RetryAfter: time.Duration(d),
			Reason: "would wait past the context deadline", Cause: context.DeadlineExceeded}
	}
	g.take(now+d, n)
	s.tat = g.tat
	return time.Duration(d), nil
}

// Cancel gives back n permits a Reserve took for a caller that gave up.
// Reservations made after it keep their times (as x/time/rate's do); the
// permits go to whoever asks next.
func (p *GCRAParams) Cancel(s *GCRAState, n int) {
	checkN(n)
	g := p.gcra(*s)
	g.refund(0, n)
	s.tat = g.tat
}

// Full reports whether s is a full bucket, indistinguishable from the zero
// GCRAState: a store may forget it without losing anything.
func (p *GCRAParams) Full(s GCRAState) bool {
	return s.tat.ceil() <= monoNow()
}

// Due is the earliest moment s is full again, as a duration from now (zero
// if it already is). Stores use it to choose what to evict.
func (p *GCRAParams) Due(s GCRAState) time.Duration {
	return time.Duration(max(s.tat.ceil()-monoNow(), 0))
}

// Whole reports whether p's emission interval is a whole number of
// nanoseconds (true for every rate whose period its count divides, such as
// 10/s or 100/m). Then a GCRAState fits in an int64 without losing
// anything: see Pack.
func (p *GCRAParams) Whole() bool { return p.b.iv.den == 1 }

// Pack returns s as one int64, for stores that keep 8 bytes per key. It is
// exact when p.Whole(); otherwise it rounds the timestamp up to the next
// nanosecond (the key then waits up to 1 ns longer). The zero GCRAState
// packs to 0.
func (p *GCRAParams) Pack(s GCRAState) int64 { return s.tat.ceil() }

// Unpack is the inverse of Pack.
func (p *GCRAParams) Unpack(v int64) GCRAState { return GCRAState{tat: fine{ns: v}} }

// GCRAStateOf takes l apart, for a store that keeps many idle token
// buckets as states rather than as limiters (repository.NewMemory does):
// when l is a GCRA or a TokenBucket that is open and has nobody waiting,
// it returns l's configuration — its rate and burst, whether it is a
// TokenBucket, its options — and its state, and ok. like is returned as
// the configuration when it describes l exactly (like may be nil): a store
// that meets the same configuration again and again keeps one. l is not
// changed, and not closed: it is the caller's to drop.
func GCRAStateOf(l Limiter, like *GCRAParams) (p *GCRAParams, s GCRAState, ok bool) {
	var b *bucketLimiter
	switch x := l.(type) {
	case *GCRA:
		b = &x.bucketLimiter
	case *TokenBucket:
		b = &x.bucketLimiter
	default:
		return nil, GCRAState{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.head() != nil {
		return nil, GCRAState{}, false
	}
	if like != nil && like.b == b.s.bucket && like.token == b.s.token && like.config() == *b.cfg {
		p = like
	} else {
		p = &GCRAParams{b: b.s.bucket, token: b.s.token, cfg: b.cfg}
	}
	return p, GCRAState{tat: b.s.tat}, true
}

// config is the options p's limiters take.
func (p *GCRAParams) config() config {
	if p.cfg == nil {
		return *defaultConfig
	}
	return *p.cfg
}

// NewLimiter returns a limiter in state s that p describes: a TokenBucket
// or a GCRA, with the options of the limiter GCRAStateOf took p from (a
// GCRA with none for NewGCRAParams). It makes the decisions the limiter
// taken apart would have made from s on, and counts its Stats from zero.
func (p *GCRAParams) NewLimiter(s GCRAState) Limiter {
	cfg := p.cfg
	if cfg == nil {
		cfg = defaultConfig
	}
	var b *bucketLimiter
	var l Limiter
	if p.token {
		tb := &TokenBucket{}
		b, l = &tb.bucketLimiter, tb
	} else {
		g := &GCRA{}
		b, l = &g.bucketLimiter, g
	}
	b.s = gcra{bucket: p.b, tat: s.tat, token: p.token}
	b.core.init(&b.s, cfg)
	return l
}
