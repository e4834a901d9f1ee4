package limiters_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// TestAnyPositiveRateIsValid: rates and bursts whose refill spans far more
// than the clock can represent build a working limiter instead of panicking
// (issue 8); they saturate at 2^60 ns.
func TestAnyPositiveRateIsValid(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	tests := []struct {
		name string
		mk   func() limiters.Limiter
		n    int // a request the limiter was built to allow
	}{
		{"TokenBucket/burst 2^40 at 3/s", func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(3), 1<<40) }, 1 << 20},
		{"GCRA/1/s limit 4e9", func() limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(1), 4_000_000_000) }, 1000},
		{"TokenBucket/limit MaxInt", func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(1), math.MaxInt) }, 7},
		{"GCRA/once in 292 years", func() limiters.Limiter { return limiters.NewGCRA(limiters.Every(maxDuration), 1) }, 1},
		{"GCRA/MaxInt per ns", func() limiters.Limiter { return limiters.NewGCRA(limiters.Rate{N: math.MaxInt, Per: 1}, math.MaxInt) }, math.MaxInt / 2},
		{"LeakyBucket/1/d capacity 1e8", func() limiters.Limiter {
			return limiters.NewLeakyBucket(limiters.Rate{N: 1, Per: 24 * time.Hour}, 100_000_000)
		}, 1},
		{"LeakyBucket/MaxInt per ns", func() limiters.Limiter {
			return limiters.NewLeakyBucket(limiters.Rate{N: math.MaxInt, Per: 1}, math.MaxInt)
		}, math.MaxInt},
		{"FixedWindow/MaxInt", func() limiters.Limiter { return limiters.NewFixedWindow(math.MaxInt, maxDuration) }, math.MaxInt},
		{"SlidingWindow/MaxInt", func() limiters.Limiter { return limiters.NewSlidingWindow(math.MaxInt, maxDuration) }, math.MaxInt},
		{"SlidingLog/MaxInt", func() limiters.Limiter { return limiters.NewSlidingLog(math.MaxInt, maxDuration) }, math.MaxInt},
		{"Concurrency/MaxInt", func() limiters.Limiter { return limiters.NewConcurrency(math.MaxInt) }, math.MaxInt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.mk()
				defer l.Close()
				require.True(t, l.TryAcquire(tt.n).Allowed, "a fresh limiter admits what it was built for")
				d := l.TryAcquire(1)
				assert.GreaterOrEqual(t, d.Remaining, 0)
				assert.GreaterOrEqual(t, d.RetryAfter, time.Duration(0))
				assert.GreaterOrEqual(t, d.ResetAfter, time.Duration(0))
				use(t, l, d.Limit)
			})
		})
	}
}

// TestSaturatedBucketKeepsItsRate: a burst that would refill in 273,972
// years holds what refills in 2^60 ns, at exactly the rate asked.
func TestSaturatedBucketKeepsItsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewGCRA(limiters.Rate{N: 1, Per: 24 * time.Hour}, 100_000_000)
		defer l.Close()
		d := l.TryAcquire(0)
		const horizon = 1 << 60
		assert.Equal(t, int(horizon/int64(24*time.Hour)), d.Limit)
		require.True(t, l.TryAcquire(d.Limit).Allowed)
		d = l.TryAcquire(1)
		require.False(t, d.Allowed)
		assert.Equal(t, 24*time.Hour, d.RetryAfter, "one permit a day, as asked")
	})
}

// use drives l with requests up to lim (each must not panic), waiting on
// the fake clock for a little while at most.
func use(t *testing.T, l limiters.Limiter, lim int) {
	t.Helper()
	for _, n := range []int{0, 1, lim / 2, lim} {
		l.TryAcquire(n)
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		err := l.Acquire(ctx, n)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, limiters.ErrQueueFull) {
			t.Fatalf("Acquire(%d): %v", n, err)
		}
		l.Release(0)
		_ = l.Stats()
	}
}

// FuzzSpec: Validate and New agree on every input (issue 14), New never
// panics, and nothing that validates panics when used with any n up to the
// limit it advertises, nor when reconfigured to another valid spec.
func FuzzSpec(f *testing.F) {
	algs := []string{limiters.AlgTokenBucket, limiters.AlgGCRA, limiters.AlgLeakyBucket,
		limiters.AlgFixedWindow, limiters.AlgSlidingWindow, limiters.AlgSlidingLog, limiters.AlgConcurrency, "", "magic"}
	f.Add(uint8(1), 4_000_000_000, 1, int64(time.Second), int64(0), 0)           // gcra 1/s limit 4e9
	f.Add(uint8(0), math.MaxInt, 1, int64(time.Second), int64(0), 0)             // token bucket, limit 2^63−1
	f.Add(uint8(2), 100_000_000, 1, int64(24*time.Hour), int64(0), 0)            // leaky bucket 1/d, limit 1e8
	f.Add(uint8(3), math.MaxInt, 0, int64(0), int64(math.MaxInt64), math.MaxInt) // window of 292 years
	f.Add(uint8(6), 3, 0, int64(0), int64(0), -1)
	f.Fuzz(func(t *testing.T, alg uint8, limit, n int, per, window int64, queue int) {
		s := limiters.Spec{Algorithm: algs[int(alg)%len(algs)], Limit: limit,
			Rate: limiters.Rate{N: n, Per: time.Duration(per)}, Window: time.Duration(window), QueueLimit: queue}
		synctest.Test(t, func(t *testing.T) {
			verr := s.Validate()
			l, err := s.New()
			if (verr == nil) != (err == nil) {
				t.Fatalf("Validate: %v, New: %v", verr, err)
			}
			if err != nil {
				require.Nil(t, l)
				return
			}
			defer l.Close()
			lim := l.TryAcquire(0).Limit
			require.LessOrEqual(t, lim, s.Limit, "the limit advertised is at most the one asked")
			require.Positive(t, lim)
			use(t, l, lim)
			// Above a saturated limit, up to the one asked: refused, no panic.
			if d := l.TryAcquire(s.Limit); d.Allowed {
				require.LessOrEqual(t, s.Limit, lim)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			if err := l.Acquire(ctx, s.Limit); s.Limit > lim {
				require.ErrorIs(t, err, limiters.ErrExceedsLimit)
			}
			cancel()
			// The same spec, halved, as a change at run time: the limiter
			// keeps its state and still never panics.
			half := s
			half.Limit = s.Limit/2 + 1
			require.NoError(t, l.(limiters.Reconfigurable).Reconfigure(half))
			use(t, l, l.TryAcquire(0).Limit)
			require.NoError(t, l.(limiters.Reconfigurable).Reconfigure(s))
			use(t, l, l.TryAcquire(0).Limit)
		})
	})
}

// TestErrorsClipHostileInput: an error never echoes a 10 MB value whole.
func TestErrorsClipHostileInput(t *testing.T) {
	huge := strings.Repeat("9", 10<<20)
	_, err := limiters.ParseRate(huge + "/s")
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300)
	_, err = limiters.ParseRate("1/" + huge)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300)

	for _, in := range []string{
		`{"algorithm":"fixed_window","limit":1,"window":"` + huge + `"}`,
		`{"algorithm":"fixed_window","limit":1,"window":` + huge + `}`,
		`{"algorithm":"gcra","limit":1,"rate":"` + huge + `"}`,
		`{"algorithm":"gcra","limit":1,"` + huge + `":1}`,
	} {
		var s limiters.Spec
		err := json.Unmarshal([]byte(in), &s)
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 300, "%.40s", in)
	}
	err = limiters.Spec{Algorithm: huge, Limit: 1}.Validate()
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300)
	assert.Contains(t, err.Error(), "limiters: spec algorithm:")
}
