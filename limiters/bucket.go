package limiters

import (
	"fmt"
	"time"
)

func mustRate(r Rate, ctor string) {
	if r.N <= 0 {
		panic(fmt.Sprintf("limiters: %s: rate count must be positive, got %d", ctor, r.N))
	}
	if r.Per <= 0 {
		panic(fmt.Sprintf("limiters: %s: rate period must be positive, got %v", ctor, r.Per))
	}
}

func mustPositive(v int, ctor, name string) {
	if v <= 0 {
		panic(fmt.Sprintf("limiters: %s: %s must be positive, got %d", ctor, name, v))
	}
}

// bucket is the configuration of the one token-bucket arithmetic that
// TokenBucket, GCRA and GCRAParams share: the exact emission interval, the
// burst, and burst intervals (the time to refill an empty bucket, GCRA's
// tolerance).
type bucket struct {
	iv    interval
	burst int
	tol   fine
}

// newBucket builds the bucket of r and burst, saturating at the horizon: the
// bucket holds at most the permits that refill within 2^60 ns (36 years),
// and its interval is at most that long. r and burst must be positive.
func newBucket(r Rate, burst int) bucket {
	iv := newInterval(r)
	burst = min(burst, iv.count(fine{ns: horizon})) // ≥ 1: iv ≤ horizon
	return bucket{iv: iv, burst: burst, tol: iv.times(burst)}
}

// gcra is the bucket arithmetic, stored as GCRA stores it: the theoretical
// arrival time (TAT) of the next request. The bucket holds
// (now + tol − TAT) / interval permits, capped at burst; a zero TAT, or any
// TAT in the past, is a full bucket. TokenBucket uses it too (the classic
// credit form survives as the test oracle that it must agree with).
type gcra struct {
	bucket
	tat   fine
	token bool // a TokenBucket: only the algorithm's name differs
}

func (g *gcra) algorithm() string {
	if g.token {
		return AlgTokenBucket
	}
	return AlgGCRA
}

func (g *gcra) now() int64 { return monoNow() }
func (g *gcra) limit() int { return g.burst }

// base is max(TAT, now), except that a TAT less than a nanosecond before now
// (a fractional instant the nanosecond clock cannot show, such as a due time
// of 333333333⅓ ns whose waiter wakes at 333333334) is kept: the grant counts
// from the exact due time, so waiting at a rate like 3/s does not drift.
func (g *gcra) base(now int64) fine {
	if g.tat.ceil() < now {
		return fine{ns: now}
	}
	return g.tat
}

func (g *gcra) wait(now int64, n int) int64 {
	// Admit iff base + n·T ≤ now + burst·T.
	next := g.iv.add(g.base(now), g.iv.times(n))
	allow := g.iv.add(fine{ns: now}, g.tol)
	if !less(allow, next) {
		return 0
	}
	return g.iv.sub(next, allow).ceil()
}

func (g *gcra) take(now int64, n int) {
	g.tat = g.iv.add(g.base(now), g.iv.times(n))
}

func (g *gcra) refund(_ int64, n int) {
	g.tat = g.iv.sub(g.tat, g.iv.times(n))
}

// content is what the bucket holds at now, as the time it took to fill.
func (g *gcra) content(now int64) fine {
	return g.iv.sub(g.iv.add(fine{ns: now}, g.tol), g.base(now))
}

func (g *gcra) state(now int64, _ int) (int, int, int64) {
	rem, reset := g.remaining(now)
	return g.burst, rem, reset
}

// remaining is the permits free at now and the time until the bucket is
// full again, reading the base once.
func (g *gcra) remaining(now int64) (int, int64) {
	b := g.base(now)
	free := g.iv.sub(g.iv.add(fine{ns: now}, g.tol), b)
	return min(g.iv.count(free), g.burst), max(g.iv.sub(b, fine{ns: now}).ceil(), 0)
}

// project is closed-form in the permits ahead: granted one after another at
// their due times, the waiters ahead move the TAT from base(now) by exactly
// their permits' intervals (each waits, if at all, until TAT + N·T − tol,
// which is never later than the TAT it leaves), so n more permits are due
// when base(now) + (ahead + n)·T − tol is: what wait says of ahead + n.
func (g *gcra) project(now int64, ahead waiters, n int) int64 {
	span, ok := g.iv.timesSat(ahead.permits + n)
	if !ok {
		return never
	}
	next := g.iv.add(g.base(now), span)
	allow := g.iv.add(fine{ns: now}, g.tol)
	if !less(allow, next) {
		return 0
	}
	return g.iv.sub(next, allow).ceil()
}

// try is TryAcquire's arithmetic when nobody waits: it takes n permits if
// they are there. n == 0 is a peek at one permit; n > burst is denied with
// no RetryAfter.
func (g *gcra) try(now int64, n int) (allowed bool, retry int64) {
	switch {
	case n > g.burst:
		return false, 0
	case n == 0:
		retry = g.wait(now, 1)
		return retry == 0, retry
	}
	if retry = g.wait(now, n); retry == 0 {
		g.take(now, n)
		return true, 0
	}
	return false, retry
}

// reconfigure switches to nb at now keeping what the bucket holds: whole
// permits exactly, a partial one in proportion to the new interval, all
// capped by the new burst.
func (g *gcra) reconfigure(now int64, nb bucket) {
	held := g.content(now)
	if nb.iv != g.iv {
		k := g.iv.count(held)
		part := g.iv.sub(held, g.iv.times(k)).ns // under one old interval
		if k >= nb.burst {
			held = nb.tol
		} else {
			scaled := int64(float64(part) * nb.iv.float() / g.iv.float())
			held = nb.iv.add(nb.iv.times(k), fine{ns: min(scaled, nb.iv.ns)})
		}
	}
	if less(nb.tol, held) {
		held = nb.tol
	}
	g.bucket = nb
	g.tat = nb.iv.sub(nb.iv.add(fine{ns: now}, nb.tol), held)
}

// bucketLimiter is the limiter TokenBucket and GCRA both are.
type bucketLimiter struct {
	core
	s gcra
}

func (b *bucketLimiter) init(r Rate, burst int, token bool, ctor string, opts []Option) {
	mustRate(r, ctor)
	mustPositive(burst, ctor, "burst")
	b.s = gcra{bucket: newBucket(r, burst), token: token}
	b.core.init(&b.s, newConfig(-1, opts))
}

// TokenBucket is the classic token bucket: it holds up to burst permits,
// starts full, and refills continuously at its rate. Requests take permits
// out; a request larger than what is in the bucket waits for the refill.
//
// Internally it is GCRA's arithmetic (one timestamp, in exact fractional
// nanoseconds), so TokenBucket and GCRA make identical decisions on every
// trace. A burst that would take more than 2^60 ns (36 years) to refill
// saturates there: the bucket then holds what refills in that time.
type TokenBucket struct{ bucketLimiter }

// NewTokenBucket returns a token bucket of capacity burst refilling at r.
// It panics if r or burst is not positive.
func NewTokenBucket(r Rate, burst int, opts ...Option) *TokenBucket {
	tb := &TokenBucket{}
	tb.init(r, burst, true, "NewTokenBucket", opts)
	return tb
}

// GCRA is the generic cell rate algorithm: a token bucket stored as a single
// timestamp, the theoretical arrival time (TAT) of the next request. It
// admits exactly what a TokenBucket with the same rate and burst admits, on
// every trace, and saturates as TokenBucket does.
type GCRA struct{ bucketLimiter }

// NewGCRA returns a GCRA limiter with rate r and burst. It panics if r or
// burst is not positive.
func NewGCRA(r Rate, burst int, opts ...Option) *GCRA {
	g := &GCRA{}
	g.init(r, burst, false, "NewGCRA", opts)
	return g
}

// TryAcquire takes n permits now or not at all; see Limiter. This is the
// hot path of every server: the arithmetic is called directly, not through
// the algo interface, so the compiler can inline it.
func (b *bucketLimiter) TryAcquire(n int) Decision {
	if n <= 0 { // peeks and panics
		return b.core.TryAcquire(n)
	}
	t := monoNow()
	b.mu.Lock()
	if b.closed || b.head() != nil || n > b.s.burst { // burst may change: read it locked
		b.mu.Unlock()
		return b.core.TryAcquire(n)
	}
	now := b.clock(t)
	if b.s.tat.ceil() < now {
		// The bucket is full: the n ≤ burst permits are there, and what
		// is left and when it is full again follow without a division.
		span := b.s.iv.times(n)
		b.s.tat = b.s.iv.add(fine{ns: now}, span)
		b.acquired += int64(n)
		lim := b.s.burst
		b.mu.Unlock()
		return Decision{Allowed: true, Limit: lim, Remaining: lim - n, ResetAfter: time.Duration(span.ceil())}
	}
	retry := b.s.wait(now, n)
	if retry == 0 {
		b.s.take(now, n)
		b.acquired += int64(n)
	} else {
		b.rejected += int64(n)
	}
	lim := b.s.burst
	rem, reset := b.s.remaining(now)
	b.mu.Unlock()
	return Decision{Allowed: retry == 0, Limit: lim, Remaining: rem,
		ResetAfter: time.Duration(reset), RetryAfter: time.Duration(retry)}
}

// LeakyBucket is a shaper: it grants permits spaced evenly at its rate and
// never bursts. A grant of n permits occupies n emission intervals, so the
// next grant comes n intervals later. At most capacity permits wait (the
// default queue limit), and capacity is the Limit a Decision advertises;
// Remaining is the free room in the queue. A capacity that would take more
// than 2^60 ns (36 years) to emit saturates there.
//
// TryAcquire succeeds only when the bucket is idle: when nobody waits and the
// previous grant's intervals have passed.
type LeakyBucket struct {
	core
	s leakyBucket
}

type leakyBucket struct {
	iv       interval
	capacity int  // saturated: capacity intervals fit in the horizon
	next     fine // when the next grant may be emitted
}

// NewLeakyBucket returns a leaky bucket emitting at rate r that queues at
// most capacity permits. It panics if r or capacity is not positive.
func NewLeakyBucket(r Rate, capacity int, opts ...Option) *LeakyBucket {
	mustRate(r, "NewLeakyBucket")
	mustPositive(capacity, "NewLeakyBucket", "capacity")
	lb := &LeakyBucket{}
	lb.s.set(newInterval(r), capacity)
	lb.s.next = fine{ns: monoNow()}
	lb.init(&lb.s, newConfig(lb.s.capacity, opts))
	return lb
}

func (l *leakyBucket) set(iv interval, capacity int) {
	l.iv, l.capacity = iv, min(capacity, iv.count(fine{ns: horizon}))
}

func (l *leakyBucket) algorithm() string { return AlgLeakyBucket }
func (l *leakyBucket) now() int64        { return monoNow() }
func (l *leakyBucket) limit() int        { return l.capacity }

func (l *leakyBucket) wait(now int64, n int) int64 {
	if less(fine{ns: now}, l.next) {
		return l.iv.sub(l.next, fine{ns: now}).ceil()
	}
	return 0
}

func (l *leakyBucket) take(now int64, n int) {
	// Keep the phase when the grant comes on time (the waker fires at the due
	// nanosecond rounded up); restart it after an idle spell.
	base := fine{ns: now}
	if l.next.ceil() >= now && less(l.next, base) {
		base = l.next
	}
	l.next = l.iv.add(base, l.iv.times(n))
}

func (l *leakyBucket) refund(_ int64, n int) {
	l.next = l.iv.sub(l.next, l.iv.times(n))
}

func (l *leakyBucket) state(now int64, queued int) (int, int, int64) {
	busy := int64(0)
	if less(fine{ns: now}, l.next) {
		busy = l.iv.sub(l.next, fine{ns: now}).ceil()
	}
	if queued >= 0 && queued <= l.capacity { // < 0: the count overflowed

		busy += l.iv.times(queued).ceil()
	} else {
		busy += horizon // saturated: the queue outlasts the clock's range
	}
	return l.capacity, max(l.capacity-queued, 0), busy
}

// project is closed-form in the permits ahead: the first waiter is emitted
// at next (or now, when the bucket is idle), and each grant occupies its
// permits' intervals, so n more permits are due once every permit ahead
// has been emitted, whatever n is.
func (l *leakyBucket) project(now int64, ahead waiters, n int) int64 {
	if ahead.first == nil {
		return l.wait(now, n)
	}
	base := fine{ns: now}
	if l.next.ceil() >= now { // as take keeps the phase of a grant on time
		base = l.next
	}
	span, ok := l.iv.timesSat(ahead.permits)
	if !ok {
		return never
	}
	return max(l.iv.add(base, span).ceil()-now, 0)
}

// reconfigure switches to iv and capacity at now. A grant still occupying
// its intervals keeps occupying as many whole intervals (rounded up) at the
// new rate.
func (l *leakyBucket) reconfigure(now int64, iv interval, capacity int) {
	if iv != l.iv && less(fine{ns: now}, l.next) {
		busy := l.iv.sub(l.next, fine{ns: now})
		k := l.iv.count(busy)
		if less(l.iv.times(k), busy) {
			k++
		}
		l.set(iv, capacity)
		l.next = iv.add(fine{ns: now}, iv.times(min(k, l.capacity)))
		return
	}
	l.set(iv, capacity)
}
