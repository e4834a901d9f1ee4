package repository

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// fake is a limiter that counts permits against a limit and takes a new
// Spec of its own algorithm in place, keeping its count: the shape of
// limiters.Reconfigurable.
type fake struct {
	mu     sync.Mutex
	spec   limiters.Spec
	used   int
	closed bool
}

func newFake(limit int) *fake {
	return &fake{spec: limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: limit, Window: time.Hour}}
}

func (f *fake) Reconfigure(s limiters.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Algorithm != f.spec.Algorithm {
		return fmt.Errorf("fake: cannot become %s", s.Algorithm)
	}
	f.spec = s
	return nil
}

func (f *fake) Spec() limiters.Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spec
}

func (f *fake) TryAcquire(n int) limiters.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := !f.closed && f.used+n <= f.spec.Limit
	if ok {
		f.used += n
	}
	return limiters.Decision{Allowed: ok, Limit: f.spec.Limit, Remaining: max(f.spec.Limit-f.used, 0)}
}

func (f *fake) Acquire(_ context.Context, n int) error {
	if !f.TryAcquire(n).Allowed {
		return limiters.ErrRateLimited
	}
	return nil
}

func (f *fake) Release(int) {}
func (f *fake) HoldsPermits() bool {
	return false
}

func (f *fake) Stats() limiters.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return limiters.Stats{Available: f.spec.Limit - f.used}
}

func (f *fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

var fiveAnHour = limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 5, Window: time.Hour}

func TestMemoryReconfigureKeepsState(t *testing.T) {
	m := NewMemory(func(string) limiters.Limiter { return newFake(2) })
	defer m.Close()
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		_, err := m.TryAcquire(ctx, k, 1)
		require.NoError(t, err)
	}
	a := m.Get("a").(*fake)

	require.NoError(t, m.Reconfigure(fiveAnHour))
	assert.Same(t, a, m.Get("a"), "reconfigured in place")
	assert.Equal(t, fiveAnHour, a.Spec())
	assert.Equal(t, fiveAnHour, m.Get("b").(*fake).Spec())
	d, err := m.TryAcquire(ctx, "a", 4)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a used 1 of 5")
	assert.Equal(t, 0, d.Remaining)

	// New keys are made from the spec, not by the factory.
	d, err = m.TryAcquire(ctx, "c", 1)
	require.NoError(t, err)
	assert.Equal(t, 5, d.Limit)
	assert.IsType(t, &limiters.FixedWindow{}, m.Get("c"))
	d, err = m.Peek(ctx, "absent")
	require.NoError(t, err)
	assert.Equal(t, 5, d.Remaining, "Peek of an absent key sees the new spec too")

	// An invalid spec changes nothing.
	err = m.Reconfigure(limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 0, Window: time.Hour})
	assert.ErrorContains(t, err, "limit")
	assert.Equal(t, fiveAnHour, a.Spec())
	assert.Equal(t, 3, m.Len())

	require.NoError(t, m.Close())
	assert.ErrorIs(t, m.Reconfigure(fiveAnHour), limiters.ErrClosed)
}

// TestMemoryReconfigureResetsWhatItCannotChange: a limiter that refuses the
// spec, or has no Reconfigure method, is replaced by one of the new spec;
// its waiters fail with ErrClosed.
func TestMemoryReconfigureResetsWhatItCannotChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(func(key string) limiters.Limiter {
			if key == "plain" {
				// Only the Limiter methods: no Reconfigure.
				return struct{ limiters.Limiter }{limiters.NewFixedWindow(1, time.Hour)}
			}
			return newFake(1)
		})
		defer m.Close()
		ctx := context.Background()
		require.NoError(t, m.Acquire(ctx, "plain", 1))
		waiter := make(chan error, 1)
		go func() { waiter <- m.Acquire(ctx, "plain", 1) }()
		_, err := m.TryAcquire(ctx, "refuses", 1)
		require.NoError(t, err)
		synctest.Wait()

		tokens := limiters.Spec{Algorithm: limiters.AlgTokenBucket, Limit: 4, Rate: limiters.PerHour(4)}
		require.NoError(t, m.Reconfigure(tokens))
		assert.ErrorIs(t, <-waiter, limiters.ErrClosed)
		for _, k := range []string{"plain", "refuses"} {
			d, err := m.TryAcquire(ctx, k, 1)
			require.NoError(t, err)
			assert.Equal(t, limiters.Decision{Allowed: true, Limit: 4, Remaining: 3, ResetAfter: 15 * time.Minute}, d, k)
		}
	})
}

// TestMemoryReconfigureRacesInserts: keys created while Reconfigure runs
// all end up with the new spec, whichever side of it they land on.
func TestMemoryReconfigureRacesInserts(t *testing.T) {
	m := NewMemory(func(string) limiters.Limiter { return newFake(1) })
	defer m.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if _, err := m.TryAcquire(ctx, fmt.Sprintf("w%d-%d", w, i), 0); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	require.NoError(t, m.Reconfigure(fiveAnHour))
	wg.Wait()
	require.Equal(t, 8*500, m.Len())
	for w := range 8 {
		for i := range 500 {
			l := m.Get(fmt.Sprintf("w%d-%d", w, i))
			if f, ok := l.(*fake); ok {
				require.Equal(t, fiveAnHour, f.Spec(), "w%d-%d", w, i)
			} else {
				require.IsType(t, &limiters.FixedWindow{}, l)
			}
		}
	}
}

func TestGCRASetRateKeepsUsedPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGCRA(limiters.PerSecond(10), 10)
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
		g, ref := NewGCRA(r, 4), NewGCRA(r, 4)
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
		g := NewGCRA(limiters.PerSecond(10), 1)
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

func TestGCRAOptions(t *testing.T) {
	_, ok := WithIdleTimeout(time.Minute).(GCRAOption)
	assert.False(t, ok, "NewGCRA does not take WithIdleTimeout, which it would ignore")
	for _, o := range []Option{WithMaxKeys(1), WithOverflow(RefuseNew)} {
		_, ok := o.(GCRAOption)
		assert.True(t, ok)
	}
}
