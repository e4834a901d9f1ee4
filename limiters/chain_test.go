package limiters_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

func TestChainTryAcquireAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := limiters.NewTokenBucket(limiters.PerSecond(1), 5)
		fw := limiters.NewFixedWindow(2, time.Minute)
		sem := limiters.NewConcurrency(4)
		ch := limiters.Chain(tb, fw, sem)
		defer ch.Close()

		d := ch.TryAcquire(3)
		assert.False(t, d.Allowed, "the window allows only 2")
		assert.Equal(t, 5, tb.TryAcquire(0).Remaining, "the denial took nothing from the bucket")
		assert.Equal(t, 4, sem.Stats().Available, "nor from the semaphore")
		assert.Equal(t, 2, fw.Stats().Available)

		require.True(t, ch.TryAcquire(2).Allowed)
		assert.Equal(t, 3, tb.TryAcquire(0).Remaining)
		assert.Equal(t, 0, fw.Stats().Available)
		assert.Equal(t, 2, sem.Stats().Available)
		for _, m := range []limiters.Limiter{tb, fw, sem} {
			assert.Equal(t, int64(2), m.Stats().Acquired, "every member counts the grant")
		}
		s := ch.Stats()
		assert.Equal(t, int64(2), s.Acquired)
		assert.Equal(t, int64(3), s.Rejected)
		assert.Equal(t, 0, s.Available, "the least any member has")
	})
}

func TestChainDecision(t *testing.T) {
	t.Run("window is tighter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ch := limiters.Chain(limiters.NewTokenBucket(limiters.PerSecond(1), 10), limiters.NewFixedWindow(5, time.Minute))
			defer ch.Close()
			runSteps(t, ch, []step{
				{0, 1, allow(5, 4, time.Minute)}, // bucket: 9 left, full in 1s
				{0, 4, allow(5, 0, time.Minute)},
				{0, 1, deny(5, 0, time.Minute, time.Minute)},
			})
		})
	})
	t.Run("bucket is tighter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ch := limiters.Chain(limiters.NewTokenBucket(limiters.PerSecond(1), 3), limiters.NewFixedWindow(10, time.Minute))
			defer ch.Close()
			runSteps(t, ch, []step{
				{0, 1, allow(3, 2, time.Minute)}, // bucket 2 of 3, window 9 of 10
				{0, 2, allow(3, 0, time.Minute)}, // bucket 0 of 3, window 7 of 10
				{0, 2, deny(3, 0, time.Minute, 2*time.Second)},
				{2 * time.Second, 2, allow(3, 0, 58*time.Second)},
			})
		})
	})
}

func TestChainAcquireTakesNothingWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := limiters.NewTokenBucket(limiters.PerSecond(1), 3)
		sem := limiters.NewConcurrency(2)
		ch := limiters.Chain(tb, sem)
		defer ch.Close()
		require.True(t, ch.TryAcquire(2).Allowed) // bucket 1 left, semaphore full

		a := newAcquirer()
		w := a.goAcquire(t.Context(), ch, 0, 2)
		time.Sleep(5 * time.Second)
		requirePending(t, w)
		assert.Equal(t, 3, tb.TryAcquire(0).Remaining, "the waiter holds nothing of the bucket while it waits")
		assert.Equal(t, 1, ch.Stats().Queued)

		ch.Release(1)
		synctest.Wait()
		requirePending(t, w) // one permit is not enough; and nothing was taken
		assert.Equal(t, 3, tb.TryAcquire(0).Remaining)
		assert.Equal(t, 1, sem.Stats().Available)

		ch.Release(1) // a Release on the chain wakes its waiters
		r := recv(t, w)
		require.NoError(t, r.err)
		assert.Equal(t, 5*time.Second, r.at)
		assert.Equal(t, 1, tb.TryAcquire(0).Remaining, "then it took from all at once")
		assert.Equal(t, 0, sem.Stats().Available)
	})
}

func TestChainReleaseOnMemberWakesChainWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := limiters.NewConcurrency(1)
		ch := limiters.Chain(limiters.NewTokenBucket(limiters.PerSecond(100), 10), sem)
		defer ch.Close()
		require.NoError(t, ch.Acquire(t.Context(), 1))
		a := newAcquirer()
		w := a.goAcquire(t.Context(), ch, 0, 1)
		sem.Release(1)
		require.NoError(t, recv(t, w).err)
	})
}

func TestChainWaitsForTheSlowestMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := limiters.Chain(
			limiters.NewTokenBucket(limiters.PerSecond(1), 1),
			limiters.NewGCRA(limiters.PerSecond(2), 1),
			limiters.NewFixedWindow(1, 10*time.Second),
		)
		defer ch.Close()
		a := newAcquirer()
		var ws []<-chan result
		for i := range 3 {
			ws = append(ws, a.goAcquire(t.Context(), ch, i, 1))
		}
		time.Sleep(time.Minute)
		want := []time.Duration{0, 10 * time.Second, 20 * time.Second}
		for i, w := range ws {
			r := recv(t, w)
			require.NoError(t, r.err)
			assert.Equal(t, want[i], r.at, "waiter %d", i)
		}
	})
}

func TestChainCloseClosesMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := limiters.NewTokenBucket(limiters.PerSecond(1), 1)
		sem := limiters.NewConcurrency(1)
		ch := limiters.Chain(tb, sem)
		require.True(t, ch.TryAcquire(1).Allowed)
		a := newAcquirer()
		w := a.goAcquire(t.Context(), ch, 0, 1)
		require.NoError(t, ch.Close())
		require.ErrorIs(t, recv(t, w).err, limiters.ErrClosed)
		require.NoError(t, ch.Close())
		for _, m := range []limiters.Limiter{ch, tb, sem} {
			require.ErrorIs(t, m.Acquire(t.Context(), 1), limiters.ErrClosed)
			assert.False(t, m.TryAcquire(0).Allowed)
		}
	})
}

// TestNestedChain: a Chain inside a Chain is still owned: Release and Close
// reach the inner chain's members.
func TestNestedChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := limiters.NewConcurrency(1)
		inner := limiters.Chain(sem, limiters.NewSlidingLog(100, time.Second))
		outer := limiters.Chain(inner, limiters.NewTokenBucket(limiters.PerSecond(10), 10))

		require.True(t, outer.TryAcquire(1).Allowed)
		assert.False(t, outer.TryAcquire(1).Allowed, "the inner semaphore is held")
		a := newAcquirer()
		w := a.goAcquire(t.Context(), outer, 0, 1)
		outer.Release(1)
		require.NoError(t, recv(t, w).err, "the Release reached the inner semaphore and woke the outer waiter")
		outer.Release(1)
		assert.Equal(t, 1, sem.Stats().Available)

		require.NoError(t, outer.Close())
		require.ErrorIs(t, sem.Acquire(t.Context(), 1), limiters.ErrClosed, "Close reached the inner chain's members")
		require.ErrorIs(t, inner.Acquire(t.Context(), 1), limiters.ErrClosed)
	})
}

type foreign struct{ limiters.Limiter }

func TestChainRejectsForeignLimiters(t *testing.T) {
	msg := panicMessage(func() { limiters.Chain(limiters.NewConcurrency(1), foreign{}) })
	assert.Contains(t, msg, "member 1")
}

func TestChainDeadlineFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := limiters.Chain(limiters.NewTokenBucket(limiters.PerSecond(1), 1), limiters.NewLeakyBucket(limiters.PerSecond(2), 10))
		defer ch.Close()
		require.True(t, ch.TryAcquire(1).Allowed)
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		err := ch.Acquire(ctx, 1)
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej)
		assert.Equal(t, time.Second, rej.RetryAfter, "the slower member decides")
	})
}
