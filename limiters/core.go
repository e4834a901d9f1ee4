package limiters

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/waitq"
)

// algo is one algorithm's arithmetic: pure functions of its state and the
// time, with no locking, no goroutines and no timers. core serializes calls.
type algo interface {
	// algorithm is the algorithm's name, as a Spec writes it ("gcra"): what
	// a *RejectedError names when the limiter has no WithName.
	algorithm() string
	// now reads the clock the algorithm counts in (nanoseconds).
	now() int64
	// limit is the most permits one request may ask for.
	limit() int
	// wait is 0 when n permits can be taken at now; otherwise the delay until
	// they could be, or never when time alone will not do it.
	wait(now int64, n int) int64
	// take takes n permits; wait(now, n) must have returned 0.
	take(now int64, n int)
	// refund gives back n permits taken by a grant its caller abandoned.
	refund(now int64, n int)
	// state reports the capacity a Decision advertises, the permits free at
	// now and the time until the limiter is fully replenished. queued is
	// the number of permits waiting.
	state(now int64, queued int) (lim, remaining int, resetAfter int64)
	// project is the delay until n permits could be granted to a request
	// that queues behind the waiters ahead.
	project(now int64, ahead waiters, n int) int64
}

// waiter is one blocked Acquire call.
type waiter = waitq.Waiter

// queue is the wait queue of blocked Acquire calls and the single timer
// that wakes its head. It is allocated the first time anyone waits.
type queue struct {
	waitq.Queue
	timer *time.Timer
	due   int64 // when the timer is due, in the algorithm's clock; 0: not armed
}

// waiters is a run of queued waiters, from first to last inclusive, with
// their count and the permits they ask for; the zero value is no waiters.
// The algorithms whose projection is closed-form in the permits ahead read
// only permits; the others walk the run.
type waiters struct {
	first, last *waiter
	count       int
	permits     int
	q           *waitq.Queue // the queue they are in, when it is the algorithm's own; else nil
}

// all yields the waiters in the run, first to last.
func (r waiters) all(yield func(*waiter) bool) {
	for w := r.first; w != nil; w = w.Next() {
		if !yield(w) || w == r.last {
			return
		}
	}
}

// priorityKey is the context key of WithPriority.
type priorityKey struct{}

// WithPriority returns a context whose Acquire calls wait at priority p:
// in a limiter's queue, a waiter of higher priority goes before every
// waiter of lower priority, and equal priorities keep arrival order. The
// default is 0, and negative priorities wait behind it.
//
// Low priority delays a request but never starves it: a waiter yields its
// place to at most 64 later arrivals of higher priority, then keeps it
// against everyone. A deadline is checked against the waiters a request
// would queue behind. TryAcquire still fails while anyone waits, whatever
// their priority.
func WithPriority(ctx context.Context, p int) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// priority is the priority WithPriority put in ctx, or 0.
func priority(ctx context.Context) int {
	p, _ := ctx.Value(priorityKey{}).(int)
	return p
}

// core is the part every limiter shares: the lock, the counters, the FIFO
// wait queue and its waker. The algorithm supplies the arithmetic.
type core struct {
	mu       sync.Mutex // guards everything below and the algorithm's state
	alg      algo
	cfg      *config // immutable: changed only by replacing it (setQueueLimit)
	q        *queue
	parent   *core // the Chain this limiter is a member of, told when permits come back
	closed   bool
	acquired int64
	rejected int64
	last     int64 // the latest time a call saw: time never runs backwards for the algorithm
}

// clock returns t, or the latest time already seen if t is older (t was read
// before the lock was taken, and another call may have gone first). c.mu
// must be held.
func (c *core) clock(t int64) int64 {
	if t < c.last {
		return c.last
	}
	c.last = t
	return t
}

func (c *core) init(a algo, cfg *config) {
	c.alg = a
	c.cfg = cfg
	c.last = math.MinInt64 // clocks may read negative (monoNow in a synctest bubble)
}

// head returns the first waiter, or nil. c.mu must be held.
func (c *core) head() *waiter {
	if c.q == nil {
		return nil
	}
	return c.q.Head()
}

// ahead is the run of waiters a newcomer of priority p would queue behind.
// c.mu must be held.
func (c *core) ahead(p int) waiters {
	if c.q == nil {
		return waiters{}
	}
	n, permits, last := c.q.Ahead(p)
	if last == nil {
		return waiters{}
	}
	return waiters{c.q.Head(), last, n, permits, &c.q.Queue}
}

func (c *core) queuedPermits() int {
	if c.q == nil {
		return 0
	}
	return c.q.Permits()
}

// name is what a *RejectedError calls this limiter: its WithName, else its
// algorithm. c.mu must be held.
func (c *core) name() string {
	if c.cfg.name != "" {
		return c.cfg.name
	}
	return c.alg.algorithm()
}

func checkN(n int) {
	if n < 0 {
		panic(fmt.Sprintf("limiters: negative permit count %d", n))
	}
}

// TryAcquire takes n permits now or not at all. It never waits, and it fails
// while any Acquire caller is queued (FIFO: nobody jumps the queue). n == 0
// is a peek: it takes nothing, and reports Allowed when a permit is free and
// nobody waits. A denied Decision's RetryAfter counts the waiters ahead.
func (c *core) TryAcquire(n int) Decision {
	checkN(n)
	t := c.alg.now() // read the clock outside the lock
	c.mu.Lock()
	now := c.clock(t)
	head := c.head()
	var retry int64
	allowed := false
	switch {
	case c.closed:
	case n > c.alg.limit():
	case n == 0 && head == nil:
		retry = c.alg.wait(now, 1)
		allowed = retry == 0
	case n == 0:
		retry = c.alg.project(now, c.ahead(0), 1)
	case head != nil:
		retry = c.alg.project(now, c.ahead(0), n)
	default:
		retry = c.alg.wait(now, n)
		if retry == 0 {
			c.alg.take(now, n)
			c.acquired += int64(n)
			allowed = true
		}
	}
	if !allowed {
		c.rejected += int64(n)
	}
	lim, rem, reset := c.alg.state(now, c.queuedPermits())
	c.mu.Unlock()
	if allowed || retry == never {
		retry = 0
	}
	return Decision{
		Allowed:    allowed,
		Limit:      lim,
		Remaining:  rem,
		ResetAfter: time.Duration(reset),
		RetryAfter: time.Duration(retry),
	}
}

// Acquire waits, in arrival order within its priority (WithPriority), until
// n permits are granted. It returns early with ctx's error, with
// ErrQueueFull, with ErrClosed, with ErrExceedsLimit when n is more than the
// limiter ever grants at once, or with a *RejectedError when ctx's deadline
// would pass before its turn (the turn counts the waiters it would queue
// behind; the error then also matches context.DeadlineExceeded). An already-cancelled ctx returns its error even
// when permits are free, and a ctx that ends while it waits returns ctx's
// error holding nothing, even if the grant came at that very moment.
func (c *core) Acquire(ctx context.Context, n int) error {
	checkN(n)
	if err := ctx.Err(); err != nil {
		return err
	}
	t := c.alg.now() // read the clock outside the lock
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if n == 0 {
		c.mu.Unlock()
		return nil
	}
	if n > c.alg.limit() {
		c.rejected += int64(n)
		c.mu.Unlock()
		return ErrExceedsLimit
	}
	now := c.clock(t)
	head := c.head()
	if head == nil && c.alg.wait(now, n) == 0 {
		c.alg.take(now, n)
		c.acquired += int64(n)
		c.mu.Unlock()
		return nil
	}
	if c.q == nil {
		c.q = new(queue)
	}
	if !c.q.Fits(n, c.cfg.queueLimit) {
		c.rejected += int64(n)
		c.mu.Unlock()
		return ErrQueueFull
	}
	p := priority(ctx)
	if dl, ok := ctx.Deadline(); ok {
		d := c.alg.project(now, c.ahead(p), n)
		if d != never && time.Duration(d) > time.Until(dl) {
			c.rejected += int64(n)
			err := &RejectedError{Limiter: c.name(), RetryAfter: time.Duration(d),
				Reason: "would wait past the context deadline", Cause: context.DeadlineExceeded}
			c.mu.Unlock()
			return err
		}
	}
	return c.wait(ctx, now, waitq.NewWaiter(n, p))
}

// wait queues w and blocks until it is granted, failed, or ctx ends.
// c.mu must be held; wait unlocks it.
func (c *core) wait(ctx context.Context, now int64, w *waiter) error {
	c.q.Push(w)
	if c.q.Head() == w {
		c.dispatch(now)
	}
	c.mu.Unlock()
	var parent *core
	err := c.q.Wait(ctx, &c.mu, w, func(granted, wasHead bool) {
		now := c.clock(c.alg.now())
		if granted { // as we gave up: give the permits back
			c.alg.refund(now, w.N)
			c.acquired -= int64(w.N)
			c.q.Bump()
		}
		if granted || wasHead { // let the next go
			c.dispatch(now)
		}
		parent = c.parent
	})
	parent.wake() // nil unless ctx ended: permits may have come back
	return err
}

// dispatch grants waiters from the head of the queue while the algorithm
// allows, then arms the timer for the new head's due time. c.mu must be held.
func (c *core) dispatch(now int64) {
	q := c.q
	// Grant at the due time, not at the moment a late waker ran: a waker
	// that fires a little late must not cost the limiter throughput.
	t := now
	if q.due != 0 && q.due < now {
		t = q.due
	}
	for q.Head() != nil {
		w := q.Head()
		if w.N > c.alg.limit() { // a Chain's member lowered its limit
			c.rejected += int64(w.N)
			q.Fail(w, ErrExceedsLimit)
			continue
		}
		d := c.alg.wait(t, w.N)
		if d == never {
			q.stop()
			return
		}
		if d != 0 {
			if late := now - t; d > late {
				c.arm(d - late)
				q.due = satAdd(t, d)
				return
			}
			t += d // fell due while the waker was late
			continue
		}
		c.alg.take(t, w.N)
		c.acquired += int64(w.N)
		q.Grant(w) // the head: projections cached stay true
	}
	q.stop()
}

func (c *core) arm(d int64) {
	if c.q.timer == nil {
		c.q.timer = time.AfterFunc(time.Duration(d), c.wake)
		return
	}
	c.q.timer.Reset(time.Duration(d))
}

func (q *queue) stop() {
	q.due = 0
	if q.timer != nil {
		q.timer.Stop()
	}
}

// wake is the timer's callback, and how a Chain's members tell it that
// permits came back. A nil *core ignores it.
func (c *core) wake() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.head() != nil {
		c.dispatch(c.clock(c.alg.now()))
	}
	// Pass it up even with no waiters here: a Chain nested in a Chain has
	// no waiters of its own, and its parent's waiters need the news.
	p := c.parent
	c.mu.Unlock()
	p.wake()
}

// Release gives back n permits. Only Concurrency holds permits (it, and
// Chain, override this); the rate limiters ignore it.
func (c *core) Release(n int) { checkN(n) }

// Stats reports cumulative counters and the current state.
func (c *core) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, rem, _ := c.alg.state(c.clock(c.alg.now()), c.queuedPermits())
	s := Stats{Acquired: c.acquired, Rejected: c.rejected, Available: rem}
	if c.q != nil {
		s.Queued = c.q.Len()
	}
	return s
}

// Close fails every queued waiter with ErrClosed, stops the timer, and makes
// later calls fail: Acquire with ErrClosed, TryAcquire with a denial. It is
// idempotent and always returns nil.
func (c *core) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.q != nil {
		for w := c.q.Head(); w != nil; w = c.q.Head() {
			c.q.Fail(w, ErrClosed)
		}
		c.q.stop()
	}
	return nil
}

// stepper is what projectCopy needs of an algorithm whose state is a value.
type stepper interface {
	limit() int
	wait(now int64, n int) int64
	take(now int64, n int)
}

// projectCopy runs the waiters ahead against a copy of the algorithm's
// state, granting each at its due time, and returns the delay until n more
// permits could be granted (never if that is beyond the clock's range).
func projectCopy[S any, P interface {
	*S
	stepper
}](s S, now int64, ahead waiters, n int) int64 {
	p := P(&s)
	t := now
	for w := range ahead.all {
		if w.N > p.limit() { // a Chain's waiter, above a member's lowered limit
			return never
		}
		d := p.wait(t, w.N)
		if d >= never-t {
			return never
		}
		t += d
		p.take(t, w.N)
	}
	d := p.wait(t, n)
	if d >= never-t {
		return never
	}
	return t + d - now
}

// projection is what projectCached keeps of a queue, for an algorithm
// whose projection is not closed-form in the permits ahead (the windows):
// the state the algorithm will be in once the waiters up to last are
// granted, each at its due time, and when last is.
type projection[S any] struct {
	q      *waitq.Queue
	gen    uint64 // q.Gen() when it was true
	last   *waiter
	t      int64
	s      S
	beyond bool // the waiters up to last are granted past the clock's range
}

// projectCached is projectCopy for a queue's whole run of waiters, kept up
// to date as waiters join the tail and the head is granted, instead of run
// again over every waiter: the grants follow the projection (each at its
// due time), so the state it reached stays true until the queue changes
// otherwise (waitq's Gen) or the state does (a refund, a reconfiguration,
// a Chain's take: the owner bumps Gen). clone copies a state for the
// projection to change. A run that is not the whole queue (a newcomer of
// higher priority, a Chain's waiters) is projected from scratch.
func projectCached[S any, P interface {
	*S
	stepper
}](pc **projection[S], s S, clone func(S) S, now int64, ahead waiters, n int) int64 {
	if ahead.q == nil || ahead.last != ahead.q.Tail() {
		return projectCopy[S, P](clone(s), now, ahead, n)
	}
	c := *pc
	if c == nil {
		c = new(projection[S])
		*pc = c
	}
	var from *waiter
	switch {
	case c.q == ahead.q && c.gen == ahead.q.Gen() && c.last != nil && c.last.Queued() && c.t >= now:
		from = c.last.Next() // nil when nobody joined since
	default: // from the state now
		c.q, c.gen, c.s, c.t, c.beyond, c.last, from = ahead.q, ahead.q.Gen(), clone(s), now, false, nil, ahead.first
	}
	if c.beyond { // past the clock's range already: later waiters are too
		c.last = ahead.last
		return never
	}
	p := P(&c.s)
	for w := from; w != nil; w = w.Next() {
		if w.N > p.limit() { // a waiter above a lowered limit: dispatch will fail it
			c.last = nil
			return never
		}
		d := p.wait(c.t, w.N)
		if d >= never-c.t {
			c.beyond, c.last = true, ahead.last
			return never
		}
		c.t += d
		p.take(c.t, w.N)
		c.last = w
	}
	d := p.wait(c.t, n)
	if d >= never-c.t {
		return never
	}
	return c.t + d - now
}

// satAdd returns a+b for b ≥ 0, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
