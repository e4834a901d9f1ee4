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

// mustFit panics when burst intervals span more than 2^61 ns (73 years):
// such a limiter could not be represented exactly next to the clock.
func mustFit(iv interval, burst int, ctor, name string) {
	if int64(burst) > (1<<61)/(iv.ns+1) {
		panic(fmt.Sprintf("limiters: %s: %s %d at this rate spans more than 73 years", ctor, name, burst))
	}
}

func mustPositive(v int, ctor, name string) {
	if v <= 0 {
		panic(fmt.Sprintf("limiters: %s: %s must be positive, got %d", ctor, name, v))
	}
}

// TokenBucket is the classic token bucket: it holds up to burst permits,
// starts full, and refills continuously at its rate. Requests take permits
// out; a request larger than what is in the bucket waits for the refill.
//
// Internally the bucket's content is kept as "credit": the time it would
// take to refill it from empty, in exact fractional nanoseconds.
type TokenBucket struct {
	core
	s tokenBucket
}

// bucket is what TokenBucket, GCRA and GCRAParams share: the exact
// emission interval, the burst, and burst intervals (the credit of a full
// bucket, the tolerance of GCRA).
type bucket struct {
	iv    interval
	burst int
	tol   fine
}

// newBucket checks r and burst for ctor and builds their bucket.
func newBucket(r Rate, burst int, ctor string) bucket {
	mustRate(r, ctor)
	mustPositive(burst, ctor, "burst")
	iv := newInterval(r)
	mustFit(iv, burst, ctor, "burst")
	return bucket{iv: iv, burst: burst, tol: iv.times(burst)}
}

type tokenBucket struct {
	bucket
	credit fine
	last   int64
}

// NewTokenBucket returns a token bucket of capacity burst refilling at r.
// It panics if r or burst is not positive.
func NewTokenBucket(r Rate, burst int, opts ...Option) *TokenBucket {
	tb := &TokenBucket{}
	tb.s.bucket = newBucket(r, burst, "NewTokenBucket")
	tb.s.credit = tb.s.tol
	tb.s.last = monoNow()
	tb.init(&tb.s, newConfig(-1, opts))
	return tb
}

func (b *tokenBucket) now() int64 { return monoNow() }
func (b *tokenBucket) limit() int { return b.burst }
func (b *tokenBucket) refill(now int64) {
	if now <= b.last {
		return
	}
	dt := now - b.last
	b.last = now
	if dt >= b.tol.ns+2 { // credit ≥ 0, so the bucket has been full for ≥ 1ns
		b.credit = b.tol
		return
	}
	b.credit = b.capFull(b.iv.add(b.credit, fine{ns: dt}))
}

// capFull caps credit at a full bucket, except that a bucket that became full
// less than a nanosecond ago (at a fractional instant the nanosecond clock
// cannot show) keeps the fraction: a grant at the first nanosecond after a
// due time such as 333333333⅓ ns counts from the exact due time, so waiting
// at a rate like 3/s does not drift. GCRA's base makes the same choice.
func (b *tokenBucket) capFull(credit fine) fine {
	if less(credit, b.iv.add(b.tol, fine{ns: 1})) {
		return credit
	}
	return b.tol
}

func (b *tokenBucket) wait(now int64, n int) int64 {
	b.refill(now)
	need := b.iv.times(n)
	if !less(b.credit, need) {
		return 0
	}
	return b.iv.sub(need, b.credit).ceil()
}

func (b *tokenBucket) take(now int64, n int) {
	b.refill(now)
	b.credit = b.iv.sub(b.credit, b.iv.times(n))
}

func (b *tokenBucket) refund(now int64, n int) {
	b.refill(now)
	b.credit = b.capFull(b.iv.add(b.credit, b.iv.times(n)))
}

func (b *tokenBucket) state(now int64, _ int) (int, int64) {
	b.refill(now)
	return min(b.iv.count(b.credit), b.burst), max(b.iv.sub(b.tol, b.credit).ceil(), 0)
}

func (b *tokenBucket) project(now int64, q *waiter, n int) int64 {
	return projectCopy(*b, now, q, n)
}

// GCRA is the generic cell rate algorithm: a token bucket stored as a single
// timestamp, the theoretical arrival time (TAT) of the next request. It
// admits exactly what a TokenBucket with the same rate and burst admits, on
// every trace, and is what the Redis repository stores.
type GCRA struct {
	core
	s gcra
}

type gcra struct {
	bucket
	tat fine // zero, or any time past, is a full bucket
}

// NewGCRA returns a GCRA limiter with rate r and burst. It panics if r or
// burst is not positive.
func NewGCRA(r Rate, burst int, opts ...Option) *GCRA {
	g := &GCRA{}
	g.s.bucket = newBucket(r, burst, "NewGCRA")
	g.init(&g.s, newConfig(-1, opts))
	return g
}

func (g *gcra) now() int64 { return monoNow() }
func (g *gcra) limit() int { return g.burst }

// base is max(TAT, now), except that a TAT less than a nanosecond before now
// (a fractional instant the nanosecond clock cannot show, such as a due time
// of 333333333⅓ ns whose waiter wakes at 333333334) is kept: the grant counts
// from the exact due time, so waiting at a rate like 3/s does not drift.
// TokenBucket's capFull makes the same choice.
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

func (g *gcra) refund(now int64, n int) {
	g.tat = g.iv.sub(g.tat, g.iv.times(n))
}

func (g *gcra) state(now int64, _ int) (int, int64) {
	b := g.base(now)
	free := g.iv.sub(g.iv.add(fine{ns: now}, g.tol), b)
	return min(g.iv.count(free), g.burst), max(g.iv.sub(b, fine{ns: now}).ceil(), 0)
}

func (g *gcra) project(now int64, q *waiter, n int) int64 {
	return projectCopy(*g, now, q, n)
}

// LeakyBucket is a shaper: it grants permits spaced evenly at its rate and
// never bursts. A grant of n permits occupies n emission intervals, so the
// next grant comes n intervals later. At most capacity permits wait (the
// default queue limit), and capacity is the Limit a Decision advertises;
// Remaining is the free room in the queue.
//
// TryAcquire succeeds only when the bucket is idle: when nobody waits and the
// previous grant's intervals have passed.
type LeakyBucket struct {
	core
	s leakyBucket
}

type leakyBucket struct {
	iv       interval
	capacity int
	next     fine // when the next grant may be emitted
}

// NewLeakyBucket returns a leaky bucket emitting at rate r that queues at
// most capacity permits. It panics if r or capacity is not positive.
func NewLeakyBucket(r Rate, capacity int, opts ...Option) *LeakyBucket {
	mustRate(r, "NewLeakyBucket")
	mustPositive(capacity, "NewLeakyBucket", "capacity")
	lb := &LeakyBucket{}
	lb.s.iv = newInterval(r)
	mustFit(lb.s.iv, capacity, "NewLeakyBucket", "capacity")
	lb.s.capacity = capacity
	lb.s.next = fine{ns: monoNow()}
	lb.init(&lb.s, newConfig(capacity, opts))
	return lb
}

func (l *leakyBucket) now() int64 { return monoNow() }
func (l *leakyBucket) limit() int { return l.capacity }

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

func (l *leakyBucket) refund(now int64, n int) {
	l.next = l.iv.sub(l.next, l.iv.times(n))
}

func (l *leakyBucket) state(now int64, queued int) (int, int64) {
	busy := int64(0)
	if less(fine{ns: now}, l.next) {
		busy = l.iv.sub(l.next, fine{ns: now}).ceil()
	}
	busy += l.iv.times(queued).ceil()
	return max(l.capacity-queued, 0), busy
}

func (l *leakyBucket) project(now int64, q *waiter, n int) int64 {
	return projectCopy(*l, now, q, n)
}

// TryAcquire takes n permits now or not at all; see Limiter. This is the
// hot path of every server: the algorithm is called directly, not through
// the algo interface, so the compiler can inline it.
func (tb *TokenBucket) TryAcquire(n int) Decision {
	if n <= 0 || n > tb.s.burst {
		return tb.core.TryAcquire(n)
	}
	t := monoNow()
	tb.mu.Lock()
	if tb.closed || (tb.q != nil && tb.q.head != nil) {
		tb.mu.Unlock()
		return tb.core.TryAcquire(n)
	}
	now := tb.clock(t)
	retry := tb.s.wait(now, n)
	if retry == 0 {
		tb.s.take(now, n)
		tb.acquired += int64(n)
	} else {
		tb.rejected += int64(n)
	}
	rem, reset := tb.s.state(now, 0)
	tb.mu.Unlock()
	return Decision{Allowed: retry == 0, Limit: tb.s.burst, Remaining: rem,
		ResetAfter: time.Duration(reset), RetryAfter: time.Duration(retry)}
}

// TryAcquire takes n permits now or not at all; see Limiter and
// TokenBucket.TryAcquire.
func (g *GCRA) TryAcquire(n int) Decision {
	if n <= 0 || n > g.s.burst {
		return g.core.TryAcquire(n)
	}
	t := monoNow()
	g.mu.Lock()
	if g.closed || (g.q != nil && g.q.head != nil) {
		g.mu.Unlock()
		return g.core.TryAcquire(n)
	}
	now := g.clock(t)
	retry := g.s.wait(now, n)
	if retry == 0 {
		g.s.take(now, n)
		g.acquired += int64(n)
	} else {
		g.rejected += int64(n)
	}
	rem, reset := g.s.state(now, 0)
	g.mu.Unlock()
	return Decision{Allowed: retry == 0, Limit: g.s.burst, Remaining: rem,
		ResetAfter: time.Duration(reset), RetryAfter: time.Duration(retry)}
}
