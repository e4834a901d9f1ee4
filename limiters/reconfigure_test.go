package limiters_test

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// TestSetRateRetimesWaiters: raising the rate mid-queue re-arms the waker,
// and the bucket keeps the half permit it had refilled.
func TestSetRateRetimesWaiters(t *testing.T) {
	type setRater interface {
		limiters.Limiter
		SetRate(limiters.Rate)
	}
	for name, mk := range map[string]func() setRater{
		"TokenBucket": func() setRater { return limiters.NewTokenBucket(limiters.PerSecond(1), 1) },
		"GCRA":        func() setRater { return limiters.NewGCRA(limiters.PerSecond(1), 1) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mk()
				defer l.Close()
				require.True(t, l.TryAcquire(1).Allowed)
				a := newAcquirer()
				var chs []<-chan result
				for i := range 3 {
					chs = append(chs, a.goAcquire(t.Context(), l, i, 1))
				}
				time.Sleep(500 * time.Millisecond)
				l.SetRate(limiters.PerSecond(10)) // half a permit held: 50ms of the new interval
				time.Sleep(time.Second)
				for _, ch := range chs {
					require.NoError(t, recv(t, ch).err)
				}
				a.requireFIFO(t, 0, 1, 2)
				assert.Equal(t, 550*time.Millisecond, a.at[0])
				assert.Equal(t, 650*time.Millisecond, a.at[1])
				assert.Equal(t, 750*time.Millisecond, a.at[2])
				s := l.Stats()
				assert.Equal(t, int64(4), s.Acquired, "each waiter granted once, none lost")
				assert.Zero(t, s.Queued)
			})
		})
	}
}

// TestSetLimitRaisedWakesWaiters: waiters that fit under a raised limit are
// granted at once, for the window limiters and the semaphore. (A bucket's
// raised burst adds room, not permits: it keeps what it holds.)
func TestSetLimitRaisedWakesWaiters(t *testing.T) {
	type setLimiter interface {
		limiters.Limiter
		SetLimit(int)
	}
	for name, mk := range map[string]func() setLimiter{
		"FixedWindow":   func() setLimiter { return limiters.NewFixedWindow(1, time.Hour) },
		"SlidingWindow": func() setLimiter { return limiters.NewSlidingWindow(1, time.Hour) },
		"SlidingLog":    func() setLimiter { return limiters.NewSlidingLog(1, time.Hour) },
		"Concurrency":   func() setLimiter { return limiters.NewConcurrency(1) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mk()
				defer l.Close()
				require.True(t, l.TryAcquire(1).Allowed)
				a := newAcquirer()
				w1 := a.goAcquire(t.Context(), l, 1, 1)
				w2 := a.goAcquire(t.Context(), l, 2, 1)
				w3 := a.goAcquire(t.Context(), l, 3, 1)
				l.SetLimit(3)
				require.NoError(t, recv(t, w1).err)
				require.NoError(t, recv(t, w2).err)
				requirePending(t, w3)
				assert.ElementsMatch(t, []int{1, 2}, a.granted())
				s := l.Stats()
				assert.Equal(t, int64(3), s.Acquired)
				assert.Equal(t, 1, s.Queued)
				l.Close()
				require.ErrorIs(t, recv(t, w3).err, limiters.ErrClosed)
			})
		})
	}
}

// TestSetLimitLoweredGrantsNoMore: a lowered limit caps what is held and
// what is granted next, and waiters above it fail with ErrExceedsLimit.
func TestSetLimitLoweredGrantsNoMore(t *testing.T) {
	t.Run("Concurrency", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiters.NewConcurrency(3)
			defer l.Close()
			require.True(t, l.TryAcquire(3).Allowed)
			a := newAcquirer()
			big := a.goAcquire(t.Context(), l, 0, 2)
			small := a.goAcquire(t.Context(), l, 1, 1)
			l.SetLimit(1)
			require.ErrorIs(t, recv(t, big).err, limiters.ErrExceedsLimit)
			l.Release(2) // 1 held: at the new limit
			synctest.Wait()
			requirePending(t, small)
			l.Release(1)
			require.NoError(t, recv(t, small).err)
			d := l.TryAcquire(1)
			assert.False(t, d.Allowed)
			assert.Equal(t, 1, d.Limit)
			assert.Equal(t, limiters.Stats{Acquired: 4, Rejected: 3, Available: 0}, l.Stats())
		})
	})
	t.Run("TokenBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiters.NewTokenBucket(limiters.PerSecond(1), 5)
			defer l.Close()
			l.SetLimit(2)
			d := l.TryAcquire(0)
			assert.Equal(t, 2, d.Limit)
			assert.Equal(t, 2, d.Remaining, "a full bucket keeps only the new burst")
			require.True(t, l.TryAcquire(2).Allowed)
			assert.False(t, l.TryAcquire(1).Allowed)
			time.Sleep(time.Hour)
			assert.Equal(t, 2, l.TryAcquire(0).Remaining, "it refills to the new burst only")
		})
	})
	t.Run("FixedWindowKeepsItsCount", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiters.NewFixedWindow(5, time.Hour)
			defer l.Close()
			require.True(t, l.TryAcquire(3).Allowed)
			l.SetLimit(4)
			assert.Equal(t, 1, l.TryAcquire(0).Remaining)
			l.SetLimit(2)
			d := l.TryAcquire(1)
			assert.False(t, d.Allowed)
			assert.Equal(t, 0, d.Remaining)
		})
	})
	t.Run("SlidingLogKeepsItsGrants", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiters.NewSlidingLog(5, time.Minute)
			defer l.Close()
			for range 4 {
				require.True(t, l.TryAcquire(1).Allowed)
				time.Sleep(time.Second)
			}
			l.SetLimit(2)
			assert.False(t, l.TryAcquire(1).Allowed)
			l.SetLimit(6)
			require.True(t, l.TryAcquire(2).Allowed)
			assert.False(t, l.TryAcquire(1).Allowed)
		})
	})
}

// TestLeakyBucketSetRate: a pending emission interval is re-timed at the
// new rate.
func TestLeakyBucketSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiters.NewLeakyBucket(limiters.PerSecond(1), 5)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		w := a.goAcquire(t.Context(), l, 0, 1)
		l.SetRate(limiters.PerSecond(10))
		time.Sleep(100*time.Millisecond - 1)
		synctest.Wait()
		requirePending(t, w)
		time.Sleep(time.Nanosecond)
		require.NoError(t, recv(t, w).err)
	})
}

func TestReconfigure(t *testing.T) {
	specs := []limiters.Spec{
		{Algorithm: limiters.AlgTokenBucket, Limit: 2, Rate: limiters.PerSecond(1)},
		{Algorithm: limiters.AlgGCRA, Limit: 2, Rate: limiters.PerSecond(1)},
		{Algorithm: limiters.AlgLeakyBucket, Limit: 2, Rate: limiters.PerSecond(1)},
		{Algorithm: limiters.AlgFixedWindow, Limit: 2, Window: time.Second},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 2, Window: time.Second},
		{Algorithm: limiters.AlgSlidingLog, Limit: 2, Window: time.Second},
		{Algorithm: limiters.AlgConcurrency, Limit: 2},
	}
	for i, s := range specs {
		t.Run(s.Algorithm, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := s.New()
				require.NoError(t, err)
				defer l.Close()
				r, ok := l.(limiters.Reconfigurable)
				require.True(t, ok, "Spec-made limiters are Reconfigurable")

				wrong := specs[(i+1)%len(specs)]
				assert.ErrorContains(t, r.Reconfigure(wrong), "limiters: spec algorithm:")
				bad := s
				bad.Limit = 0
				assert.ErrorContains(t, r.Reconfigure(bad), "limiters: spec limit:")
				assert.Equal(t, 2, l.TryAcquire(0).Limit, "a refused spec changes nothing")

				more := s
				more.Limit, more.QueueLimit = 5, 1
				require.NoError(t, r.Reconfigure(more))
				assert.Equal(t, 5, l.TryAcquire(0).Limit)
				exhaust(t, l)
				// The new queue limit holds: one permit may wait, not two.
				a := newAcquirer()
				w := a.goAcquire(t.Context(), l, 0, 1)
				require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrQueueFull)
				l.Close()
				require.ErrorIs(t, recv(t, w).err, limiters.ErrClosed)
			})
		})
	}
}

// TestReconfigureMidQueueLosesNothing: random changes of rate and burst
// while waiters queue; every waiter is granted exactly once, in order, and
// the grants never outrun the most generous configuration.
func TestReconfigureMidQueueLosesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trace := range 20 {
		seed := rng.Uint64()
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			l := limiters.NewGCRA(limiters.PerSecond(4), 3)
			defer l.Close()
			a := newAcquirer()
			var chs []<-chan result
			for i := range 30 {
				chs = append(chs, a.goAcquire(t.Context(), l, i, 1+rng.IntN(2)))
				if rng.IntN(3) == 0 {
					l.SetRate(limiters.PerSecond(1 + rng.IntN(8)))
				}
				if rng.IntN(3) == 0 {
					l.SetLimit(2 + rng.IntN(4))
				}
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			}
			time.Sleep(time.Minute)
			ids := make([]int, len(chs))
			for i, ch := range chs {
				require.NoError(t, recv(t, ch).err, "trace %d waiter %d", trace, i)
				ids[i] = i
			}
			a.requireFIFO(t, ids...)
			s := l.Stats()
			assert.Zero(t, s.Queued)
			// At most 8/s after a burst of at most 5, over the trace's span.
			last := a.at[len(chs)-1]
			assert.LessOrEqual(t, s.Acquired, int64(5+8*last.Seconds()+1), "trace %d", trace)
		})
	}
}

// TestChainMemberLoweredFailsChainWaiter: a Chain's waiter that asks for
// more than a member's lowered limit fails with ErrExceedsLimit instead of
// waiting forever.
func TestChainMemberLoweredFailsChainWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := limiters.NewConcurrency(3)
		ch := limiters.Chain(limiters.NewGCRA(limiters.PerSecond(1), 5), sem)
		defer ch.Close()
		require.True(t, ch.TryAcquire(3).Allowed)
		a := newAcquirer()
		big := a.goAcquire(t.Context(), ch, 0, 3)
		small := a.goAcquire(t.Context(), ch, 1, 1)
		sem.SetLimit(2)
		ch.Release(3)
		require.ErrorIs(t, recv(t, big).err, limiters.ErrExceedsLimit)
		require.NoError(t, recv(t, small).err)
		require.ErrorIs(t, ch.Acquire(t.Context(), 3), limiters.ErrExceedsLimit)
	})
}

// TestReconfigureRacesTryAcquire changes the limit of bucket limiters while
// other goroutines take permits: under -race, the fast path reads what
// Reconfigure writes only under the lock.
func TestReconfigureRacesTryAcquire(t *testing.T) {
	for _, l := range []interface {
		limiters.Limiter
		SetLimit(int)
	}{limiters.NewTokenBucket(limiters.PerSecond(1e6), 10), limiters.NewGCRA(limiters.PerSecond(1e6), 10)} {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						if d := l.TryAcquire(3); d.Limit != 5 && d.Limit != 10 {
							t.Errorf("Limit = %d, want 5 or 10", d.Limit)
						}
					}
				}
			})
		}
		for i := range 20000 {
			l.SetLimit(5 + 5*(i%2))
			if i%100 == 0 {
				runtime.Gosched() // let the takers in between the changes
			}
		}
		close(stop)
		wg.Wait()
		l.Close()
	}
}
