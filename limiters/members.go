package limiters

import "time"

// Member is one limit's state at one moment, as a server advertises it in
// response headers: what a Chain's Decision cannot say, since it mixes its
// members (the smallest Remaining, the largest ResetAfter). See Members.
type Member struct {
	// Algorithm is the member's algorithm, as a Spec writes it ("gcra"),
	// or "chain" for a nested Chain.
	Algorithm string
	// Limit, Remaining and ResetAfter are what the member's own Decision
	// would say: its capacity, the permits free now (for a LeakyBucket,
	// the free queue room) and the time until it is full again.
	Limit, Remaining int
	ResetAfter       time.Duration
	// Wait is the time until the member alone could grant the n permits
	// Members was asked about: 0 now, and -1 when waiting alone will not
	// do (n above Limit, a concurrency limit's permits that only Release
	// gives back, a closed limiter).
	Wait time.Duration
	// Next is the time until more permits than Remaining are free (for a
	// LeakyBucket: until its next emission slot); 0 when they are free
	// now, and -1 when waiting alone brings none (a full limiter, a
	// concurrency limit).
	Next time.Duration
}

// Members appends to into the state of each member of l when l is a
// Chain (in the order Chain was given them), or of l itself otherwise, as
// seen for a request of n permits. It takes nothing and changes nothing.
// It returns into unchanged for a Limiter that is not from this package.
//
// Each member is read under its own lock in turn: the states are a
// snapshot per member, not one instant for the whole chain. Servers use it
// to advertise each limit of a rule on its own (package server).
func Members(l Limiter, n int, into []Member) []Member {
	checkN(n)
	b, ok := l.(based)
	if !ok || b == nil {
		return into
	}
	c := b.base()
	if ch, ok := c.alg.(*chain); ok {
		for _, m := range ch.members {
			into = append(into, m.member(n))
		}
		return into
	}
	return append(into, c.member(n))
}

// member reads c's state for Members.
func (c *core) member(n int) Member {
	t := c.alg.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock(t)
	lim, rem, reset := c.alg.state(now, c.queuedPermits())
	m := Member{Algorithm: c.alg.algorithm(), Limit: lim, Remaining: rem, ResetAfter: time.Duration(reset)}
	wait := func(k int) time.Duration {
		switch {
		case c.closed || k > c.alg.limit():
			return -1
		case c.head() != nil:
			if w := c.alg.project(now, c.ahead(0), k); w != never {
				return time.Duration(max(w, 1))
			}
			return -1
		}
		if w := c.alg.wait(now, k); w != never {
			return time.Duration(w)
		}
		return -1
	}
	m.Wait = wait(max(n, 1))
	if n == 0 {
		m.Wait = 0 // a peek is always admitted
	}
	switch {
	case c.alg.algorithm() == AlgLeakyBucket:
		// Its next emission slot, which frees a place in its queue,
		// whoever waits: not the turn of a new request behind them.
		m.Next = -1
		if !c.closed {
			m.Next = time.Duration(c.alg.wait(now, 1))
		}
	case rem >= lim:
		m.Next = -1
	default:
		m.Next = wait(rem + 1)
	}
	return m
}
