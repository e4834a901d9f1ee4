package limiters_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle/limiters"
)

func TestFromRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.FromRate(rate.NewLimiter(2, 4))
		defer l.Close()
		runSteps(t, l, []step{
			{0, 4, allow(4, 0, 2*time.Second)},
			{0, 1, deny(4, 0, 2*time.Second, 500*time.Millisecond)},
			{0, 5, deny(4, 0, 2*time.Second, 0)}, // more than the burst
			{500 * time.Millisecond, 0, allow(4, 1, 1500*time.Millisecond)},
		})
		a := newAcquirer()
		w1 := a.goAcquire(t.Context(), l, 1, 2)
		w2 := a.goAcquire(t.Context(), l, 2, 1)
		assert.False(t, l.TryAcquire(1).Allowed, "nobody jumps our queue")
		time.Sleep(time.Second)
		r1, r2 := recv(t, w1), recv(t, w2)
		require.NoError(t, r1.err)
		require.NoError(t, r2.err)
		assert.Equal(t, 500*time.Millisecond, r1.at)
		assert.Equal(t, time.Second, r2.at)
		assert.Equal(t, int64(7), l.Stats().Acquired)
	})
}

func TestFromRateInf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.FromRate(rate.NewLimiter(rate.Inf, 0))
		defer l.Close()
		for range 3 {
			d := l.TryAcquire(1_000_000)
			assert.True(t, d.Allowed)
		}
		require.NoError(t, l.Acquire(t.Context(), 1_000_000))
	})
}
