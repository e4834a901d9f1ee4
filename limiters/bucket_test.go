package limiters_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// step is one TryAcquire after sleeping, and the Decision it must return.
type step struct {
	sleep time.Duration
	n     int
	want  limiters.Decision
}

func runSteps(t *testing.T, l limiters.Limiter, steps []step) {
	t.Helper()
	start := time.Now()
	for i, s := range steps {
		time.Sleep(s.sleep)
		got := l.TryAcquire(s.n)
		assert.Equal(t, s.want, got, "step %d: TryAcquire(%d) at %v", i, s.n, time.Since(start))
	}
}

func allow(lim, rem int, reset time.Duration) limiters.Decision {
	return limiters.Decision{Allowed: true, Limit: lim, Remaining: rem, ResetAfter: reset}
}

func deny(lim, rem int, reset, retry time.Duration) limiters.Decision {
	return limiters.Decision{Limit: lim, Remaining: rem, ResetAfter: reset, RetryAfter: retry}
}

// bucketSteps is the trace both TokenBucket and GCRA must follow exactly:
// 2/s (one permit per 500ms), burst 4, starting full.
var bucketSteps = []step{
	{0, 1, allow(4, 3, 500*time.Millisecond)},
	{0, 3, allow(4, 0, 2*time.Second)},
	{0, 1, deny(4, 0, 2*time.Second, 500*time.Millisecond)},
	{0, 4, deny(4, 0, 2*time.Second, 2*time.Second)},
	{250 * time.Millisecond, 1, deny(4, 0, 1750*time.Millisecond, 250*time.Millisecond)},
	{250*time.Millisecond - 1, 1, deny(4, 0, 1500*time.Millisecond+1, 1)},
	{1, 1, allow(4, 0, 2*time.Second)},
	{time.Second, 0, allow(4, 2, time.Second)}, // a peek
	{0, 2, allow(4, 0, 2*time.Second)},
	{time.Hour, 0, allow(4, 4, 0)}, // capped at burst
	{0, 4, allow(4, 0, 2*time.Second)},
}

func TestTokenBucketDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewTokenBucket(limiters.PerSecond(2), 4)
		defer l.Close()
		runSteps(t, l, bucketSteps)
	})
}

func TestGCRADecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewGCRA(limiters.PerSecond(2), 4)
		defer l.Close()
		runSteps(t, l, bucketSteps)
	})
}

// TestBucketsNonDivisibleRate: 3/s is an interval of 333333333⅓ ns; the
// buckets round waits up to whole nanoseconds and keep the third.
func TestBucketsNonDivisibleRate(t *testing.T) {
	steps := []step{
		{0, 1, allow(1, 0, 333333334)},
		{0, 1, deny(1, 0, 333333334, 333333334)},
		{333333333, 1, deny(1, 0, 1, 1)},
		{1, 1, allow(1, 0, 333333333)},         // granted at 333333334 but counted from 333333333⅓
		{333333333, 1, allow(1, 0, 333333333)}, // due at 666666666⅔: no drift
		{333333332, 1, deny(1, 0, 1, 1)},
		{1, 1, allow(1, 0, 333333334)}, // in phase: 1s exactly
	}
	for _, tt := range []struct {
		name string
		mk   func() limiters.Limiter
	}{
		{"TokenBucket", func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(3), 1) }},
		{"GCRA", func() limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(3), 1) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.mk()
				defer l.Close()
				runSteps(t, l, steps)
			})
		})
	}
}

// TestNoDrift: waiting in a loop at 3/s for 10s gives exactly 30 grants
// after the initial burst, each at its exact (rounded-up) due time.
func TestNoDrift(t *testing.T) {
	tests := []struct {
		name  string
		burst int
		mk    func(burst int) limiters.Limiter
	}{
		{"TokenBucket/burst1", 1, func(b int) limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(3), b) }},
		{"TokenBucket/burst5", 5, func(b int) limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(3), b) }},
		{"GCRA/burst1", 1, func(b int) limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(3), b) }},
		{"GCRA/burst5", 5, func(b int) limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(3), b) }},
		// A shaper never bursts: its first grant is at 0, then one per ⅓ s.
		{"LeakyBucket", 1, func(int) limiters.Limiter { return limiters.NewLeakyBucket(limiters.PerSecond(3), 10) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.mk(tt.burst)
				defer l.Close()
				start := time.Now()
				var at []time.Duration
				for {
					require.NoError(t, l.Acquire(t.Context(), 1))
					d := time.Since(start)
					if d > 10*time.Second {
						break
					}
					at = append(at, d)
				}
				require.Len(t, at, tt.burst+30)
				for i, d := range at {
					k := int64(max(i-tt.burst+1, 0)) // refills needed
					want := time.Duration((k*int64(time.Second) + 2) / 3)
					require.Equal(t, want, d, "grant %d", i)
				}
				assert.Equal(t, 10*time.Second, at[len(at)-1])
			})
		})
	}
}

func TestLeakyBucketDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 2/s: one emission interval is 500ms. Limit is the capacity and
		// Remaining the free queue room.
		l := limiters.NewLeakyBucket(limiters.PerSecond(2), 3)
		defer l.Close()
		runSteps(t, l, []step{
			{0, 1, allow(3, 3, 500*time.Millisecond)},
			{0, 1, deny(3, 3, 500*time.Millisecond, 500*time.Millisecond)},
			{0, 0, deny(3, 3, 500*time.Millisecond, 500*time.Millisecond)},
			{500 * time.Millisecond, 2, allow(3, 3, time.Second)}, // 2 permits occupy 2 intervals
			{500 * time.Millisecond, 1, deny(3, 3, 500*time.Millisecond, 500*time.Millisecond)},
			{time.Hour, 1, allow(3, 3, 500*time.Millisecond)}, // never bursts after idling
			{0, 1, deny(3, 3, 500*time.Millisecond, 500*time.Millisecond)},
		})
	})
}

func TestLeakyBucketSpacesGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewLeakyBucket(limiters.PerSecond(2), 5)
		defer l.Close()
		a := newAcquirer()
		w := []<-chan result{
			a.goAcquire(t.Context(), l, 0, 2), // granted at once, occupies 1s
			a.goAcquire(t.Context(), l, 1, 1),
			a.goAcquire(t.Context(), l, 2, 3),
			a.goAcquire(t.Context(), l, 3, 1),
		}
		s := l.Stats()
		assert.Equal(t, 3, s.Queued)
		assert.Equal(t, 0, s.Available, "4 − 5 queued permits, floored at 0")
		d := l.TryAcquire(0)
		assert.Equal(t, limiters.Decision{Limit: 5, Remaining: 0, ResetAfter: 3500 * time.Millisecond, RetryAfter: 3500 * time.Millisecond}, d,
			"busy 1s, then 5 queued permits of 500ms each")
		want := []time.Duration{0, time.Second, 1500 * time.Millisecond, 3 * time.Second}
		time.Sleep(5 * time.Second)
		for i, ch := range w {
			r := recv(t, ch)
			require.NoError(t, r.err)
			assert.Equal(t, want[i], r.at, "waiter %d", i)
		}
	})
}

func TestConcurrencyDecisionsAndRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewConcurrency(3)
		defer l.Close()
		runSteps(t, l, []step{
			{0, 2, allow(3, 1, 0)},
			{0, 2, deny(3, 1, 0, 0)}, // only Release helps: no RetryAfter
			{time.Hour, 2, deny(3, 1, 0, 0)},
			{0, 1, allow(3, 0, 0)},
		})
		l.Release(2)
		assert.Equal(t, limiters.Stats{Acquired: 3, Rejected: 4, Available: 2}, l.Stats())

		a := newAcquirer()
		w := a.goAcquire(t.Context(), l, 0, 3)
		l.Release(1)
		require.NoError(t, recv(t, w).err, "Release wakes the waiter")
		assert.Equal(t, 0, l.Stats().Available)
		l.Release(3)
		assert.Equal(t, 3, l.Stats().Available)
		assert.Panics(t, func() { l.Release(1) }, "releasing more than is held")
	})
}

func TestRateLimitersIgnoreRelease(t *testing.T) {
	for _, k := range kinds() {
		if k.name == "Concurrency" || k.name == "Chain" {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()
				n := exhaust(t, l)
				l.Release(n)
				assert.False(t, l.TryAcquire(1).Allowed)
			})
		})
	}
}

func TestConstructorsPanicNamingTheParameter(t *testing.T) {
	tests := []struct {
		name  string
		param string
		f     func()
	}{
		{"TokenBucket/rate", "rate", func() { limiters.NewTokenBucket(limiters.Rate{N: 0, Per: time.Second}, 1) }},
		{"TokenBucket/period", "rate", func() { limiters.NewTokenBucket(limiters.Rate{N: 1}, 1) }},
		{"TokenBucket/burst", "burst", func() { limiters.NewTokenBucket(limiters.PerSecond(1), 0) }},
		{"GCRA/rate", "rate", func() { limiters.NewGCRA(limiters.Rate{N: -1, Per: time.Second}, 1) }},
		{"GCRA/burst", "burst", func() { limiters.NewGCRA(limiters.PerSecond(1), -1) }},
		{"LeakyBucket/rate", "rate", func() { limiters.NewLeakyBucket(limiters.Rate{N: 1, Per: -time.Second}, 1) }},
		{"LeakyBucket/capacity", "capacity", func() { limiters.NewLeakyBucket(limiters.PerSecond(1), 0) }},
		{"FixedWindow/limit", "limit", func() { limiters.NewFixedWindow(0, time.Second) }},
		{"FixedWindow/window", "window", func() { limiters.NewFixedWindow(1, 0) }},
		{"SlidingWindow/limit", "limit", func() { limiters.NewSlidingWindow(-1, time.Second) }},
		{"SlidingWindow/window", "window", func() { limiters.NewSlidingWindow(1, -time.Second) }},
		{"SlidingLog/limit", "limit", func() { limiters.NewSlidingLog(0, time.Second) }},
		{"SlidingLog/window", "window", func() { limiters.NewSlidingLog(1, 0) }},
		{"Concurrency/max", "max", func() { limiters.NewConcurrency(0) }},
		{"FromRate/nil", "nil", func() { limiters.FromRate(nil) }},
		{"Chain/empty", "Chain", func() { limiters.Chain() }},
		{"Chain/nil", "(<nil>) is not a limiter", func() { limiters.Chain(limiters.NewConcurrency(1), nil) }},
		{"option/nil", "option 2 of 2 is nil", func() { limiters.NewConcurrency(1, limiters.WithName("x"), nil) }},
		{"PerSecond/0", "PerSecond", func() { limiters.PerSecond(0) }},
		{"PerSecond/-1", "PerSecond", func() { limiters.PerSecond(-1) }},
		{"PerMinute/0", "PerMinute", func() { limiters.PerMinute(0) }},
		{"PerHour/-5", "PerHour", func() { limiters.PerHour(-5) }},
		{"Every/0", "Every", func() { limiters.Every(0) }},
		{"Every/-1s", "Every", func() { limiters.Every(-time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicMessage(tt.f)
			require.NotEmpty(t, msg, "did not panic")
			assert.Contains(t, msg, tt.param)
			assert.Contains(t, msg, "limiters: ")
		})
	}
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
