package limiters_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle/internal/testutil/racectx"
	"github.com/throttlekit/throttle/limiters"
)

func TestNegativeNPanics(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()
				assert.Panics(t, func() { l.TryAcquire(-1) }, "TryAcquire(-1)")
				assert.Panics(t, func() { _ = l.Acquire(t.Context(), -1) }, "Acquire(-1)")
				assert.Panics(t, func() { l.Release(-1) }, "Release(-1)")
				assert.Equal(t, limiters.Stats{Available: k.limit}, l.Stats(), "a panicking call takes nothing")
			})
		})
	}
}

func TestExceedsLimitFailsAtOnce(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()
				start := time.Now()

				d := l.TryAcquire(k.limit + 1)
				assert.False(t, d.Allowed)
				assert.Equal(t, k.limit, d.Remaining, "a denial takes nothing")
				assert.Zero(t, d.RetryAfter, "no wait makes n > limit possible")

				err := l.Acquire(t.Context(), k.limit+1)
				require.ErrorIs(t, err, limiters.ErrExceedsLimit)
				assert.Zero(t, time.Since(start), "ErrExceedsLimit comes without waiting")

				s := l.Stats()
				assert.Equal(t, int64(0), s.Acquired)
				assert.Equal(t, int64(2*(k.limit+1)), s.Rejected, "both refusals count as rejected permits")
				assert.Equal(t, k.limit, s.Available)
				assert.Zero(t, s.Queued)

				// Exactly the limit is fine.
				assert.True(t, l.TryAcquire(k.limit).Allowed)
			})
		})
	}
}

func TestZeroIsAPeek(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()

				d := l.TryAcquire(0)
				assert.True(t, d.Allowed, "a permit is free and nobody waits")
				assert.Equal(t, k.limit, d.Remaining, "a peek takes nothing")
				require.NoError(t, l.Acquire(t.Context(), 0))
				assert.Equal(t, limiters.Stats{Available: k.limit}, l.Stats(), "peeks take and reject nothing")

				exhaust(t, l)
				before := l.Stats()
				d = l.TryAcquire(0)
				assert.False(t, d.Allowed, "no permit is free")
				if k.name != "LeakyBucket" { // its Remaining is queue room
					assert.Zero(t, d.Remaining)
				}
				assert.Equal(t, before.Acquired, l.Stats().Acquired)
			})
		})
	}
}

// TestZeroPeekDeniedWhileSomeoneWaits: a permit is free, but a waiter at
// the head needs more than is free; the peek must not report Allowed.
func TestZeroPeekDeniedWhileSomeoneWaits(t *testing.T) {
	tests := []struct {
		name string
		mk   func() limiters.Limiter
	}{
		{"TokenBucket", func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(1), 3) }},
		{"GCRA", func() limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(1), 3) }},
		{"FixedWindow", func() limiters.Limiter { return limiters.NewFixedWindow(3, time.Second) }},
		{"SlidingLog", func() limiters.Limiter { return limiters.NewSlidingLog(3, time.Second) }},
		{"Concurrency", func() limiters.Limiter { return limiters.NewConcurrency(3) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.mk()
				defer l.Close()
				require.True(t, l.TryAcquire(2).Allowed)
				require.True(t, l.TryAcquire(0).Allowed, "one permit is free")

				a := newAcquirer()
				ch := a.goAcquire(t.Context(), l, 1, 3)
				requirePending(t, ch)
				assert.Equal(t, 1, l.Stats().Queued)

				d := l.TryAcquire(0)
				assert.False(t, d.Allowed, "somebody waits")
				assert.False(t, l.TryAcquire(1).Allowed, "TryAcquire fails while anyone is queued")
				assert.Equal(t, int64(2), l.Stats().Acquired)
				require.NoError(t, l.Close())
				require.ErrorIs(t, recv(t, ch).err, limiters.ErrClosed)
			})
		})
	}
}

func TestCancelledContextTakesNothing(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				require.ErrorIs(t, l.Acquire(ctx, 1), context.Canceled, "even though permits are free")

				dctx, dcancel := context.WithDeadline(t.Context(), time.Now())
				defer dcancel()
				require.ErrorIs(t, l.Acquire(dctx, 1), context.DeadlineExceeded)

				assert.Equal(t, limiters.Stats{Available: k.limit}, l.Stats(), "cancellation takes nothing and is not a rejection")
			})
		})
	}
}

func TestFIFOManyWaiters(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()
				exhaust(t, l)

				const waiters = 12
				a := newAcquirer()
				chs := make([]<-chan result, waiters)
				for i := range waiters {
					chs[i] = a.goAcquire(t.Context(), l, i, 1)
					assert.False(t, l.TryAcquire(1).Allowed, "TryAcquire must not jump the queue")
				}
				assert.Equal(t, waiters, l.Stats().Queued)
				for len(a.granted()) < waiters {
					k.free(l, 1)
				}
				for i, ch := range chs {
					require.NoError(t, recv(t, ch).err, "waiter %d", i)
				}
				ids := make([]int, waiters)
				for i := range ids {
					ids[i] = i
				}
				a.requireFIFO(t, ids...)
				assert.Zero(t, l.Stats().Queued)
			})
		})
	}
}

// TestHeadOfLineBlocking: a big request at the head holds back the small
// ones behind it even while they would fit.
func TestHeadOfLineBlocking(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				defer l.Close()
				exhaust(t, l)

				a := newAcquirer()
				big := a.goAcquire(t.Context(), l, 0, k.limit)
				small1 := a.goAcquire(t.Context(), l, 1, 1)
				small2 := a.goAcquire(t.Context(), l, 2, 1)
				for len(a.granted()) < 3 {
					k.free(l, 1)
					if g := a.granted(); !slices.Contains(g, 0) {
						require.Empty(t, g, "a small one overtook the big one")
					}
				}
				for _, ch := range []<-chan result{big, small1, small2} {
					require.NoError(t, recv(t, ch).err)
				}
				a.requireFIFO(t, 0, 1, 2)
			})
		})
	}
}

func TestCloseFailsWaiters(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk()
				exhaust(t, l)
				a := newAcquirer()
				var chs []<-chan result
				for i := range 5 {
					chs = append(chs, a.goAcquire(t.Context(), l, i, 1))
				}
				require.Equal(t, 5, l.Stats().Queued)

				require.NoError(t, l.Close())
				for _, ch := range chs {
					require.ErrorIs(t, recv(t, ch).err, limiters.ErrClosed)
				}
				require.NoError(t, l.Close(), "Close is idempotent")
				require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrClosed)
				assert.False(t, l.TryAcquire(1).Allowed)
				assert.Zero(t, l.Stats().Queued)
				k.free(l, 10)
				require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrClosed, "still closed once permits are back")
				a.wg.Wait()
			})
		})
	}
}

func TestQueueLimitCountsPermits(t *testing.T) {
	for _, k := range kinds() {
		if k.noOpts {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk(limiters.WithQueueLimit(3))
				defer l.Close()
				exhaust(t, l)
				a := newAcquirer()
				w1 := a.goAcquire(t.Context(), l, 1, 2)
				start := time.Now()
				require.ErrorIs(t, l.Acquire(t.Context(), 2), limiters.ErrQueueFull, "2 queued + 2 > 3")
				assert.Zero(t, time.Since(start), "ErrQueueFull comes at once")
				w2 := a.goAcquire(t.Context(), l, 2, 1)
				require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrQueueFull, "3 permits queued")

				s := l.Stats()
				assert.Equal(t, 2, s.Queued)
				assert.Equal(t, int64(1+2+1), s.Rejected, "exhaust's denial plus the refused permits")

				for len(a.granted()) < 2 {
					k.free(l, 1)
				}
				require.NoError(t, recv(t, w1).err)
				require.NoError(t, recv(t, w2).err)
			})
		})
	}
}

func TestQueueLimitZeroLetsNobodyWait(t *testing.T) {
	for _, k := range kinds() {
		if k.noOpts {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := k.mk(limiters.WithQueueLimit(0))
				defer l.Close()
				require.NoError(t, l.Acquire(t.Context(), 1), "a free permit needs no queue")
				exhaust(t, l)
				require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrQueueFull)
				assert.Zero(t, l.Stats().Queued)
			})
		})
	}
}

func TestLeakyBucketDefaultQueueLimitIsCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewLeakyBucket(limiters.PerSecond(1), 3)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		w1 := a.goAcquire(t.Context(), l, 1, 2)
		w2 := a.goAcquire(t.Context(), l, 2, 1)
		require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrQueueFull, "capacity 3 permits already queued")
		time.Sleep(4 * time.Second)
		synctest.Wait()
		require.NoError(t, recv(t, w1).err)
		require.NoError(t, recv(t, w2).err)
	})
}

func TestCancelWhileQueued(t *testing.T) {
	// TokenBucket 1/s, burst 1, emptied at t=0: waiters are due at 1s, 2s, 3s.
	tests := []struct {
		name   string
		cancel int             // which of the three waiters cancels, at 500ms
		wantAt []time.Duration // when the other two are granted
	}{
		{"head", 0, []time.Duration{time.Second, 2 * time.Second}},
		{"middle", 1, []time.Duration{time.Second, 2 * time.Second}},
		{"tail", 2, []time.Duration{time.Second, 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiters.NewTokenBucket(limiters.PerSecond(1), 1)
				defer l.Close()
				require.True(t, l.TryAcquire(1).Allowed)
				a := newAcquirer()
				var chs []<-chan result
				var cancels []context.CancelFunc
				for i := range 3 {
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					cancels = append(cancels, cancel)
					chs = append(chs, a.goAcquire(ctx, l, i, 1))
				}
				time.Sleep(500 * time.Millisecond)
				cancels[tt.cancel]()
				synctest.Wait()
				require.ErrorIs(t, recv(t, chs[tt.cancel]).err, context.Canceled)
				assert.Equal(t, 2, l.Stats().Queued)

				time.Sleep(5 * time.Second)
				synctest.Wait()
				var got []time.Duration
				var order []int
				for i, ch := range chs {
					if i == tt.cancel {
						continue
					}
					r := recv(t, ch)
					require.NoError(t, r.err)
					got = append(got, r.at)
					order = append(order, i)
				}
				assert.Equal(t, tt.wantAt, got, "the others move up and are granted on time")
				assert.Equal(t, order, a.granted())
				s := l.Stats()
				assert.Equal(t, int64(3), s.Acquired)
				assert.Zero(t, s.Rejected, "cancellation is not a rejection")
			})
		})
	}
}

// TestCancelHeadPromotesFittingWaiter: on a semaphore, cancelling a big
// head lets the small waiter behind it through at once.
func TestCancelHeadPromotesFittingWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewConcurrency(3)
		defer l.Close()
		require.True(t, l.TryAcquire(2).Allowed)
		ctx, cancel := context.WithCancel(t.Context())
		a := newAcquirer()
		big := a.goAcquire(ctx, l, 0, 3)
		small := a.goAcquire(t.Context(), l, 1, 1)
		requirePending(t, small)
		cancel()
		synctest.Wait()
		require.ErrorIs(t, recv(t, big).err, context.Canceled)
		require.NoError(t, recv(t, small).err)
		assert.Equal(t, limiters.Stats{Acquired: 3, Available: 0}, l.Stats())
	})
}

// TestCancelRacingGrant cancels a waiter at the moment its permits are
// granted; whichever wins, nothing is lost.
func TestCancelRacingGrant(t *testing.T) {
	t.Run("Concurrency", func(t *testing.T) {
		for range 50 {
			synctest.Test(t, func(t *testing.T) {
				l := limiters.NewConcurrency(1)
				defer l.Close()
				require.True(t, l.TryAcquire(1).Allowed)
				ctx, cancel := context.WithCancel(t.Context())
				a := newAcquirer()
				ch := a.goAcquire(ctx, l, 0, 1)
				cancel()
				l.Release(1) // grants to the waiter, which is leaving
				synctest.Wait()
				require.ErrorIs(t, recv(t, ch).err, context.Canceled, "cancel came first")
				s := l.Stats()
				assert.Equal(t, int64(1), s.Acquired, "the abandoned grant was given back")
				assert.Equal(t, 1, s.Available)
				assert.Zero(t, s.Rejected)
				assert.True(t, l.TryAcquire(1).Allowed)
			})
		}
	})
	t.Run("TokenBucket", func(t *testing.T) {
		for range 50 {
			synctest.Test(t, func(t *testing.T) {
				l := limiters.NewTokenBucket(limiters.PerSecond(1), 1)
				defer l.Close()
				require.True(t, l.TryAcquire(1).Allowed)
				// The deadline is exactly the grant time: both timers fire at 1s.
				ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(time.Second))
				defer cancel()
				a := newAcquirer()
				ch := a.goAcquire(ctx, l, 0, 1)
				time.Sleep(time.Second)
				synctest.Wait()
				r := recv(t, ch)
				s := l.Stats()
				if r.err == nil {
					assert.Equal(t, int64(2), s.Acquired)
					assert.False(t, l.TryAcquire(1).Allowed, "the grant was kept")
				} else {
					require.ErrorIs(t, r.err, context.DeadlineExceeded)
					assert.Equal(t, int64(1), s.Acquired, "the abandoned grant was given back")
					assert.Equal(t, 1, s.Available)
					assert.True(t, l.TryAcquire(1).Allowed)
				}
				assert.Zero(t, s.Rejected)
			})
		}
	})
}

func TestDeadlineFailFast(t *testing.T) {
	tests := []struct {
		name      string
		mk        func() limiters.Limiter
		ahead     int           // waiters of 1 permit queued first
		wantRetry time.Duration // when the new request's turn would come
	}{
		// Emptied at t=0, 1/s: the k-th waiter is due at k s.
		{"TokenBucket/alone", func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(1), 2) }, 0, time.Second},
		{"TokenBucket/behind3", func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(1), 2) }, 3, 4 * time.Second},
		{"GCRA/behind3", func() limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(1), 2) }, 3, 4 * time.Second},
		{"LeakyBucket/behind2", func() limiters.Limiter {
			return limiters.NewLeakyBucket(limiters.PerSecond(1), 5)
		}, 2, 3 * time.Second},
		{"FixedWindow/behind2", func() limiters.Limiter { return limiters.NewFixedWindow(2, time.Second) }, 2, 2 * time.Second},
		{"SlidingLog/behind1", func() limiters.Limiter { return limiters.NewSlidingLog(2, time.Second) }, 1, time.Second},
		{"Chain/behind3", func() limiters.Limiter {
			return limiters.Chain(limiters.NewTokenBucket(limiters.PerSecond(1), 2), limiters.NewFixedWindow(100, time.Minute))
		}, 3, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.mk()
				defer l.Close()
				exhaust(t, l)
				a := newAcquirer()
				var chs []<-chan result
				for i := range tt.ahead {
					chs = append(chs, a.goAcquire(t.Context(), l, i, 1))
				}
				before := l.Stats()

				ctx, cancel := context.WithTimeout(t.Context(), tt.wantRetry-time.Nanosecond)
				defer cancel()
				start := time.Now()
				err := l.Acquire(ctx, 1)
				assert.Zero(t, time.Since(start), "fails at once")
				require.ErrorIs(t, err, limiters.ErrRateLimited)
				var rej *limiters.RejectedError
				require.ErrorAs(t, err, &rej)
				assert.Equal(t, tt.wantRetry, rej.RetryAfter, "RetryAfter is when its turn would come")
				after := l.Stats()
				assert.Equal(t, before.Queued, after.Queued, "it never entered the queue")
				assert.Equal(t, before.Rejected+1, after.Rejected)

				// A deadline exactly at its turn is enough.
				ctx2, cancel2 := context.WithTimeout(t.Context(), tt.wantRetry)
				defer cancel2()
				last := a.goAcquire(ctx2, l, tt.ahead, 1)
				time.Sleep(tt.wantRetry - time.Nanosecond)
				synctest.Wait()
				requirePending(t, last)
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				for _, ch := range chs {
					require.NoError(t, recv(t, ch).err)
				}
				r := recv(t, last)
				if r.err != nil { // the deadline and the grant are simultaneous
					require.ErrorIs(t, r.err, context.DeadlineExceeded)
				} else {
					assert.Equal(t, tt.wantRetry, r.at)
				}
			})
		})
	}
}

func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewTokenBucket(limiters.PerSecond(1), 3)
		defer l.Close()
		assert.Equal(t, limiters.Stats{Available: 3}, l.Stats())
		require.True(t, l.TryAcquire(2).Allowed)
		assert.False(t, l.TryAcquire(2).Allowed)
		assert.Equal(t, limiters.Stats{Acquired: 2, Rejected: 2, Available: 1}, l.Stats())

		a := newAcquirer()
		w1 := a.goAcquire(t.Context(), l, 1, 2)
		w2 := a.goAcquire(t.Context(), l, 2, 1)
		assert.Equal(t, limiters.Stats{Acquired: 2, Rejected: 2, Available: 1, Queued: 2}, l.Stats())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.NoError(t, recv(t, w1).err)
		require.NoError(t, recv(t, w2).err)
		assert.Equal(t, limiters.Stats{Acquired: 5, Rejected: 2, Available: 0}, l.Stats())
	})
}

// TestTryAcquireRetryAfterCountsWaiters: a TryAcquire denied because others
// wait says when its turn would come behind them.
func TestTryAcquireRetryAfterCountsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewTokenBucket(limiters.PerSecond(1), 3)
		defer l.Close()
		require.True(t, l.TryAcquire(2).Allowed)
		a := newAcquirer()
		w := a.goAcquire(t.Context(), l, 0, 3) // due at 2s
		d := l.TryAcquire(1)
		assert.Equal(t, deny(3, 1, 2*time.Second, 3*time.Second), d)
		time.Sleep(2 * time.Second)
		require.NoError(t, recv(t, w).err)
		assert.Equal(t, deny(3, 0, 3*time.Second, time.Second), l.TryAcquire(1))
	})
}

// TestConcurrentUseLosesNothing hammers a chain of a semaphore and a bucket
// from many goroutines that acquire, sometimes give up, and release. At the
// end every permit is back and the counters add up.
func TestConcurrentUseLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := limiters.NewConcurrency(5)
		ch := limiters.Chain(sem, limiters.NewTokenBucket(limiters.PerSecond(1000), 10))
		defer ch.Close()
		var mu sync.Mutex
		var granted int64
		var wg sync.WaitGroup
		for g := range 50 {
			wg.Go(func() {
				for i := range 20 {
					ctx, cancel := context.WithTimeout(t.Context(), time.Duration((g+i)%7)*time.Millisecond)
					err := ch.Acquire(ctx, 1+(g+i)%2)
					cancel()
					if err != nil {
						assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, limiters.ErrRateLimited), "%v", err)
						continue
					}
					mu.Lock()
					granted += int64(1 + (g+i)%2)
					mu.Unlock()
					time.Sleep(time.Millisecond)
					ch.Release(1 + (g+i)%2)
				}
			})
		}
		wg.Wait()
		s := ch.Stats()
		assert.Equal(t, granted, s.Acquired)
		assert.Zero(t, s.Queued)
		assert.Equal(t, limiters.Stats{Acquired: granted, Available: 5}, sem.Stats())
		t.Logf("granted %d permits, rejected %d", granted, s.Rejected)
	})
}

// TestCancelBeforeSelectGivesTheGrantBack: a waiter whose context ended
// before it saw its grant returns the context's error and holds nothing
// (issue 8; go.dev/issue/63615 in x/sync/semaphore).
func TestCancelBeforeSelectGivesTheGrantBack(t *testing.T) {
	t.Run("Concurrency", func(t *testing.T) {
		l := limiters.NewConcurrency(1)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		ctx := racectx.GrantFirst(t.Context(), func() { l.Release(1) })
		err := l.Acquire(ctx, 1)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, limiters.Stats{Acquired: 1, Available: 1}, l.Stats(), "the grant went back")
		assert.True(t, l.TryAcquire(1).Allowed)
	})
	t.Run("TokenBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiters.NewTokenBucket(limiters.PerSecond(1), 1)
			defer l.Close()
			require.True(t, l.TryAcquire(1).Allowed)
			ctx := racectx.GrantFirst(t.Context(), func() {
				time.Sleep(time.Second) // the waker grants the waiter
				synctest.Wait()
			})
			err := l.Acquire(ctx, 1)
			require.ErrorIs(t, err, context.Canceled)
			s := l.Stats()
			assert.Equal(t, int64(1), s.Acquired, "the grant went back")
			assert.Equal(t, 1, s.Available)
			assert.True(t, l.TryAcquire(1).Allowed)
		})
	})
}

// TestRejectedErrorNamesTheLimiterAndCause: a refusal because the
// deadline would pass names the limiter (WithName, else its algorithm) and
// matches ErrRateLimited, context.DeadlineExceeded and *RejectedError.
func TestRejectedErrorNamesTheLimiterAndCause(t *testing.T) {
	tests := []struct {
		mk   func() limiters.Limiter
		name string
	}{
		{func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerMinute(1), 1) }, "token_bucket"},
		{func() limiters.Limiter { return limiters.NewGCRA(limiters.PerMinute(1), 1) }, "gcra"},
		{func() limiters.Limiter { return limiters.NewLeakyBucket(limiters.PerMinute(1), 2) }, "leaky_bucket"},
		{func() limiters.Limiter { return limiters.NewFixedWindow(1, time.Minute) }, "fixed_window"},
		{func() limiters.Limiter { return limiters.NewSlidingWindow(1, time.Minute) }, "sliding_window"},
		{func() limiters.Limiter { return limiters.NewSlidingLog(1, time.Minute) }, "sliding_log"},
		{func() limiters.Limiter { return limiters.FromRate(rate.NewLimiter(rate.Every(time.Minute), 1)) }, "x/time/rate"},
		{func() limiters.Limiter { return limiters.Chain(limiters.NewGCRA(limiters.PerMinute(1), 1)) }, "chain"},
		{func() limiters.Limiter { return limiters.NewGCRA(limiters.PerMinute(1), 1, limiters.WithName("api")) }, "api"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.mk()
				defer l.Close()
				require.True(t, l.TryAcquire(1).Allowed)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				err := l.Acquire(ctx, 1)
				var rej *limiters.RejectedError
				require.ErrorAs(t, err, &rej)
				assert.Equal(t, tt.name, rej.Limiter)
				assert.Greater(t, rej.RetryAfter, time.Second, "RetryAfter is past the deadline")
				assert.ErrorIs(t, err, limiters.ErrRateLimited)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Contains(t, err.Error(), tt.name)
				wrapped := errors.Join(errors.New("outer"), err)
				assert.ErrorIs(t, wrapped, limiters.ErrRateLimited)
				assert.ErrorAs(t, wrapped, &rej)
			})
		})
	}
}
