package limiters_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle/limiters"
)

// kind is one limiter under test in the table tests that every algorithm
// must pass: limit is the most it grants at once, and free makes permits
// available again (time for the rate limiters, Release for Concurrency).
type kind struct {
	name  string
	limit int
	mk    func(opts ...limiters.Option) limiters.Limiter
	free  func(l limiters.Limiter, n int) // frees at least n permits
	// noOpts: the constructor takes no options (Chain).
	noOpts bool
}

func sleepFree(d time.Duration) func(limiters.Limiter, int) {
	return func(_ limiters.Limiter, n int) {
		time.Sleep(time.Duration(n) * d)
		synctest.Wait()
	}
}

func releaseFree(l limiters.Limiter, n int) {
	l.Release(n)
	synctest.Wait()
}

// kinds are built inside a bubble: every one has limit 3 and frees one
// permit a second (or per Release).
func kinds() []kind {
	return []kind{
		{"TokenBucket", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewTokenBucket(limiters.PerSecond(1), 3, o...)
		}, sleepFree(time.Second), false},
		{"GCRA", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewGCRA(limiters.PerSecond(1), 3, o...)
		}, sleepFree(time.Second), false},
		{"LeakyBucket", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewLeakyBucket(limiters.PerSecond(1), 3, append([]limiters.Option{limiters.WithQueueLimit(-1)}, o...)...)
		}, sleepFree(time.Second), false},
		{"FixedWindow", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewFixedWindow(3, time.Second, o...)
		}, sleepFree(time.Second), false},
		{"SlidingWindow", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewSlidingWindow(3, time.Second, o...)
		}, sleepFree(2 * time.Second), false},
		{"SlidingLog", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewSlidingLog(3, time.Second, o...)
		}, sleepFree(time.Second), false},
		{"Concurrency", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.NewConcurrency(3, o...)
		}, releaseFree, false},
		{"FromRate", 3, func(o ...limiters.Option) limiters.Limiter {
			return limiters.FromRate(rate.NewLimiter(1, 3), o...)
		}, sleepFree(time.Second), false},
		{"Chain", 3, func(...limiters.Option) limiters.Limiter {
			return limiters.Chain(limiters.NewTokenBucket(limiters.PerSecond(1), 3), limiters.NewConcurrency(1000))
		}, sleepFree(time.Second), true},
	}
}

// exhaust takes permits with TryAcquire(1) until it is denied and returns
// how many it took.
func exhaust(t *testing.T, l limiters.Limiter) int {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if !l.TryAcquire(1).Allowed {
			return i
		}
	}
	t.Fatal("limiter never denied")
	return 0
}

// result is the outcome of an Acquire started in the background.
type result struct {
	err error
	at  time.Duration // fake time since the start of the bubble
}

// acquirer starts Acquire calls in the background and records their results.
type acquirer struct {
	start time.Time
	mu    sync.Mutex
	order []int
	at    map[int]time.Duration // grant time by id
	wg    sync.WaitGroup
}

func newAcquirer() *acquirer { return &acquirer{start: time.Now(), at: map[int]time.Duration{}} }

// goAcquire starts l.Acquire(ctx, n) and waits until it has either returned
// or blocked, so arrival order is the call order. The result arrives on the
// returned channel; successful grants append id to a.order.
func (a *acquirer) goAcquire(ctx context.Context, l limiters.Limiter, id, n int) <-chan result {
	ch := make(chan result, 1)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		err := l.Acquire(ctx, n)
		if err == nil {
			a.mu.Lock()
			a.order = append(a.order, id)
			a.at[id] = time.Since(a.start)
			a.mu.Unlock()
		}
		ch <- result{err: err, at: time.Since(a.start)}
	}()
	synctest.Wait()
	return ch
}

// requireFIFO checks that the waiters ids (in arrival order) were all
// granted, each no earlier than the one that arrived before it. Waiters
// granted at the same instant wake in any order, so times, not wake-up
// order, are what FIFO is checked on.
func (a *acquirer) requireFIFO(t *testing.T, ids ...int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, id := range ids {
		at, ok := a.at[id]
		require.True(t, ok, "waiter %d was not granted", id)
		if i > 0 {
			require.GreaterOrEqual(t, at, a.at[ids[i-1]], "waiter %d granted before waiter %d, which arrived earlier", id, ids[i-1])
		}
	}
}

func (a *acquirer) granted() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.order...)
}

// requirePending fails the test if the Acquire behind ch has returned.
func requirePending(t *testing.T, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		require.FailNowf(t, "Acquire returned early", "%+v", r)
	default:
	}
}

// recv lets the bubble settle and returns the result of the Acquire behind
// ch, failing the test if it has not returned.
func recv(t *testing.T, ch <-chan result) result {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		return r
	default:
		require.FailNow(t, "Acquire has not returned")
		return result{}
	}
}
