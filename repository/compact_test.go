package repository

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// compact reports whether m keeps key as a state, without a limiter.
func (m *Memory) compact(key string) bool {
	s, h, err := m.lock(key)
	if err != nil {
		return false
	}
	defer s.mu.Unlock()
	e := s.find(h, key)
	return e != nil && e.x.Load().lim == nil
}

// TestCompactBytesPerKey: NewMemory of a GCRA (or TokenBucket) factory
// holds at most 100 bytes a key (issue 21): the entry, the key's bytes and
// its share of the table; no limiter. 2^17 keys, each used once, none
// full again (10 an hour).
func TestCompactBytesPerKey(t *testing.T) {
	const n = 1 << 17
	for _, tc := range []struct {
		name    string
		factory func(string) limiters.Limiter
	}{
		{"gcra", func(string) limiters.Limiter { return limiters.NewGCRA(limiters.PerHour(10), 10) }},
		{"tokenbucket", func(string) limiters.Limiter { return limiters.NewTokenBucket(limiters.PerHour(10), 10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			before := heap()
			m := NewMemory(tc.factory)
			var buf []byte
			for i := range n {
				buf = strconv.AppendInt(append(buf[:0], "10.0."...), int64(i), 10)
				d, err := m.TryAcquire(ctx, string(buf), 1)
				require.NoError(t, err)
				require.Equal(t, 9, d.Remaining)
			}
			require.Equal(t, n, m.Len())
			per := float64(heap()-before) / n
			t.Logf("%d keys: %.1f B a key", n, per)
			assert.LessOrEqual(t, per, 100.0)
			assert.True(t, m.compact("10.0.7"))
			runtime.KeepAlive(m)
		})
	}
}

// TestCompactDecidesAsTheLimiter: on random traces over a few keys —
// TryAcquire, Peek, Acquire with and without deadlines (some of which
// wait: the key's limiter is made, and the waiters are served in order),
// Get, Reset and sweeps — a Memory of GCRA or TokenBucket keys decides
// exactly what one limiter per key, never taken apart, decides, and
// reports the same Members.
func TestCompactDecidesAsTheLimiter(t *testing.T) {
	for seed := range uint64(24) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			r := []limiters.Rate{limiters.PerSecond(10), limiters.PerMinute(30), limiters.Every(250 * time.Millisecond)}[seed%3]
			burst := 1 + rng.IntN(5)
			newLim := func() limiters.Limiter {
				if seed%2 == 0 {
					return limiters.NewTokenBucket(r, burst, limiters.WithName("b"))
				}
				return limiters.NewGCRA(r, burst, limiters.WithName("b"))
			}
			m := NewMemory(func(string) limiters.Limiter { return newLim() }, WithIdleTimeout(time.Minute))
			defer m.Close()
			ref := map[string]limiters.Limiter{}
			refOf := func(k string) limiters.Limiter {
				if ref[k] == nil {
					ref[k] = newLim()
				}
				return ref[k]
			}
			ctx := context.Background()
			type result struct {
				err  error
				want error
			}
			var waits []chan result
			for i := range 300 {
				time.Sleep(time.Duration(rng.Int64N(int64(r.Interval()))))
				k := "k" + strconv.Itoa(rng.IntN(3))
				n := rng.IntN(burst + 2)
				switch op := rng.IntN(10); {
				case op < 4:
					want := refOf(k).TryAcquire(n)
					got, err := m.TryAcquire(ctx, k, n)
					require.NoError(t, err)
					require.Equal(t, want, got, "seed %d step %d: TryAcquire(%s, %d)", seed, i, k, n)
				case op < 5:
					want := refOf(k).TryAcquire(0)
					got, err := m.Peek(ctx, k)
					require.NoError(t, err)
					require.Equal(t, want, got, "seed %d step %d: Peek(%s)", seed, i, k)
				case op < 8:
					// An Acquire, with a deadline two intervals ahead half
					// the time. Both run in goroutines; the reference's
					// result is compared when both are done.
					actx, cancel := ctx, context.CancelFunc(func() {})
					if rng.IntN(2) == 0 {
						actx, cancel = context.WithTimeout(ctx, 2*r.Interval())
					}
					done := make(chan result, 1)
					want := make(chan error, 1)
					l := refOf(k)
					go func() { want <- l.Acquire(actx, n) }()
					synctest.Wait()
					go func() {
						defer cancel()
						err := m.Acquire(actx, k, n)
						done <- result{err, <-want}
					}()
					synctest.Wait()
					waits = append(waits, done)
				case op < 9 && rng.IntN(2) == 0:
					require.NotNil(t, m.Get(k))
				case op < 9:
					want := limiters.Members(refOf(k), n, nil)
					got, err := m.Members(k, n, nil)
					require.NoError(t, err)
					require.Equal(t, want, got, "seed %d step %d: Members(%s, %d)", seed, i, k, n)
				default:
					if ref[k] != nil {
						ref[k].Close()
						delete(ref, k)
					}
					require.NoError(t, m.Reset(ctx, k))
				}
			}
			time.Sleep(time.Hour) // every wait is over
			for _, w := range waits {
				r := <-w
				var rej *limiters.RejectedError
				if errors.As(r.want, &rej) {
					var got *limiters.RejectedError
					require.ErrorAs(t, r.err, &got)
					assert.Equal(t, *rej, *got)
				} else {
					assert.Equal(t, r.want, r.err)
				}
			}
			m.Sweep()
		})
	}
}

// TestCompactKeepsNoLimiterUntilOneIsNeeded: a GCRA key is a state until a
// caller must wait or Get asks for its limiter; a rate whose interval is
// not whole nanoseconds, and any other limiter, keeps its limiter.
func TestCompactKeepsNoLimiterUntilOneIsNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemory(func(k string) limiters.Limiter {
			switch k {
			case "thirds":
				return limiters.NewGCRA(limiters.Rate{N: 3, Per: time.Second}, 1)
			case "window":
				return limiters.NewFixedWindow(1, time.Second)
			}
			return limiters.NewGCRA(limiters.PerSecond(1), 1)
		})
		defer m.Close()
		for _, k := range []string{"a", "b", "c", "thirds", "window"} {
			_, err := m.TryAcquire(ctx, k, 1)
			require.NoError(t, err)
		}
		assert.True(t, m.compact("a"))
		assert.False(t, m.compact("thirds"), "333,333,333⅓ ns: not exact in an int64")
		assert.False(t, m.compact("window"))

		l := m.Get("b")
		assert.False(t, m.compact("b"))
		assert.Same(t, l, m.Get("b"))
		assert.False(t, l.TryAcquire(1).Allowed, "its state came along")
		require.NoError(t, m.Acquire(ctx, "a", 1), "waits a second")
		assert.False(t, m.compact("a"), "a caller waited: the limiter is made")
		ms, err := m.Members("c", 1, nil)
		require.NoError(t, err)
		assert.Equal(t, "gcra", ms[0].Algorithm)
		assert.True(t, m.compact("c"), "Members makes no limiter")
		// A key's configuration is shared: one kind for a, b and c.
		s, h, _ := m.lock("c")
		p := s.find(h, "c").x.Load()
		s.mu.Unlock()
		assert.Same(t, m.kind.Load(), p)
	})
}

// TestCompactForgottenWhilePinned: a compact key forgotten while a call
// holds it (Reset during an insert's decision, Close during a wait) leaves
// that call a closed limiter, as a limiter of its own would be.
func TestCompactForgottenWhilePinned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewGCRA(limiters.PerHour(1), 1) })
		require.NoError(t, m.Acquire(ctx, "k", 1))
		e, s, err := m.pin("k")
		require.NoError(t, err)
		require.NoError(t, m.Reset(ctx, "k"))
		s.mu.Lock()
		d := m.try(e, 1)
		s.mu.Unlock()
		assert.False(t, d.Allowed)
		l, err := m.acquireNow(e, 1)
		require.NoError(t, err)
		assert.ErrorIs(t, l.Acquire(ctx, 1), limiters.ErrClosed)
		e.refs.Add(-1)

		done := make(chan error)
		go func() { done <- m.Acquire(ctx, "w", 1) }()
		go func() { done <- m.Acquire(ctx, "w", 1) }()
		synctest.Wait()
		require.NoError(t, <-done)
		require.NoError(t, m.Close())
		assert.ErrorIs(t, <-done, limiters.ErrClosed)
	})
}

// TestCompactReconfigure: Reconfigure gives compact keys the new spec
// keeping their state, as the limiter's own Reconfigure does, and keeps
// them compact.
func TestCompactReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(10), 10) })
		defer m.Close()
		ref := limiters.NewGCRA(limiters.PerSecond(10), 10)
		_, err := m.TryAcquire(ctx, "k", 7)
		require.NoError(t, err)
		ref.TryAcquire(7)
		spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Rate: limiters.PerSecond(2), Limit: 5}
		require.NoError(t, m.Reconfigure(spec))
		require.NoError(t, ref.Reconfigure(spec))
		assert.True(t, m.compact("k"))
		for range 8 {
			time.Sleep(300 * time.Millisecond)
			d, err := m.TryAcquire(ctx, "k", 1)
			require.NoError(t, err)
			assert.Equal(t, ref.TryAcquire(1), d)
		}
		_, err = m.TryAcquire(ctx, "new", 1)
		require.NoError(t, err)
		assert.True(t, m.compact("new"), "made from the spec: compact too")
	})
}
