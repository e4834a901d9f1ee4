package limiters

import "errors"

// Concurrency is a counting semaphore: at most max permits are held at once,
// and they come back through Release. Waiters are served in FIFO order, and
// a large request at the head blocks smaller ones behind it, so it is never
// starved.
type Concurrency struct {
	core
	s concurrency
}

type concurrency struct {
	max   int
	inUse int
}

// NewConcurrency returns a semaphore of max permits. It panics if max is not
// positive.
func NewConcurrency(max int, opts ...Option) *Concurrency {
	mustPositive(max, "NewConcurrency", "max")
	c := &Concurrency{}
	c.s.max = max
	c.init(&c.s, newConfig(-1, opts))
	return c
}

func (c *concurrency) algorithm() string { return AlgConcurrency }
func (c *concurrency) now() int64        { return 0 }
func (c *concurrency) limit() int        { return c.max }

func (c *concurrency) wait(_ int64, n int) int64 {
	if n <= c.max-c.inUse {
		return 0
	}
	return never
}

func (c *concurrency) take(_ int64, n int)   { c.inUse += n }
func (c *concurrency) refund(_ int64, n int) { c.inUse -= n }

func (c *concurrency) state(int64, int) (int, int, int64) { return c.max, max(c.max-c.inUse, 0), 0 }

func (c *concurrency) project(now int64, ahead waiters, n int) int64 {
	if ahead.first != nil {
		return never
	}
	return c.wait(now, n)
}

var errOverRelease = errors.New("limiters: Concurrency: released more permits than held")

// TryAcquire takes n permits now or not at all; see Limiter. It is the
// semaphore's fast path: no clock, no projection.
func (c *Concurrency) TryAcquire(n int) Decision {
	if n > 0 {
		c.mu.Lock()
		if !c.closed && c.head() == nil {
			if n <= c.s.max-c.s.inUse {
				c.s.inUse += n
				c.acquired += int64(n)
				d := Decision{Allowed: true, Limit: c.s.max, Remaining: c.s.max - c.s.inUse}
				c.mu.Unlock()
				return d
			}
		}
		c.mu.Unlock()
	}
	return c.core.TryAcquire(n)
}

// Release gives back n permits and wakes the waiters they let through. It
// panics if more permits are released than are held, as a semaphore does.
func (c *Concurrency) Release(n int) {
	checkN(n)
	if n == 0 {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if n > c.s.inUse {
		c.s.inUse = 0
		c.mu.Unlock()
		panic(errOverRelease)
	}
	c.s.inUse -= n
	if c.head() != nil {
		c.dispatch(0)
	}
	p := c.parent
	c.mu.Unlock()
	p.wake()
}
