package limiters

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMembers: each member of a Chain reports its own numbers, not the
// Chain's mix; a lone limiter reports itself.
func TestMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute))) // a window's start
		ch := Chain(NewSlidingLog(10, time.Minute), NewFixedWindow(1000, 24*time.Hour), NewGCRA(PerSecond(10), 5), NewConcurrency(4))
		defer ch.Close()
		for range 3 {
			require.True(t, ch.TryAcquire(1).Allowed)
		}
		ms := Members(ch, 1, nil)
		require.Len(t, ms, 4)
		assert.Equal(t, Member{Algorithm: AlgSlidingLog, Limit: 10, Remaining: 7, ResetAfter: time.Minute, Next: time.Minute}, ms[0])
		assert.Equal(t, AlgFixedWindow, ms[1].Algorithm)
		assert.Equal(t, []int{1000, 997}, []int{ms[1].Limit, ms[1].Remaining})
		assert.Equal(t, ms[1].ResetAfter, ms[1].Next, "a fixed window's next permits come when it ends")
		assert.Equal(t, Member{Algorithm: AlgGCRA, Limit: 5, Remaining: 2, ResetAfter: 300 * time.Millisecond, Next: 100 * time.Millisecond}, ms[2])
		assert.Equal(t, Member{Algorithm: AlgConcurrency, Limit: 4, Remaining: 1, Next: -1}, ms[3])

		// n above a member's limit: waiting alone cannot do it.
		ms = Members(ch, 6, ms[:0])
		assert.Equal(t, time.Duration(-1), ms[2].Wait)
		assert.Equal(t, time.Duration(0), ms[0].Wait)

		// A lone limiter, and a leaky bucket's next slot.
		lb := NewLeakyBucket(PerSecond(10), 5)
		defer lb.Close()
		require.True(t, lb.TryAcquire(1).Allowed)
		ms = Members(lb, 1, nil)
		require.Len(t, ms, 1)
		assert.Equal(t, 100*time.Millisecond, ms[0].Next)
		assert.Equal(t, 100*time.Millisecond, ms[0].Wait)
		assert.Equal(t, 5, ms[0].Remaining, "the free queue room, as its Decision says")
		// Two waiting: the next slot is still 100 ms away (it frees a
		// place in the queue); a new request's turn is 300 ms.
		for range 2 {
			go lb.Acquire(context.Background(), 1)
		}
		synctest.Wait()
		ms = Members(lb, 1, ms[:0])
		assert.Equal(t, 100*time.Millisecond, ms[0].Next)
		assert.Equal(t, 300*time.Millisecond, ms[0].Wait)
		assert.Equal(t, 3, ms[0].Remaining)

		// A peek is always admitted; a full limiter brings no more.
		tb := NewTokenBucket(PerSecond(1), 3)
		defer tb.Close()
		assert.Equal(t, []Member{{Algorithm: AlgTokenBucket, Limit: 3, Remaining: 3, Next: -1}}, Members(tb, 0, nil))
	})
}

type foreign struct{ Limiter }

func TestMembersForeign(t *testing.T) {
	into := []Member{{Limit: 1}}
	assert.Equal(t, into, Members(foreign{}, 1, into))
	assert.Panics(t, func() { Members(foreign{}, -1, nil) })
}
