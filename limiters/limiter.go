package limiters

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter is the interface every algorithm in this package implements.
//
// All methods are safe for concurrent use. A permit count n is never
// negative: TryAcquire, Acquire and Release panic on n < 0 (a programming
// error, like a negative slice length), every limiter of this package
// alike; n == 0 is a peek. Implementations outside this package should do
// the same.
type Limiter interface {
	// TryAcquire takes n permits now or not at all. It never waits, and it
	// fails while any Acquire caller is queued (FIFO: nobody jumps the queue).
	TryAcquire(n int) Decision
	// Acquire waits, in arrival order (within the priority WithPriority
	// gives ctx), until n permits are granted. It returns early with ctx's
	// error, with ErrQueueFull, with ErrClosed, or with a *RejectedError
	// when the deadline of ctx would pass before its turn.
	Acquire(ctx context.Context, n int) error
	// Release gives back n permits. Only Concurrency holds permits; the
	// rate limiters ignore it.
	Release(n int)
	// Stats reports cumulative counters and the current state.
	Stats() Stats
	// Close fails every queued waiter with ErrClosed, stops timers, and makes
	// later calls fail. It is idempotent.
	Close() error
}

// Decision is the outcome of TryAcquire: whether the permits were taken and
// the limiter's state afterwards, in the terms a rate-limit header uses.
type Decision struct {
	Allowed    bool
	Limit      int           // the capacity a header would advertise
	Remaining  int           // permits left after this decision
	ResetAfter time.Duration // until the limiter is fully replenished / window ends
	RetryAfter time.Duration // when denied: earliest moment n permits could be granted
}

// Stats is a snapshot of a limiter's counters.
type Stats struct {
	Acquired, Rejected int64 // cumulative permits
	Available          int   // permits free now
	Queued             int   // waiters in the queue (Acquire calls, not permits)
}

var (
	// ErrClosed is returned by every call on a closed limiter, and to every
	// waiter queued when Close was called.
	ErrClosed = errors.New("limiters: limiter closed")
	// ErrQueueFull is returned by Acquire when the wait queue has no room for
	// the request's permits.
	ErrQueueFull = errors.New("limiters: queue full")
	// ErrExceedsLimit is returned by Acquire when n is larger than the
	// limiter could ever grant at once.
	ErrExceedsLimit = errors.New("limiters: request exceeds limit")
	// ErrRateLimited is matched (errors.Is) by every *RejectedError.
	ErrRateLimited = errors.New("limiters: rate limited")
)

// RejectedError reports that a request was refused because it could not be
// granted in time. RetryAfter says when it could have been.
type RejectedError struct {
	Limiter    string        // the limiter's name (WithName), may be empty
	RetryAfter time.Duration // how long until the permits could be granted
	Reason     string        // a short human-readable cause
	// Cause is the bound the wait would have passed, when it was the
	// context's deadline: context.DeadlineExceeded, so that
	// errors.Is(err, context.DeadlineExceeded) holds for such a refusal (as
	// golang/go#54541 asks of x/time/rate). It is nil for other bounds (a
	// Transport's WithMaxWait) and for refusals that were not about waiting.
	Cause error
}

func (e *RejectedError) Error() string {
	name := e.Limiter
	if name != "" {
		name = " " + name
	}
	if e.Reason == "" {
		return fmt.Sprintf("limiters: rate limited%s: retry after %v", name, e.RetryAfter)
	}
	return fmt.Sprintf("limiters: rate limited%s: %s: retry after %v", name, e.Reason, e.RetryAfter)
}

// Is reports true for ErrRateLimited, so errors.Is(err, ErrRateLimited) holds
// for every *RejectedError.
func (e *RejectedError) Is(target error) bool { return target == ErrRateLimited }

// Unwrap returns Cause, so a refusal caused by the context's deadline also
// matches context.DeadlineExceeded.
func (e *RejectedError) Unwrap() error { return e.Cause }
