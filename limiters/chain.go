package limiters

import (
	"errors"
	"fmt"
	"math"
)

// chainLimiter is what Chain returns: a limiter that admits a request only
// when every member admits it, taking from all of them at once or from none.
type chainLimiter struct {
	core
	s chain
}

type chain struct {
	members []*core
	owned   []Limiter // the members as given, for Release and Close
}

// base gives Chain access to the shared core of this package's limiters.
type based interface{ base() *core }

func (c *core) base() *core { return c }

// Chain returns a limiter whose members must all admit a request: all or
// nothing, for TryAcquire and for Acquire alike. Its Acquire waits in one
// FIFO queue of its own, takes nothing from any member while it waits, and
// takes from all of them at once when all can grant.
//
// Chain owns its members: Release and Close pass through to each, and the
// members should not be used on their own afterwards. Its Decision is allowed
// iff all members allow; it reports the smallest Remaining (with that
// member's Limit) and the largest RetryAfter and ResetAfter.
//
// Members must be limiters from this package (including other Chains and
// FromRate adapters); Chain panics on any other Limiter, or on none.
func Chain(ls ...Limiter) Limiter {
	if len(ls) == 0 {
		panic("limiters: Chain needs at least one limiter")
	}
	ch := &chainLimiter{}
	for i, l := range ls {
		b, ok := l.(based)
		if !ok || b == nil {
			panic(fmt.Sprintf("limiters: Chain: member %d (%T) is not a limiter from this package", i, l))
		}
		ch.s.members = append(ch.s.members, b.base())
		ch.s.owned = append(ch.s.owned, l)
	}
	ch.init(&ch.s, newConfig(-1, nil))
	for _, m := range ch.s.members {
		m.mu.Lock()
		m.parent = &ch.core
		m.mu.Unlock()
	}
	return ch
}

// Release gives n permits back to every member (only Concurrency members
// hold any).
func (ch *chainLimiter) Release(n int) {
	checkN(n)
	for _, m := range ch.s.owned {
		m.Release(n)
	}
}

// Close fails the chain's waiters with ErrClosed and closes every member.
func (ch *chainLimiter) Close() error {
	err := ch.core.Close()
	for _, m := range ch.s.owned {
		err = errors.Join(err, m.Close())
	}
	return err
}

func (c *chain) lock() {
	for _, m := range c.members {
		m.mu.Lock()
	}
}

func (c *chain) unlock() {
	for i := len(c.members) - 1; i >= 0; i-- {
		c.members[i].mu.Unlock()
	}
}

func (c *chain) algorithm() string { return "chain" }
func (c *chain) now() int64        { return 0 }

func (c *chain) limit() int {
	c.lock()
	defer c.unlock()
	lim := c.members[0].alg.limit()
	for _, m := range c.members[1:] {
		lim = min(lim, m.alg.limit())
	}
	return lim
}

// wait is the longest any member needs; a member that is closed, or that has
// waiters of its own, counts as never (for closed) or as its projection.
func (c *chain) wait(_ int64, n int) int64 {
	c.lock()
	defer c.unlock()
	var d int64
	for _, m := range c.members {
		var w int64
		switch now := m.alg.now(); {
		case m.closed, n > m.alg.limit(): // a member's limit may have been lowered
			w = never
		case m.head() != nil:
			w = max(m.alg.project(now, m.ahead(math.MinInt), n), 1)
		default:
			w = m.alg.wait(now, n)
		}
		d = max(d, w)
	}
	return d
}

func (c *chain) take(_ int64, n int) {
	c.lock()
	for _, m := range c.members {
		m.alg.take(m.alg.now(), n)
		m.acquired += int64(n)
		if m.q != nil { // what the member's own waiters will find has changed
			m.q.Bump()
		}
	}
	c.unlock()
}

func (c *chain) refund(_ int64, n int) {
	c.lock()
	for _, m := range c.members {
		m.alg.refund(m.alg.now(), n)
		if m.q != nil {
			m.q.Bump()
		}
		m.acquired -= int64(n)
	}
	c.unlock()
}

// state reports the smallest Remaining with its member's Limit, and the
// largest ResetAfter.
func (c *chain) state(_ int64, _ int) (int, int, int64) {
	c.lock()
	defer c.unlock()
	lim, rem, reset := 0, -1, int64(0)
	for _, m := range c.members {
		l, r, t := m.alg.state(m.alg.now(), m.queuedPermits())
		if rem < 0 || r < rem {
			lim, rem = l, r
		}
		reset = max(reset, t)
	}
	return lim, rem, reset
}

func (c *chain) project(_ int64, ahead waiters, n int) int64 {
	c.lock()
	defer c.unlock()
	ahead.q = nil // the chain's waiters, not a member's own queue
	var d int64
	for _, m := range c.members {
		d = max(d, m.alg.project(m.alg.now(), ahead, n))
	}
	return d
}
