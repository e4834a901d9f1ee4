// Package limiters implements rate-limiting and concurrency-limiting
// algorithms behind one interface, Limiter, with one fair wait queue.
//
// The algorithms:
//
//	NewTokenBucket   bursts up to burst, refills continuously at a Rate
//	NewGCRA          the same admissions as TokenBucket, stored as one timestamp
//	NewLeakyBucket   a shaper: grants spaced evenly at a Rate, never bursts
//	NewFixedWindow   limit per window, windows aligned to the Unix epoch
//	NewSlidingWindow two-counter approximation of a sliding window
//	NewSlidingLog    exact sliding window, a log bounded by the limit
//	NewConcurrency   a semaphore: at most max permits in flight
//	Chain            all members must admit, all or nothing
//	FromRate         adapts a golang.org/x/time/rate limiter
//
// Spec describes any of the seven algorithms as data, the form policy files
// and stores use.
//
// Most callers want TryAcquire (servers: admit or reject now, with a
// Decision whose fields map onto rate-limit response headers) or Acquire
// (clients: wait in arrival order until permitted, bounded by a context):
//
//	lim := limiters.NewTokenBucket(limiters.PerSecond(10), 20)
//	if err := lim.Acquire(ctx, 1); err != nil {
//		return err // ctx ended, or its deadline would pass before our turn
//	}
//
// # How it works
//
// Each algorithm is pure integer arithmetic over time, in nanoseconds with
// exact fractions (3/s is an interval of 333333333⅓ ns, kept exactly): given
// the time and n, it takes the permits or says how long until it could. It
// holds no goroutine and no ticker; its state is brought up to date lazily on
// each call. One wait queue (FIFO within a priority) turns that arithmetic
// into blocking Acquire: a single time.AfterFunc, armed only while someone
// waits, wakes the head of the queue at its due time. An idle limiter costs only its struct.
//
// # Fairness and failure
//
// Waiters are granted in arrival order within a priority (WithPriority puts
// one in the context; the default is 0): a waiter of higher priority goes
// before every waiter of lower priority, except that a waiter yields its
// place to at most 64 later arrivals, so low priority delays a request but
// never starves it. A large request at the head holds back smaller ones
// behind it, so it is never starved either. TryAcquire fails while anyone
// waits. Acquire fails at once, without waiting, when it
// could never succeed (ErrExceedsLimit), when the queue has no room
// (ErrQueueFull, see WithQueueLimit), or when its turn — counting the
// waiters it would queue behind — would come after its context's deadline (*RejectedError,
// whose RetryAfter says when it would have come). A waiter whose context ends
// leaves the queue and takes nothing with it: if it was granted at that very
// moment, the permits go back. Close fails every waiter with ErrClosed.
//
// # Limits that change at run time
//
// The seven algorithms implement Reconfigurable (Reconfigure with a Spec of
// the same algorithm) and have typed setters: SetRate and SetLimit on the
// buckets, SetLimit and SetWindow on the windows, SetLimit on Concurrency.
// A change keeps the state that exists — a bucket keeps the permits it
// holds (capped by the new burst), a window keeps its count, a semaphore
// its permits in use — and re-times the queue: waiters that now fit are
// granted, the others wait for their new due time, and those asking for
// more than the new limit fail with ErrExceedsLimit.
//
// Every limiter is safe for concurrent use. Time is read from the time
// package, so tests can run limiters under testing/synctest's fake clock.
//
// # For implementers
//
// Names that only stores and other implementations need: GCRAParams,
// NewGCRAParams and GCRAState take GCRA apart for stores that keep millions
// of keys as one timestamp each (repository.NewGCRA is built on them);
// PermitHolder and HoldsPermits tell whether a limiter's permits stay taken
// until Release. They stay in this package because they are GCRA's own
// exact arithmetic, which no other package can reach.
package limiters
