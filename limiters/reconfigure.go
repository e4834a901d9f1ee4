package limiters

import (
	"fmt"
	"time"

	"github.com/throttlekit/throttle/internal/clip"
)

// Reconfigurable is a limiter whose limits can change at run time while it
// keeps its state: every limiter a Spec describes implements it (TokenBucket,
// GCRA, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog, Concurrency),
// so a limiter built by Spec.New can be asserted to it.
type Reconfigurable interface {
	// Reconfigure switches the limiter to s, which must Validate and name
	// the limiter's own algorithm (else an error naming the field). The
	// limiter keeps what it holds, as its typed setters describe; queued
	// waiters are re-timed, and those asking for more than the new limit
	// fail with ErrExceedsLimit. s.QueueLimit replaces the queue limit (0:
	// the algorithm's default); waiters already queued stay.
	Reconfigure(s Spec) error
}

var (
	_ Reconfigurable = (*TokenBucket)(nil)
	_ Reconfigurable = (*GCRA)(nil)
	_ Reconfigurable = (*LeakyBucket)(nil)
	_ Reconfigurable = (*FixedWindow)(nil)
	_ Reconfigurable = (*SlidingWindow)(nil)
	_ Reconfigurable = (*SlidingLog)(nil)
	_ Reconfigurable = (*Concurrency)(nil)
)

// reconfigure runs change under c.mu at the algorithm's time, then re-times
// the queue: waiters asking for more than the new limit fail with
// ErrExceedsLimit, the others are granted if they now fit, and the waker is
// re-armed for the new head's due time. A Chain the limiter belongs to is
// told, since its waiters may now fit too.
func (c *core) reconfigure(change func(now int64)) {
	t := c.alg.now()
	c.mu.Lock()
	now := c.clock(t)
	change(now)
	if c.q != nil {
		c.q.Bump() // projections cached no longer hold
	}
	if c.head() != nil {
		lim := c.alg.limit()
		for w := c.q.Head(); w != nil; {
			next := w.Next()
			if w.N > lim {
				c.rejected += int64(w.N)
				c.q.Fail(w, ErrExceedsLimit)
			}
			w = next
		}
		c.q.due = 0 // the old due time no longer holds
		c.dispatch(now)
	}
	p := c.parent
	c.mu.Unlock()
	p.wake()
}

// setQueueLimit replaces the queue limit. c.mu must be held.
func (c *core) setQueueLimit(permits int) {
	if c.cfg.queueLimit != permits {
		cfg := *c.cfg
		cfg.queueLimit = permits
		c.cfg = &cfg
	}
}

// checkFor validates s as the new configuration of a limiter of alg.
func (s Spec) checkFor(alg string) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Algorithm != alg {
		return fmt.Errorf("limiters: spec algorithm: a %s limiter cannot become %s; build a new one", alg, clip.Quote(s.Algorithm))
	}
	return nil
}

// queueLimit is the queue limit s asks for, def when it leaves the default.
func (s Spec) queueLimit(def int) int {
	if s.QueueLimit > 0 {
		return s.QueueLimit
	}
	return def
}

// SetRate changes the refill rate. The bucket keeps what it holds: its
// whole permits exactly, a partially refilled one in proportion to the new
// interval, capped by the burst (which saturates anew, as NewTokenBucket
// describes). Waiters are re-timed. It panics if r is not positive.
func (b *bucketLimiter) SetRate(r Rate) {
	mustRate(r, "SetRate")
	b.reconfigure(func(now int64) { b.s.reconfigure(now, newBucket(r, b.s.burst)) })
}

// SetLimit changes the burst. The bucket keeps the permits it holds, capped
// by the new burst; waiters are re-timed, and those asking for more than the
// new burst fail with ErrExceedsLimit. It panics if burst is not positive.
func (b *bucketLimiter) SetLimit(burst int) {
	mustPositive(burst, "SetLimit", "burst")
	b.reconfigure(func(now int64) { b.s.reconfigure(now, newBucket(b.s.iv.rate(), burst)) })
}

// Reconfigure switches to s.Rate and s.Limit (the burst) as SetRate and
// SetLimit do, and to s.QueueLimit; see Reconfigurable.
func (b *bucketLimiter) Reconfigure(s Spec) error {
	if err := s.checkFor(b.s.algorithm()); err != nil {
		return err
	}
	b.reconfigure(func(now int64) {
		b.s.reconfigure(now, newBucket(s.Rate, s.Limit))
		b.setQueueLimit(s.queueLimit(-1))
	})
	return nil
}

// SetRate changes the emission rate. A grant still occupying its intervals
// keeps occupying as many whole intervals (rounded up) at the new rate, and
// waiters are re-timed. It panics if r is not positive.
func (lb *LeakyBucket) SetRate(r Rate) {
	mustRate(r, "SetRate")
	lb.reconfigure(func(now int64) { lb.s.reconfigure(now, newInterval(r), lb.s.capacity) })
}

// SetLimit changes the capacity: the Limit a Decision advertises and, unless
// WithQueueLimit or a Spec set another, the queue limit. Waiters asking for
// more than the new capacity fail with ErrExceedsLimit. It panics if
// capacity is not positive.
func (lb *LeakyBucket) SetLimit(capacity int) {
	mustPositive(capacity, "SetLimit", "capacity")
	lb.reconfigure(func(now int64) {
		old := lb.s.capacity
		lb.s.reconfigure(now, lb.s.iv, capacity)
		if lb.cfg.queueLimit == old {
			lb.setQueueLimit(lb.s.capacity)
		}
	})
}

// Reconfigure switches to s.Rate, s.Limit (the capacity) and s.QueueLimit
// (0: the capacity); see Reconfigurable and SetRate.
func (lb *LeakyBucket) Reconfigure(s Spec) error {
	if err := s.checkFor(AlgLeakyBucket); err != nil {
		return err
	}
	lb.reconfigure(func(now int64) {
		lb.s.reconfigure(now, newInterval(s.Rate), s.Limit)
		lb.setQueueLimit(s.queueLimit(lb.s.capacity))
	})
	return nil
}

// SetLimit changes the permits admitted per window. The counts kept so far
// stay: lowered below them, nothing more is admitted until the window
// moves on (SlidingLog: until enough grants expire). It panics if limit is
// not positive.
func (wl *windowLimiter) SetLimit(limit int) {
	mustPositive(limit, "SetLimit", "limit")
	wl.reconfigure(func(int64) { wl.w.lim = limit })
}

// SetWindow changes the window's length. The counts carry into the windows
// of the new length around now (which stay aligned to the Unix epoch);
// SlidingLog's grants now expire window after they were made. It panics if
// window is not positive.
func (wl *windowLimiter) SetWindow(window time.Duration) {
	mustWindow(window, "SetWindow")
	wl.reconfigure(func(now int64) { wl.w.setWindow(now, int64(window)) })
}

// Reconfigure switches to s.Limit, s.Window and s.QueueLimit as SetLimit and
// SetWindow do; see Reconfigurable.
func (wl *windowLimiter) Reconfigure(s Spec) error {
	if err := s.checkFor(wl.alg.algorithm()); err != nil {
		return err
	}
	wl.reconfigure(func(now int64) {
		wl.w.lim = s.Limit
		wl.w.setWindow(now, int64(s.Window))
		wl.setQueueLimit(s.queueLimit(-1))
	})
	return nil
}

// SetLimit changes how many permits may be held at once. Permits held
// stay held: lowered below them, nothing more is granted until enough are
// released. Raised, it grants the waiters that now fit. It panics if max is
// not positive.
func (c *Concurrency) SetLimit(max int) {
	mustPositive(max, "SetLimit", "max")
	c.reconfigure(func(int64) { c.s.max = max })
}

// Reconfigure switches to s.Limit (the most permits held) and s.QueueLimit
// as SetLimit does; see Reconfigurable.
func (c *Concurrency) Reconfigure(s Spec) error {
	if err := s.checkFor(AlgConcurrency); err != nil {
		return err
	}
	c.reconfigure(func(int64) {
		c.s.max = s.Limit
		c.setQueueLimit(s.queueLimit(-1))
	})
	return nil
}
