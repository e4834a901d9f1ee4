package limiters_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// The synctest clock starts at 2000-01-01 00:00:00 UTC, 946684800s after
// the Unix epoch: 5s into an epoch-aligned 7s window (946684800 mod 7 = 5).
func TestFixedWindowAlignedToEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		require.Equal(t, int64(946684800), time.Now().Unix())
		l := limiters.NewFixedWindow(3, 7*time.Second)
		defer l.Close()
		runSteps(t, l, []step{
			{0, 1, allow(3, 2, 2*time.Second)},
			{0, 2, allow(3, 0, 2*time.Second)},
			{0, 1, deny(3, 0, 2*time.Second, 2*time.Second)},
			{2*time.Second - 1, 1, deny(3, 0, 1, 1)},
			{1, 3, allow(3, 0, 7*time.Second)}, // a new window at 946684802s
			{7*time.Second - 1, 0, deny(3, 0, 1, 1)},
			{1, 0, allow(3, 3, 7*time.Second)},
			// 946684800s + 1h0m9s is 946688409s, 2s into its window.
			{time.Hour, 2, allow(3, 1, 5*time.Second)},
		})
	})
}

func TestFixedWindowWaiterGrantedAtWindowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewFixedWindow(2, time.Minute) // 2000-01-01 starts a minute
		defer l.Close()
		time.Sleep(50 * time.Second)
		require.True(t, l.TryAcquire(2).Allowed)
		a := newAcquirer()
		w1 := a.goAcquire(t.Context(), l, 1, 2)
		w2 := a.goAcquire(t.Context(), l, 2, 1)
		time.Sleep(2 * time.Minute)
		r1, r2 := recv(t, w1), recv(t, w2)
		require.NoError(t, r1.err)
		require.NoError(t, r2.err)
		assert.Equal(t, 10*time.Second, r1.at, "at the next window")
		assert.Equal(t, 70*time.Second, r2.at, "that window was full")
	})
}

func TestSlidingWindowFormula(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 10 per 10s; the bubble starts on a window boundary.
		l := limiters.NewSlidingWindow(10, 10*time.Second)
		defer l.Close()
		runSteps(t, l, []step{
			{0, 6, allow(10, 4, 20*time.Second)},
			// Next window, e = 0: 6·1 + 0 + 5 > 10. It fits once
			// 6·(1 − e/10s) ≤ 5, i.e. e ≥ 10s − ⌊50s/6⌋ = 1666666667ns.
			{10 * time.Second, 5, deny(10, 4, 10*time.Second, 1666666667)},
			{1666666666, 5, deny(10, 4, 10*time.Second-1666666666, 1)},
			{1, 5, allow(10, 0, 20*time.Second-1666666667)},
			// 6·(1 − e/10s) + 5 + 1 ≤ 10 ⇔ e ≥ 10s − ⌊40s/6⌋ = 3333333334ns.
			{0, 1, deny(10, 0, 20*time.Second-1666666667, 1666666667)},
			{1666666667, 1, allow(10, 0, 20*time.Second-3333333334)},
		})
	})
}

func TestSlidingWindowWaitsIntoNextWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewSlidingWindow(10, 10*time.Second)
		defer l.Close()
		runSteps(t, l, []step{
			{time.Second, 10, allow(10, 0, 19*time.Second)},
			// The current window is full; in the next, prev = 10 and one
			// more fits once 10·(1 − e/10s) ≤ 9, at e = 1s: 10s from now.
			{0, 1, deny(10, 0, 19*time.Second, 10*time.Second)},
			{0, 10, deny(10, 0, 19*time.Second, 19*time.Second)},
			// At 11s − 1ns, prev weighs 10·(9s+1ns)/10s > 9.
			{10*time.Second - 1, 0, deny(10, 0, 9*time.Second+1, 1)},
			{1, 1, allow(10, 0, 19*time.Second)},
			{time.Hour, 0, allow(10, 10, 0)}, // both windows forgotten
		})
	})
}

func TestSlidingLogExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewSlidingLog(3, time.Second)
		defer l.Close()
		runSteps(t, l, []step{
			{0, 1, allow(3, 2, time.Second)},
			{300 * time.Millisecond, 2, allow(3, 0, time.Second)},
			// The grant at 0 leaves (now−1s, now] at exactly 1s.
			{200 * time.Millisecond, 1, deny(3, 0, 800*time.Millisecond, 500*time.Millisecond)},
			{0, 2, deny(3, 0, 800*time.Millisecond, 800*time.Millisecond)},
			{0, 3, deny(3, 0, 800*time.Millisecond, 800*time.Millisecond)},
			{500*time.Millisecond - 1, 1, deny(3, 0, 300*time.Millisecond+1, 1)},
			{1, 1, allow(3, 0, time.Second)},
			{0, 1, deny(3, 0, time.Second, 300*time.Millisecond)},
			{300 * time.Millisecond, 0, allow(3, 2, 700*time.Millisecond)},
			{time.Second, 0, allow(3, 3, 0)},
		})
	})
}

// TestSlidingLogManyEntries grows the log's ring past its first sizes.
func TestSlidingLogManyEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewSlidingLog(100, 100*time.Millisecond)
		defer l.Close()
		for i := range 100 {
			require.True(t, l.TryAcquire(1).Allowed, "grant %d", i)
			time.Sleep(time.Millisecond / 2)
		}
		d := l.TryAcquire(1)
		require.False(t, d.Allowed)
		assert.Equal(t, 50*time.Millisecond, d.RetryAfter, "the first grant leaves the window at 100ms")
		time.Sleep(50 * time.Millisecond) // 100ms: only the grant at 0 has left
		require.True(t, l.TryAcquire(1).Allowed)
		d = l.TryAcquire(1)
		require.False(t, d.Allowed)
		assert.Equal(t, time.Millisecond/2, d.RetryAfter)
		time.Sleep(50 * time.Millisecond) // 150ms: all but the grant at 100ms left
		assert.Equal(t, 99, l.Stats().Available)
		for i := range 99 {
			require.True(t, l.TryAcquire(1).Allowed, "at 150ms, grant %d", i)
		}
		d = l.TryAcquire(1)
		require.False(t, d.Allowed)
		assert.Equal(t, 50*time.Millisecond, d.RetryAfter, "the grant at 100ms leaves at 200ms")
	})
}
