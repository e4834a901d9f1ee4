package repository

import (
	"context"
	"sync/atomic"

	"github.com/throttlekit/throttle/limiters"
)

// Repository holds one limiter per key. Implementations are safe for
// concurrent use.
//
// A permit count n is never negative: TryAcquire and Acquire panic on
// n < 0 (a programming error), in every implementation of this module —
// Memory, GCRA, redisrepo and the ratelimitd client — and Release does too
// where it gives permits back (Memory, GCRA, redisrepo). n == 0 is a peek.
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

// Stats reports what a memory repository holds and what its WithMaxKeys
// bound has cost. Forgetting a key whose limiter is full again loses nothing
// and is not counted.
type Stats struct {
	// Keys is the number of keys held now.
	Keys int
	// Evicted counts keys evicted to make room for a new key while their
	// limiter still held state (it was not full again): each such key
	// starts over full and may admit up to its limit again. See EvictStale.
	Evicted int64
	// Refused counts new keys refused with ErrTooManyKeys.
	Refused int64
}

// boundCounts are the counters behind Stats.Evicted and Stats.Refused.
type boundCounts struct {
	evicted, refused atomic.Int64
}

func (b *boundCounts) stats(keys int) Stats {
	return Stats{Keys: keys, Evicted: b.evicted.Load(), Refused: b.refused.Load()}
}
