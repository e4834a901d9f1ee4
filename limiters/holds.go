package limiters

// For implementers: PermitHolder is implemented by a Limiter (or a wrapper of one, or a
// repository) that can say whether its permits stay taken until Release.
// A rate limiter's permits are spent when granted and Release ignores them;
// a semaphore's permits are held until Release gives them back.
type PermitHolder interface {
	// HoldsPermits reports whether permits granted by this limiter stay
	// taken until Release. The answer never changes over its life.
	HoldsPermits() bool
}

// HoldsPermits reports whether l's permits stay taken until Release: true for
// Concurrency and for a Chain with such a member, false for the rate
// limiters. A limiter of another package says so by implementing
// PermitHolder; one that does not is assumed to hold permits, since calling
// Release on a rate limiter is harmless by contract and forgetting to call it
// on a semaphore is not.
//
// This is the one place the fact is decided: the Transport (whether a
// response body carries a permit), the repositories (whether a key is idle)
// and the server (whether to Release after the handler) all ask here.
func HoldsPermits(l Limiter) bool {
	if h, ok := l.(PermitHolder); ok {
		return h.HoldsPermits()
	}
	return true
}

// HoldsPermits reports true: a semaphore's permits come back through Release.
func (c *Concurrency) HoldsPermits() bool { return true }

// HoldsPermits reports whether any member holds permits until Release.
func (ch *chainLimiter) HoldsPermits() bool {
	for _, m := range ch.s.owned {
		if HoldsPermits(m) {
			return true
		}
	}
	return false
}

// HoldsPermits reports false for the rate limiters, which share core:
// their permits are spent when granted. Concurrency and Chain override it.
func (c *core) HoldsPermits() bool { return false }
