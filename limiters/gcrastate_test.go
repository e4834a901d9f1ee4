package limiters_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// TestGCRAStateMatchesGCRA: on random traces, GCRAParams/GCRAState decide
// exactly what a GCRA limiter decides.
func TestGCRAStateMatchesGCRA(t *testing.T) {
	for seed := range uint64(40) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			r := []limiters.Rate{limiters.PerSecond(10), limiters.Rate{N: 7, Per: 3 * time.Second}, limiters.PerMinute(100)}[seed%3]
			burst := 1 + rng.IntN(8)
			g := limiters.NewGCRA(r, burst)
			defer g.Close()
			p := limiters.NewGCRAParams(r, burst)
			var s limiters.GCRAState
			for i := range 200 {
				time.Sleep(time.Duration(rng.Int64N(int64(r.Interval()) * 2)))
				n := rng.IntN(burst + 2)
				want, got := g.TryAcquire(n), p.TryAcquire(&s, n)
				require.Equal(t, want, got, "seed %d step %d n %d", seed, i, n)
			}
		})
	}
}

func TestGCRAStateReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := limiters.NewGCRAParams(limiters.PerSecond(10), 2)
		var s limiters.GCRAState
		assert.True(t, p.Full(s), "the zero state is full")
		for _, want := range []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
			d, err := p.Reserve(&s, 1, -1)
			require.NoError(t, err)
			assert.Equal(t, want, d)
		}
		assert.False(t, p.TryAcquire(&s, 1).Allowed, "reservations are not overtaken")
		_, err := p.Reserve(&s, 1, 250*time.Millisecond)
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej)
		assert.Equal(t, 300*time.Millisecond, rej.RetryAfter)
		assert.Equal(t, "gcra", rej.Limiter)
		assert.ErrorIs(t, err, limiters.ErrRateLimited)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "maxWait is the caller's deadline")
		_, err = p.Reserve(&s, 3, -1)
		assert.ErrorIs(t, err, limiters.ErrExceedsLimit)

		p.Cancel(&s, 1) // the 200 ms reservation gives up
		d, err := p.Reserve(&s, 1, -1)
		require.NoError(t, err)
		assert.Equal(t, 200*time.Millisecond, d, "its slot goes to the next")
		assert.Equal(t, 400*time.Millisecond, p.Due(s))
		time.Sleep(400 * time.Millisecond)
		assert.True(t, p.Full(s))
	})
}

func TestGCRAStatePacksIntoAnInt64(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := limiters.NewGCRAParams(limiters.PerSecond(10), 3)
		require.True(t, p.Whole())
		assert.False(t, limiters.NewGCRAParams(limiters.PerSecond(3), 3).Whole())
		assert.Zero(t, p.Pack(limiters.GCRAState{}))
		var s limiters.GCRAState
		p.TryAcquire(&s, 2)
		v := p.Pack(s)
		u := p.Unpack(v)
		assert.Equal(t, s, u)
		assert.Equal(t, p.TryAcquire(&s, 1), p.TryAcquire(&u, 1))
	})
}
