package repository_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// TestGCRAMatchesMemoryOfGCRA: on random traffic over a few keys, the
// compact repository decides exactly what NewMemory with GCRA limiters does.
func TestGCRAMatchesMemoryOfGCRA(t *testing.T) {
	for seed := range uint64(10) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			r, burst := limiters.Rate{N: 7, Per: 2 * time.Second}, 1+rng.IntN(5)
			compact := repository.NewGCRA(r, burst)
			defer compact.Close()
			mem := repository.NewMemory(func(string) limiters.Limiter { return limiters.NewGCRA(r, burst) })
			defer mem.Close()
			ctx := context.Background()
			for i := range 400 {
				time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
				key := fmt.Sprint("k", rng.IntN(4))
				n := rng.IntN(burst + 2)
				want, err1 := mem.TryAcquire(ctx, key, n)
				got, err2 := compact.TryAcquire(ctx, key, n)
				require.NoError(t, err1)
				require.NoError(t, err2)
				require.Equal(t, want, got, "seed %d step %d key %s n %d", seed, i, key, n)
			}
		})
	}
}

func TestGCRAAcquireWaitsInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := repository.NewGCRA(limiters.PerSecond(10), 1)
		defer g.Close()
		ctx := context.Background()
		require.NoError(t, g.Acquire(ctx, "a", 1))
		start := time.Now()
		var mu sync.Mutex
		var order []int
		var at []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				require.NoError(t, g.Acquire(ctx, "a", 1))
				mu.Lock()
				order = append(order, i)
				at = append(at, time.Since(start))
				mu.Unlock()
			})
			synctest.Wait()
		}
		d, err := g.TryAcquire(ctx, "a", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "TryAcquire does not overtake the waiters")
		wg.Wait()
		assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond,
			400 * time.Millisecond, 500 * time.Millisecond}, at)
	})
}

func TestGCRAAcquireFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := repository.NewGCRA(limiters.PerSecond(1), 2)
		ctx := context.Background()
		assert.ErrorIs(t, g.Acquire(ctx, "a", 3), limiters.ErrExceedsLimit)
		require.NoError(t, g.Acquire(ctx, "a", 2))

		// Its turn would come after the deadline: refused at once.
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		start := time.Now()
		err := g.Acquire(dctx, "a", 1)
		cancel()
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej)
		assert.Equal(t, time.Second, rej.RetryAfter)
		assert.Zero(t, time.Since(start))

		// A waiter that gives up gives its permits back.
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- g.Acquire(cctx, "a", 1) }()
		synctest.Wait()
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		time.Sleep(time.Second)
		d, _ := g.TryAcquire(ctx, "a", 1)
		assert.True(t, d.Allowed, "the cancelled reservation's permit came back")

		// Close fails waiters and later calls.
		go func() { done <- g.Acquire(ctx, "a", 2) }()
		synctest.Wait()
		require.NoError(t, g.Close())
		require.NoError(t, g.Close())
		assert.ErrorIs(t, <-done, limiters.ErrClosed)
		_, err = g.TryAcquire(ctx, "a", 1)
		assert.ErrorIs(t, err, limiters.ErrClosed)
	})
}

func TestGCRAForgetsFullKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := repository.NewGCRA(limiters.PerSecond(10), 5)
		defer g.Close()
		ctx := context.Background()
		for i := range 1000 {
			_, err := g.TryAcquire(ctx, fmt.Sprint("old", i), 1)
			require.NoError(t, err)
		}
		assert.Equal(t, 1000, g.Len())
		time.Sleep(time.Second) // every bucket is full again
		for i := range 1000 {
			_, err := g.TryAcquire(ctx, fmt.Sprint("new", i), 1)
			require.NoError(t, err)
		}
		assert.Less(t, g.Len(), 1500, "new keys sweep away full ones as they come")
		d, err := g.TryAcquire(ctx, "old1", 0)
		require.NoError(t, err)
		assert.Equal(t, 5, d.Remaining, "a forgotten key is a full bucket")
	})
}

func TestGCRAMaxKeysBoundsAFlood(t *testing.T) {
	g := repository.NewGCRA(limiters.PerHour(1), 10, repository.WithMaxKeys(1000))
	defer g.Close()
	ctx := context.Background()
	for i := range 100_000 {
		_, err := g.TryAcquire(ctx, fmt.Sprint("flood", i), 1)
		require.NoError(t, err)
		if i%10_000 == 0 {
			require.LessOrEqual(t, g.Len(), 1000)
		}
	}
	assert.LessOrEqual(t, g.Len(), 1000)
	assert.Greater(t, g.Len(), 900)
}

func TestGCRANoOverAdmissionUnderContention(t *testing.T) {
	g := repository.NewGCRA(limiters.PerHour(1), 10)
	defer g.Close()
	ctx := context.Background()
	var admitted [20]atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for i := range 200 {
				k := i % 20
				if d, err := g.TryAcquire(ctx, fmt.Sprint("key", k), 1); err == nil && d.Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range admitted {
		assert.EqualValues(t, 10, admitted[k].Load(), "key %d", k)
	}
}

func TestGCRAExistingKeyDoesNotAllocate(t *testing.T) {
	g := repository.NewGCRA(limiters.PerSecond(1e6), 1e6)
	defer g.Close()
	ctx := context.Background()
	g.TryAcquire(ctx, "k", 1)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { g.TryAcquire(ctx, "k", 1) }))
}

func TestGCRASetRateKeepsUsedPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := repository.NewGCRA(limiters.PerSecond(10), 10)
		defer g.Close()
		ctx := context.Background()
		take := func(k string, n int) limiters.Decision {
			t.Helper()
			d, err := g.TryAcquire(ctx, k, n)
			require.NoError(t, err)
			return d
		}
		require.True(t, take("used4", 4).Allowed)
		require.True(t, take("empty", 10).Allowed)
		require.True(t, take("full", 0).Allowed)

		// A larger burst: used permits carry over, the rest is free.
		require.NoError(t, g.SetRate(limiters.PerSecond(10), 20))
		assert.Equal(t, limiters.Decision{Allowed: true, Limit: 20, Remaining: 16, ResetAfter: 400 * time.Millisecond}, take("used4", 0))
		assert.Equal(t, limiters.Decision{Allowed: true, Limit: 20, Remaining: 20}, take("full", 0))
		assert.Equal(t, 10, take("empty", 0).Remaining)

		// A smaller burst caps what is used: an empty bucket stays empty,
		// and is full again after the new burst's refill.
		require.NoError(t, g.SetRate(limiters.PerSecond(10), 5))
		assert.Equal(t, limiters.Decision{Allowed: true, Limit: 5, Remaining: 1, ResetAfter: 400 * time.Millisecond}, take("used4", 0))
		d := take("empty", 1)
		assert.False(t, d.Allowed)
		assert.Equal(t, 100*time.Millisecond, d.RetryAfter)
		assert.Equal(t, 500*time.Millisecond, d.ResetAfter)

		// A slower rate: the used permits come back at it.
		require.NoError(t, g.SetRate(limiters.PerSecond(1), 5))
		assert.Equal(t, 4*time.Second, take("used4", 0).ResetAfter)
		time.Sleep(time.Second)
		assert.Equal(t, 2, take("used4", 0).Remaining)
		assert.Equal(t, 2, g.Len(), "full keys need no state")

		assert.ErrorContains(t, g.SetRate(limiters.Rate{}, 5), "rate")
		assert.ErrorContains(t, g.SetRate(limiters.PerSecond(1), 0), "limit")
		assert.Equal(t, 5, take("full", 0).Limit, "an invalid change changes nothing")
		require.NoError(t, g.Close())
		assert.ErrorIs(t, g.SetRate(limiters.PerSecond(1), 5), limiters.ErrClosed)
	})
}

// TestGCRASetRateSameRateChangesNothing: setting the rate a repository has
// leaves every decision as it was, on random traffic.
func TestGCRASetRateSameRateChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := limiters.Rate{N: 3, Per: 300 * time.Millisecond}
		g, ref := repository.NewGCRA(r, 4), repository.NewGCRA(r, 4)
		defer g.Close()
		defer ref.Close()
		ctx := context.Background()
		for i := range 300 {
			time.Sleep(time.Duration(i%7) * 37 * time.Millisecond)
			key, n := fmt.Sprint("k", i%3), i%5
			if i%10 == 0 {
				require.NoError(t, g.SetRate(r, 4))
			}
			want, err := ref.TryAcquire(ctx, key, n)
			require.NoError(t, err)
			got, err := g.TryAcquire(ctx, key, n)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d", i)
		}
	})
}

// TestGCRASetRateMidQueue: reservations made before the change are granted
// at their times, once each, and the bucket is empty when the last is due:
// nothing is lost and nothing granted twice.
func TestGCRASetRateMidQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := repository.NewGCRA(limiters.PerSecond(10), 1)
		defer g.Close()
		ctx := context.Background()
		start := time.Now()
		require.NoError(t, g.Acquire(ctx, "k", 1))
		var mu sync.Mutex
		var at []time.Duration
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				assert.NoError(t, g.Acquire(ctx, "k", 1))
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			})
			synctest.Wait()
		}
		require.NoError(t, g.SetRate(limiters.PerSecond(1), 1))
		wg.Wait()
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, at)

		// The last reservation emptied the bucket at 300ms; at 1/s the
		// next permit is due a second later.
		d, err := g.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed)
		assert.Equal(t, time.Second, d.RetryAfter)
		time.Sleep(time.Second)
		d, err = g.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
	})
}

func TestGCRAHoldsNoPermits(t *testing.T) {
	g := repository.NewGCRA(limiters.PerSecond(1), 1)
	defer g.Close()
	var r repository.Repository = g
	h, ok := r.(limiters.PermitHolder)
	require.True(t, ok, "a repository can say whether its permits are held")
	assert.False(t, h.HoldsPermits())
}

func TestGCRAOptions(t *testing.T) {
	_, ok := repository.WithIdleTimeout(time.Minute).(repository.GCRAOption)
	assert.False(t, ok, "NewGCRA does not take WithIdleTimeout, which it would ignore")
	for _, o := range []repository.Option{repository.WithMaxKeys(1), repository.WithOverflow(repository.RefuseNew)} {
		_, ok := o.(repository.GCRAOption)
		assert.True(t, ok)
	}
}
