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

// TestGCRAStateOfRoundTrips: a GCRA or TokenBucket taken apart
// (GCRAStateOf) at random moments of a random trace and rebuilt
// (NewLimiter) decides exactly what one never taken apart decides, keeps
// its type and options, and shares the configuration it was told to.
func TestGCRAStateOfRoundTrips(t *testing.T) {
	for seed := range uint64(30) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			r := []limiters.Rate{limiters.PerSecond(10), limiters.Rate{N: 7, Per: 3 * time.Second}, limiters.PerMinute(100)}[seed%3]
			burst := 1 + rng.IntN(8)
			token := seed%2 == 0
			mk := func() limiters.Limiter {
				if token {
					return limiters.NewTokenBucket(r, burst, limiters.WithName("k"))
				}
				return limiters.NewGCRA(r, burst, limiters.WithName("k"))
			}
			ref, l := mk(), mk()
			var like *limiters.GCRAParams
			for i := range 200 {
				time.Sleep(time.Duration(rng.Int64N(int64(r.Interval()) * 2)))
				if rng.IntN(3) == 0 {
					p, s, ok := limiters.GCRAStateOf(l, like)
					require.True(t, ok)
					if like != nil {
						require.Same(t, like, p, "the same configuration is shared")
					}
					like, l = p, p.NewLimiter(s)
				}
				n := rng.IntN(burst + 2)
				require.Equal(t, ref.TryAcquire(n), l.TryAcquire(n), "seed %d step %d n %d", seed, i, n)
			}
			assert.IsType(t, ref, l)
			ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
			defer cancel()
			for ref.TryAcquire(1).Allowed {
				l.TryAcquire(1)
			}
			var rej *limiters.RejectedError
			require.ErrorAs(t, l.Acquire(ctx, 1), &rej)
			assert.Equal(t, "k", rej.Limiter, "the options came along")
		})
	}
}

// TestGCRAStateOfRefuses: only an open GCRA or TokenBucket with nobody
// waiting is taken apart; another configuration is not shared.
func TestGCRAStateOfRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, ok := limiters.GCRAStateOf(limiters.NewFixedWindow(1, time.Second), nil)
		assert.False(t, ok, "a fixed window")
		closed := limiters.NewGCRA(limiters.PerSecond(1), 1)
		closed.Close()
		_, _, ok = limiters.GCRAStateOf(closed, nil)
		assert.False(t, ok, "closed")
		busy := limiters.NewGCRA(limiters.PerSecond(1), 1)
		defer busy.Close()
		require.True(t, busy.TryAcquire(1).Allowed)
		done := make(chan error)
		go func() { done <- busy.Acquire(context.Background(), 1) }()
		synctest.Wait()
		_, _, ok = limiters.GCRAStateOf(busy, nil)
		assert.False(t, ok, "someone waits")
		require.NoError(t, <-done)

		p, _, ok := limiters.GCRAStateOf(limiters.NewGCRA(limiters.PerSecond(1), 1), nil)
		require.True(t, ok)
		for _, other := range []limiters.Limiter{
			limiters.NewGCRA(limiters.PerSecond(2), 1),
			limiters.NewGCRA(limiters.PerSecond(1), 2),
			limiters.NewTokenBucket(limiters.PerSecond(1), 1),
			limiters.NewGCRA(limiters.PerSecond(1), 1, limiters.WithQueueLimit(3)),
		} {
			q, _, ok := limiters.GCRAStateOf(other, p)
			require.True(t, ok)
			assert.NotSame(t, p, q)
		}
		q, _, _ := limiters.GCRAStateOf(limiters.NewGCRA(limiters.PerSecond(1), 1, limiters.WithQueueLimit(-1)), p)
		assert.Same(t, p, q, "the default options, spelt out")
		assert.IsType(t, &limiters.GCRA{}, limiters.NewGCRAParams(limiters.PerSecond(1), 1).NewLimiter(limiters.GCRAState{}))
	})
}

// TestGCRAParamsMember: a state's Member is what Members reports of the
// limiter made from it, for every n, at random states.
func TestGCRAParamsMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 5))
		for _, l := range []limiters.Limiter{limiters.NewGCRA(limiters.PerSecond(10), 4), limiters.NewTokenBucket(limiters.PerMinute(7), 3)} {
			for i := range 100 {
				time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
				l.TryAcquire(rng.IntN(3))
				p, s, ok := limiters.GCRAStateOf(l, nil)
				require.True(t, ok)
				for n := range 6 {
					want := limiters.Members(l, n, nil)
					require.Equal(t, want, []limiters.Member{p.Member(s, n)}, "step %d n %d", i, n)
				}
			}
		}
	})
}
