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
