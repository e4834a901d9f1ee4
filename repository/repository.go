package repository

import (
	"context"

	"github.com/throttlekit/throttle/limiters"
)

// Repository holds one limiter per key. Implementations are safe for
// concurrent use.
type Repository interface {
	TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error)
	Acquire(ctx context.Context, key string, n int) error
	Release(ctx context.Context, key string, n int) error
	Close() error
}

// Admin is implemented by repositories that can report and reset a key's
// state: the operations an operator or a rate-limit service needs ("how much
// does this caller have left?", "give this caller a fresh quota"). The memory
// repositories and the Redis repository implement it.
type Admin interface {
	// Peek reports key's state as TryAcquire(ctx, key, 0) would, and spends
	// nothing. A key the repository does not hold reports a full limiter; Peek
	// never creates one.
	Peek(ctx context.Context, key string) (limiters.Decision, error)
	// Reset forgets key's state: its next call finds a full limiter. Waiters
	// queued on the key fail with limiters.ErrClosed, and permits held on it
	// are forgotten (a later Release of them is harmless). Resetting a key the
	// repository does not hold is not an error.
	Reset(ctx context.Context, key string) error
}
