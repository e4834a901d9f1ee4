package repository

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// adminRepo is what the Admin tests need of a repository.
type adminRepo interface {
	Repository
	Admin
	Len() int
}

// adminRepos are both memory repositories with 3 permits per hour a key.
func adminRepos() map[string]func() adminRepo {
	return map[string]func() adminRepo{
		"Memory": func() adminRepo { return NewMemory(tokenBucket(limiters.PerHour(3), 3)) },
		"GCRA":   func() adminRepo { return NewGCRA(limiters.PerHour(3), 3) },
	}
}

func TestPeekSpendsNothingAndCreatesNothing(t *testing.T) {
	for name, newRepo := range adminRepos() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo()
				defer r.Close()
				ctx := context.Background()
				for range 3 {
					d, err := r.Peek(ctx, "absent")
					require.NoError(t, err)
					assert.Equal(t, limiters.Decision{Allowed: true, Limit: 3, Remaining: 3}, d, "a full limiter")
				}
				assert.Equal(t, 0, r.Len(), "Peek created no key")

				_, err := r.TryAcquire(ctx, "k", 2)
				require.NoError(t, err)
				want, err := r.TryAcquire(ctx, "k", 0)
				require.NoError(t, err)
				for range 5 {
					d, err := r.Peek(ctx, "k")
					require.NoError(t, err)
					assert.Equal(t, want, d)
				}
				d, err := r.TryAcquire(ctx, "k", 1)
				require.NoError(t, err)
				assert.True(t, d.Allowed, "the peeks spent nothing")
				assert.Equal(t, 0, d.Remaining)
				assert.Equal(t, 1, r.Len())
			})
		})
	}
}

func TestResetGivesAFullLimiter(t *testing.T) {
	for name, newRepo := range adminRepos() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo()
				defer r.Close()
				ctx := context.Background()
				require.NoError(t, r.Reset(ctx, "absent"), "resetting an absent key is not an error")
				assert.Equal(t, 0, r.Len())

				_, err := r.TryAcquire(ctx, "k", 3)
				require.NoError(t, err)
				d, err := r.TryAcquire(ctx, "k", 1)
				require.NoError(t, err)
				require.False(t, d.Allowed)

				require.NoError(t, r.Reset(ctx, "k"))
				d, err = r.TryAcquire(ctx, "k", 1)
				require.NoError(t, err)
				assert.True(t, d.Allowed)
				assert.Equal(t, 2, d.Remaining, "a full limiter")
			})
		})
	}
}

func TestResetFailsWaiters(t *testing.T) {
	for name, newRepo := range adminRepos() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo()
				defer r.Close()
				ctx := context.Background()
				require.NoError(t, r.Acquire(ctx, "k", 3))
				errs := make(chan error, 2)
				for range 2 {
					go func() { errs <- r.Acquire(ctx, "k", 1) }()
				}
				// Another key's waiter is not disturbed.
				require.NoError(t, r.Acquire(ctx, "other", 3))
				other := make(chan error, 1)
				go func() { other <- r.Acquire(ctx, "other", 1) }()
				synctest.Wait()

				require.NoError(t, r.Reset(ctx, "k"))
				for range 2 {
					assert.ErrorIs(t, <-errs, limiters.ErrClosed)
				}
				d, err := r.TryAcquire(ctx, "k", 3)
				require.NoError(t, err)
				assert.True(t, d.Allowed, "the failed waiters took nothing from the new limiter")

				time.Sleep(20 * time.Minute)
				assert.NoError(t, <-other)
			})
		})
	}
}

func TestAdminAfterClose(t *testing.T) {
	for name, newRepo := range adminRepos() {
		t.Run(name, func(t *testing.T) {
			r := newRepo()
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := r.Peek(cancelled, "k")
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, r.Reset(cancelled, "k"), context.Canceled)

			require.NoError(t, r.Close())
			_, err = r.Peek(context.Background(), "k")
			assert.ErrorIs(t, err, limiters.ErrClosed)
			assert.ErrorIs(t, r.Reset(context.Background(), "k"), limiters.ErrClosed)
		})
	}
}

// TestReleaseAfterResetIsHarmless: the permit held when its key was reset
// comes back after the key has a new limiter, whose own holder still holds
// its permit. The late Release neither panics nor frees the new holder's
// permit.
func TestReleaseAfterResetIsHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(1) })
		defer m.Close()
		ctx := context.Background()
		require.NoError(t, m.Acquire(ctx, "k", 1)) // holder A
		require.NoError(t, m.Reset(ctx, "k"))
		require.NoError(t, m.Acquire(ctx, "k", 1)) // holder B, on the new limiter

		require.NotPanics(t, func() { require.NoError(t, m.Release(ctx, "k", 1)) }) // A's, late
		d, err := m.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "B still holds the only permit")

		require.NoError(t, m.Release(ctx, "k", 1)) // B's
		d, err = m.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		require.NoError(t, m.Release(ctx, "k", 1))

		// A permit whose key was reset and never recreated: its Release
		// finds nothing, and settles the debt, so later pairs balance.
		require.NoError(t, m.Acquire(ctx, "j", 1))
		require.NoError(t, m.Reset(ctx, "j"))
		require.NoError(t, m.Release(ctx, "j", 1))
		assert.False(t, m.has("j"), "Release created nothing")
		require.NoError(t, m.Acquire(ctx, "j", 1))
		require.NoError(t, m.Release(ctx, "j", 1))
		d, err = m.TryAcquire(ctx, "j", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)

		g := NewGCRA(limiters.PerHour(1), 1)
		defer g.Close()
		require.NoError(t, g.Acquire(ctx, "k", 1))
		require.NoError(t, g.Reset(ctx, "k"))
		assert.NoError(t, g.Release(ctx, "k", 1), "token buckets hold nothing to release")
	})
}
