package limiters_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/racectx"
	"github.com/throttlekit/throttle/limiters"
)

// TestPriorityGoesFirst: 20 waiters at priority 0, then 5 at priority 10,
// on a paced limiter: the 5 are granted first, then the 20 in order.
func TestPriorityGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewGCRA(limiters.PerSecond(10), 1)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		var chs []<-chan result
		for i := range 20 {
			chs = append(chs, a.goAcquire(t.Context(), l, i, 1))
		}
		high := limiters.WithPriority(t.Context(), 10)
		for i := 20; i < 25; i++ {
			chs = append(chs, a.goAcquire(high, l, i, 1))
		}
		assert.False(t, l.TryAcquire(1).Allowed, "TryAcquire fails while anyone waits")
		time.Sleep(3 * time.Second)
		for _, ch := range chs {
			require.NoError(t, recv(t, ch).err)
		}
		want := []int{20, 21, 22, 23, 24}
		for i := range 20 {
			want = append(want, i)
		}
		assert.Equal(t, want, a.granted())
		a.requireFIFO(t, want...)
		assert.Equal(t, 100*time.Millisecond, a.at[20], "the first high-priority waiter goes at the next permit")
	})
}

// TestEqualPrioritiesFIFO: waiters of one priority keep arrival order, at
// any priority.
func TestEqualPrioritiesFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewFixedWindow(1, time.Second)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		var chs []<-chan result
		for i := range 12 {
			ctx := limiters.WithPriority(t.Context(), []int{-3, 0, 7}[i%3])
			chs = append(chs, a.goAcquire(ctx, l, i, 1))
		}
		time.Sleep(20 * time.Second)
		for _, ch := range chs {
			require.NoError(t, recv(t, ch).err)
		}
		assert.Equal(t, []int{2, 5, 8, 11, 1, 4, 7, 10, 0, 3, 6, 9}, a.granted())
	})
}

// TestLowPriorityNeverStarves: a priority-0 waiter under an endless stream
// of higher-priority arrivals is granted after at most 64 of them.
func TestLowPriorityNeverStarves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewConcurrency(1)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		low := a.goAcquire(t.Context(), l, 0, 1)
		high := limiters.WithPriority(t.Context(), 10)
		var chs []<-chan result
		for i := 1; i <= 100; i++ {
			chs = append(chs, a.goAcquire(high, l, i, 1))
			l.Release(1) // one grant per arrival: the queue never empties
			synctest.Wait()
		}
		pos := slices.Index(a.granted(), 0)
		require.GreaterOrEqual(t, pos, 0, "the low-priority waiter was granted")
		assert.LessOrEqual(t, pos, 64, "at most 64 later arrivals went first")
		assert.Greater(t, pos, 1, "but higher priorities did go first")
		require.NoError(t, recv(t, low).err)
		l.Close()
		for _, ch := range chs {
			<-ch
		}
	})
}

// TestPriorityDeadlineCountsOnlyWaitersAhead: a high-priority request is
// not refused for the low-priority queue it goes ahead of.
func TestPriorityDeadlineCountsOnlyWaitersAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewGCRA(limiters.PerSecond(1), 1)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		var chs []<-chan result
		for i := range 10 {
			chs = append(chs, a.goAcquire(t.Context(), l, i, 1))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		err := l.Acquire(ctx, 1)
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej, "at priority 0 it waits behind 10")
		assert.Equal(t, 11*time.Second, rej.RetryAfter)

		hi := a.goAcquire(limiters.WithPriority(ctx, 1), l, 99, 1)
		time.Sleep(time.Second)
		require.NoError(t, recv(t, hi).err, "at priority 1 it goes first")
		assert.Equal(t, time.Second, a.at[99])
		l.Close()
		for _, ch := range chs {
			require.ErrorIs(t, recv(t, ch).err, limiters.ErrClosed)
		}
	})
}

// TestPriorityCancelRacingGrant: a high-priority waiter that went to the
// head and whose ctx ends as it is granted gives the grant back, and the
// waiter behind it gets it.
func TestPriorityCancelRacingGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewConcurrency(1)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		low := a.goAcquire(t.Context(), l, 0, 1)
		ctx := racectx.GrantFirst(limiters.WithPriority(t.Context(), 5), func() { l.Release(1) })
		require.ErrorIs(t, l.Acquire(ctx, 1), context.Canceled)
		require.NoError(t, recv(t, low).err, "the grant given back went to the next waiter")
		assert.Equal(t, limiters.Stats{Acquired: 2, Available: 0}, l.Stats())
	})
}
