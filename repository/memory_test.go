package repository

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// counting wraps a factory and counts the limiters it made per key.
type counting struct {
	mu   sync.Mutex
	made map[string]int
	f    func() limiters.Limiter
}

func newCounting(f func() limiters.Limiter) *counting {
	return &counting{made: map[string]int{}, f: f}
}

func (c *counting) factory(key string) limiters.Limiter {
	c.mu.Lock()
	c.made[key]++
	c.mu.Unlock()
	return c.f()
}

func (c *counting) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made[key]
}

// has reports whether m holds key, without touching it.
func (m *Memory) has(key string) bool {
	h := maphash.String(m.seed, key)
	s := &m.shards[m.shardOf(h)]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.find(h, key) != nil
}

// entries counts the keys in the shards.
func (m *Memory) entries() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// slots is the total size of the shards' hash tables.
func (m *Memory) slots() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.slots)
		s.mu.Unlock()
	}
	return n
}

func tokenBucket(r limiters.Rate, burst int) func(string) limiters.Limiter {
	return func(string) limiters.Limiter { return limiters.NewTokenBucket(r, burst) }
}

func TestEntryIs64Bytes(t *testing.T) {
	assert.EqualValues(t, 64, unsafe.Sizeof(entry{}))
}

func TestShardCount(t *testing.T) {
	for _, tc := range []struct{ maxKeys, shards int }{
		{0, 256}, {1, 1}, {31, 1}, {32, 2}, {100, 4}, {1000, 32}, {4096, 256}, {1 << 20, 256},
	} {
		m := NewMemory(tokenBucket(limiters.PerSecond(1), 1), WithMaxKeys(tc.maxKeys))
		assert.Len(t, m.shards, tc.shards, "WithMaxKeys(%d)", tc.maxKeys)
		assert.Equal(t, 0, m.shardOf(^uint64(0))>>bitsFor(tc.shards), "top bits select within range")
		require.NoError(t, m.Close())
	}
}

func bitsFor(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

func TestPerKeyIsolation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(tokenBucket(limiters.PerHour(1), 2))
		defer m.Close()
		ctx := context.Background()
		for i := range 2 {
			d, err := m.TryAcquire(ctx, "a", 1)
			require.NoError(t, err)
			assert.True(t, d.Allowed, "a #%d", i)
			assert.Equal(t, 2, d.Limit)
			assert.Equal(t, 1-i, d.Remaining)
		}
		d, err := m.TryAcquire(ctx, "a", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "a is exhausted")
		assert.Positive(t, d.RetryAfter)

		d, err = m.TryAcquire(ctx, "b", 2)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "b has its own bucket")
		assert.Equal(t, 2, m.Len())
		assert.Same(t, m.Get("a"), m.Get("a"))
		assert.NotSame(t, m.Get("a"), m.Get("b"))
	})
}

func TestContextErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(tokenBucket(limiters.PerHour(1), 1))
		defer m.Close()
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := m.TryAcquire(cancelled, "k", 1)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, m.Acquire(cancelled, "k", 1), context.Canceled)
		assert.Equal(t, 0, m.Len(), "a dead context creates no key")

		require.NoError(t, m.Acquire(context.Background(), "k", 1))

		// The next permit is an hour away: a deadline before then fails at once.
		short, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = m.Acquire(short, "k", 1)
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej)
		assert.Greater(t, rej.RetryAfter, time.Minute)

		// Without a deadline it waits until cancelled.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Acquire(ctx, "k", 1) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, 1, m.Get("k").Stats().Queued)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)

		// And it is granted when the bucket refills.
		go func() { done <- m.Acquire(context.Background(), "k", 1) }()
		time.Sleep(time.Hour)
		assert.NoError(t, <-done)
	})
}

func TestReleaseConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(2) })
		defer m.Close()
		ctx := context.Background()

		require.NoError(t, m.Release(ctx, "nobody", 1), "releasing an unknown key does nothing")
		assert.Equal(t, 0, m.Len(), "and creates nothing")

		require.NoError(t, m.Acquire(ctx, "k", 2))
		done := make(chan error)
		go func() { done <- m.Acquire(ctx, "k", 1) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("acquired beyond max")
		default:
		}
		require.NoError(t, m.Release(ctx, "k", 1))
		require.NoError(t, <-done)
		require.NoError(t, m.Release(ctx, "k", 2))
		d, err := m.TryAcquire(ctx, "k", 0)
		require.NoError(t, err)
		assert.Equal(t, 2, d.Remaining)
	})
}

func TestNegativeN(t *testing.T) {
	m := NewMemory(tokenBucket(limiters.PerSecond(1), 1))
	defer m.Close()
	ctx := context.Background()
	assert.PanicsWithValue(t, "repository: negative permit count -1", func() { m.TryAcquire(ctx, "k", -1) })
	assert.Panics(t, func() { m.Acquire(ctx, "k", -1) })
	assert.Panics(t, func() { m.Release(ctx, "k", -1) })
	assert.PanicsWithValue(t, "repository: NewMemory: nil factory", func() { NewMemory(nil) })
	var none Option
	assert.PanicsWithValue(t, "repository: option 2 of 2 is nil", func() {
		NewMemory(tokenBucket(limiters.PerSecond(1), 1), WithMaxKeys(1), none)
	})
	var noGCRA GCRAOption
	assert.PanicsWithValue(t, "repository: option 1 of 1 is nil", func() { NewGCRA(limiters.PerSecond(1), 1, noGCRA) })
	g := NewGCRA(limiters.PerSecond(1), 1)
	defer g.Close()
	assert.Panics(t, func() { g.TryAcquire(ctx, "k", -1) })
	assert.Panics(t, func() { g.Acquire(ctx, "k", -1) })
	bad := NewMemory(func(string) limiters.Limiter { return nil })
	assert.Panics(t, func() { bad.Get("k") })
	assert.Equal(t, 0, bad.Len())
}

func TestIdleExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCounting(func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerSecond(10), 10) })
		m := NewMemory(c.factory, WithIdleTimeout(time.Minute))
		defer m.Close()
		ctx := context.Background()

		d, err := m.TryAcquire(ctx, "a", 5)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		old := m.Get("a")

		time.Sleep(59 * time.Second)
		assert.Equal(t, 0, m.Sweep(), "used 59s ago: kept although full again")
		time.Sleep(time.Second)
		assert.Equal(t, 1, m.Sweep(), "full again and unused for a minute")
		assert.Equal(t, 0, m.Len())
		assert.ErrorIs(t, old.Acquire(ctx, 1), limiters.ErrClosed, "the forgotten limiter is closed")

		d, err = m.TryAcquire(ctx, "a", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.Equal(t, 9, d.Remaining, "a fresh, full limiter")
		assert.Equal(t, 2, c.count("a"))
		assert.NotSame(t, old, m.Get("a"))
	})
}

func TestIdleExpiryIsLazy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A small bound means one shard, so calls for b sweep a.
		m := NewMemory(tokenBucket(limiters.PerSecond(10), 10), WithIdleTimeout(time.Minute), WithMaxKeys(10))
		defer m.Close()
		require.Len(t, m.shards, 1)
		ctx := context.Background()
		for _, k := range []string{"a", "b", "c"} {
			_, err := m.TryAcquire(ctx, k, 1)
			require.NoError(t, err)
		}
		time.Sleep(30 * time.Second)
		_, err := m.TryAcquire(ctx, "c", 1)
		require.NoError(t, err)
		time.Sleep(30 * time.Second)
		// a and b are expired, c is not: one call sweeps one key.
		_, err = m.TryAcquire(ctx, "c", 1)
		require.NoError(t, err)
		assert.False(t, m.has("a"))
		assert.True(t, m.has("b"))
		_, err = m.TryAcquire(ctx, "c", 1)
		require.NoError(t, err)
		assert.False(t, m.has("b"))
		assert.True(t, m.has("c"))
		assert.Equal(t, 1, m.Len())
		assert.Equal(t, 1, m.entries())
	})
}

func TestIdleExpiryKeepsBusyLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCounting(func() limiters.Limiter { return limiters.NewTokenBucket(limiters.PerHour(6), 2) })
		m := NewMemory(c.factory, WithIdleTimeout(time.Minute), WithMaxKeys(10))
		defer m.Close()
		ctx := context.Background()

		// "slow" is not full again for 10 minutes.
		_, err := m.TryAcquire(ctx, "slow", 1)
		require.NoError(t, err)
		// "waited" has a waiter for 10 minutes.
		require.NoError(t, m.Acquire(ctx, "waited", 2))
		done := make(chan error)
		go func() { done <- m.Acquire(ctx, "waited", 1) }()
		synctest.Wait()

		// "stuck" has a waiter that came through Get, not through the
		// repository, for 20 minutes.
		stuck := m.Get("stuck")
		require.True(t, stuck.TryAcquire(2).Allowed)
		go func() { done <- stuck.Acquire(ctx, 2) }()
		synctest.Wait()

		for range 5 {
			time.Sleep(time.Minute)
			m.Sweep() // forgets "other", nothing else
			// Calls through other keys sweep too.
			_, err := m.TryAcquire(ctx, "other", 0)
			require.NoError(t, err)
			assert.True(t, m.has("slow"))
			assert.True(t, m.has("waited"))
			assert.True(t, m.has("stuck"))
		}
		require.NoError(t, <-done) // "waited", at 10 minutes
		assert.True(t, m.has("slow"))
		assert.Equal(t, 1, c.count("slow"))

		time.Sleep(10 * time.Minute)
		require.NoError(t, <-done) // "stuck", at 20 minutes
		time.Sleep(20 * time.Minute)
		assert.Equal(t, 4, m.Sweep(), "all full again and unused")
		assert.Equal(t, 0, m.Len())
	})
}

func TestIdleExpiryKeepsHeldConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(3) }, WithIdleTimeout(time.Minute))
		defer m.Close()
		ctx := context.Background()
		require.NoError(t, m.Acquire(ctx, "k", 1))
		time.Sleep(time.Hour)
		assert.Equal(t, 0, m.Sweep(), "a permit is held")
		require.NoError(t, m.Release(ctx, "k", 1))
		time.Sleep(time.Minute)
		assert.Equal(t, 1, m.Sweep())
	})
}

func TestMaxKeysEvictsLRUIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCounting(func() limiters.Limiter { return limiters.NewFixedWindow(2, time.Hour) })
		m := NewMemory(c.factory, WithMaxKeys(3))
		defer m.Close()
		ctx := context.Background()
		peek := func(k string) {
			t.Helper()
			_, err := m.TryAcquire(ctx, k, 0)
			require.NoError(t, err)
		}
		take := func(k string) {
			t.Helper()
			d, err := m.TryAcquire(ctx, k, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		present := func(want ...string) {
			t.Helper()
			var got []string
			for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
				if m.has(k) {
					got = append(got, k)
				}
			}
			assert.Equal(t, want, got)
		}

		peek("a")
		peek("b")
		peek("c")
		peek("a") // b is now the least recently used
		peek("d")
		present("a", "c", "d")

		// The least recently used idle key goes, not the older stale one.
		take("a")
		take("c")
		peek("d")
		peek("a")
		peek("e") // c is LRU but stale; d is the LRU idle key
		present("a", "c", "e")

		// No idle key left: the key whose loss admits the least (fewest
		// permits used) goes, and its state with it; among equals, the
		// more recently used.
		take("e")
		take("c") // c has used 2, a and e 1 each
		peek("f") // LRU order: a, e, c
		present("a", "c", "f")
		assert.Equal(t, Stats{Keys: 3, Evicted: 1}, m.Stats(), "e lost its state; d was idle")
		take("e")
		d, err := m.TryAcquire(ctx, "e", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "the new e counts afresh")
		assert.Equal(t, 2, c.count("e"))
		assert.Equal(t, 3, m.Len())
	})
}

func TestMaxKeysFlood(t *testing.T) {
	const bound, flood = 1000, 100_000
	m := NewMemory(func(string) limiters.Limiter { return limiters.NewFixedWindow(10, time.Hour) }, WithMaxKeys(bound))
	defer m.Close()
	ctx := context.Background()
	for i := range flood {
		d, err := m.TryAcquire(ctx, "flood-"+strconv.Itoa(i), 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		if i%1000 == 0 {
			require.LessOrEqual(t, m.Len(), bound)
		}
	}
	assert.Equal(t, bound, m.Len())
	assert.Equal(t, bound, m.entries())
	assert.LessOrEqual(t, m.slots(), 4*bound, "the tables do not grow past the bound either")
	assert.True(t, m.has("flood-"+strconv.Itoa(flood-1)), "the newest key is kept")
	assert.EqualValues(t, flood-bound, m.Stats().Evicted, "each key past the bound evicted one not full again")
}

func TestMaxKeysFloodConcurrent(t *testing.T) {
	const bound, workers, perWorker = 500, 16, 5000
	m := NewMemory(func(string) limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(10), 10) },
		WithMaxKeys(bound), WithIdleTimeout(time.Millisecond))
	defer m.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var maxLen atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("w%d-%d", w, i)
				if _, err := m.TryAcquire(ctx, key, 1); err != nil {
					t.Error(err)
					return
				}
				// Some repeats, some releases, some Gets.
				if _, err := m.TryAcquire(ctx, fmt.Sprintf("w%d-%d", w, i/2), 1); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					maxLen.Store(max(maxLen.Load(), int64(m.Len())))
					if m.Get(key) == nil {
						t.Error("Get returned nil")
					}
					m.Sweep()
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, m.Len(), bound)
	assert.LessOrEqual(t, maxLen.Load(), int64(bound))
	assert.Equal(t, m.entries(), m.Len())
}

func TestTooManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(1) }, WithMaxKeys(2))
		ctx := context.Background()
		done := make(chan error, 2)
		for _, k := range []string{"a", "b"} {
			require.NoError(t, m.Acquire(ctx, k, 1))
			go func() { done <- m.Acquire(ctx, k, 1) }()
		}
		synctest.Wait()

		_, err := m.TryAcquire(ctx, "c", 1)
		assert.ErrorIs(t, err, ErrTooManyKeys)
		assert.EqualError(t, err, "repository: too many keys")
		assert.ErrorIs(t, m.Acquire(ctx, "c", 1), ErrTooManyKeys)
		assert.Nil(t, m.Get("c"))
		assert.Equal(t, 2, m.Len())

		// a's waiter gets the permit: a still holds one, so it still
		// cannot be evicted.
		require.NoError(t, m.Release(ctx, "a", 1))
		require.NoError(t, <-done)
		_, err = m.TryAcquire(ctx, "c", 1)
		assert.ErrorIs(t, err, ErrTooManyKeys)

		// Once a holds nothing, it gives way.
		require.NoError(t, m.Release(ctx, "a", 1))
		d, err := m.TryAcquire(ctx, "c", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.False(t, m.has("a"))

		require.NoError(t, m.Close())
		assert.ErrorIs(t, <-done, limiters.ErrClosed, "b's waiter")
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(tokenBucket(limiters.PerHour(1), 1))
		ctx := context.Background()
		var kept []limiters.Limiter
		errs := make(chan error, 10)
		for i := range 10 {
			k := strconv.Itoa(i)
			require.NoError(t, m.Acquire(ctx, k, 1))
			kept = append(kept, m.Get(k))
			go func() { errs <- m.Acquire(ctx, k, 1) }()
		}
		synctest.Wait()
		require.NoError(t, m.Close())
		for range 10 {
			assert.ErrorIs(t, <-errs, limiters.ErrClosed)
		}
		for _, l := range kept {
			assert.ErrorIs(t, l.Acquire(ctx, 1), limiters.ErrClosed, "every limiter is closed")
		}
		assert.NoError(t, m.Close(), "idempotent")
		assert.Equal(t, 0, m.Len())

		_, err := m.TryAcquire(ctx, "0", 1)
		assert.ErrorIs(t, err, limiters.ErrClosed)
		assert.ErrorIs(t, m.Acquire(ctx, "new", 1), limiters.ErrClosed)
		assert.ErrorIs(t, m.Release(ctx, "0", 1), limiters.ErrClosed)
		assert.Nil(t, m.Get("0"))
		assert.Equal(t, 0, m.Sweep())
		assert.Equal(t, 0, m.Len())
	})
}

func TestConcurrentNoOverAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, keys, workers, tries = 10, 10, 50, 5
		for _, opts := range [][]Option{nil, {WithIdleTimeout(time.Nanosecond)}, {WithMaxKeys(keys)}} {
			m := NewMemory(func(string) limiters.Limiter { return limiters.NewFixedWindow(limit, time.Hour) }, opts...)
			var admitted [keys]atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range keys * tries {
						k := (w + i) % keys
						d, err := m.TryAcquire(context.Background(), "key-"+strconv.Itoa(k), 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted[k].Add(1)
						}
					}
				})
			}
			wg.Wait()
			for k := range admitted {
				assert.EqualValues(t, limit, admitted[k].Load(), "key %d, options %d", k, len(opts))
			}
			require.NoError(t, m.Close())
		}
	})
}

func TestConcurrentAcquireRelease(t *testing.T) {
	// Concurrency limiters under churn: the permits in use never exceed
	// max per key, expiry never drops a key in use, Release never lands on
	// a fresh limiter (which would panic).
	synctest.Test(t, func(t *testing.T) {
		const max, keys, workers = 2, 4, 40
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(max) },
			WithIdleTimeout(time.Nanosecond), WithMaxKeys(keys))
		defer m.Close()
		var inUse [keys]atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range 50 {
					k := (w + i) % keys
					key := "c" + strconv.Itoa(k)
					if err := m.Acquire(context.Background(), key, 1); err != nil {
						t.Error(err)
						return
					}
					if n := inUse[k].Add(1); n > max {
						t.Errorf("key %d: %d in use", k, n)
					}
					time.Sleep(time.Millisecond)
					inUse[k].Add(-1)
					if err := m.Release(context.Background(), key, 1); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, m.Len(), keys)
	})
}

func TestConcurrentCreateOneLimiter(t *testing.T) {
	var made atomic.Int64
	m := NewMemory(func(string) limiters.Limiter {
		made.Add(1)
		return limiters.NewFixedWindow(1, time.Hour)
	})
	defer m.Close()
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 64 {
		wg.Go(func() {
			d, err := m.TryAcquire(context.Background(), "same", 1)
			if err == nil && d.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, allowed.Load(), "every caller used the one limiter kept")
	assert.Equal(t, 1, m.Len())
	assert.GreaterOrEqual(t, made.Load(), int64(1))
}

func TestTryAcquireExistingDoesNotAllocate(t *testing.T) {
	for name, opts := range map[string][]Option{
		"plain":   nil,
		"bounded": {WithMaxKeys(1000), WithIdleTimeout(time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			m := NewMemory(func(string) limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(1e6), 1e6) }, opts...)
			defer m.Close()
			ctx := context.Background()
			_, err := m.TryAcquire(ctx, "existing", 1)
			require.NoError(t, err)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := m.TryAcquire(ctx, "existing", 1); err != nil {
					panic(err)
				}
			})
			assert.Zero(t, allocs)
		})
	}
}

func TestErrorsMatch(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", ErrTooManyKeys)
	assert.True(t, errors.Is(err, ErrTooManyKeys))
}

// floodRounds is the hostile scenario of issue 14: a key limited to 5 an
// hour asks 25 times, and between its requests a client that can mint keys
// sends one request each with 20 new keys, a second later, against a bound
// of 16 keys. The key must not be admitted more than 5 times. It returns how
// often the key was admitted and how many new keys were refused.
func floodRounds(t *testing.T, repo Repository) (admitted, refused int) {
	t.Helper()
	ctx := context.Background()
	for round := range 25 {
		d, err := repo.TryAcquire(ctx, "victim", 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
		time.Sleep(time.Second)
		for i := range 20 {
			_, err := repo.TryAcquire(ctx, fmt.Sprintf("minted-%d-%d", round, i), 1)
			if errors.Is(err, ErrTooManyKeys) {
				refused++
				continue
			}
			require.NoError(t, err)
		}
	}
	return admitted, refused
}

const (
	floodBound   = 16
	floodInserts = 25 * 20
)

func TestBoundFloodCannotResetAKey(t *testing.T) {
	repos := map[string]func(...GCRAOption) Repository{
		"Memory": func(opts ...GCRAOption) Repository {
			o := make([]Option, len(opts))
			for i := range opts {
				o[i] = opts[i]
			}
			return NewMemory(tokenBucket(limiters.PerHour(5), 5), o...)
		},
		"GCRA": func(opts ...GCRAOption) Repository { return NewGCRA(limiters.PerHour(5), 5, opts...) },
	}
	stats := func(r Repository) Stats { return r.(interface{ Stats() Stats }).Stats() }
	for name, newRepo := range repos {
		t.Run(name+"/RefuseNew", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo(WithMaxKeys(floodBound), WithOverflow(RefuseNew))
				defer r.Close()
				admitted, refused := floodRounds(t, r)
				assert.Equal(t, 5, admitted, "the key keeps its limit")
				// The victim and 15 minted keys fill the bound; every
				// later minted key is refused.
				assert.Equal(t, floodInserts-(floodBound-1), refused)
				assert.Equal(t, Stats{Keys: floodBound, Refused: int64(refused)}, stats(r))
			})
		})
		t.Run(name+"/EvictStale", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo(WithMaxKeys(floodBound))
				defer r.Close()
				admitted, refused := floodRounds(t, r)
				assert.Zero(t, refused, "new keys are served")
				assert.Equal(t, 5, admitted, "keys used less than the victim go first")
				s := stats(r)
				assert.Equal(t, floodBound, s.Keys)
				// Every minted key past the bound evicted a minted key
				// that was not full again: each is counted.
				assert.EqualValues(t, floodInserts-(floodBound-1), s.Evicted)
				assert.Zero(t, s.Refused)
			})
		})
	}
}

// TestRefuseNewStillForgetsFullKeys: refusing new keys applies only when no
// key is full again; a full key makes room, and is not counted.
func TestRefuseNewStillForgetsFullKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(tokenBucket(limiters.PerHour(5), 5), WithMaxKeys(2), WithOverflow(RefuseNew))
		defer m.Close()
		ctx := context.Background()
		for _, k := range []string{"a", "b"} {
			_, err := m.TryAcquire(ctx, k, 1)
			require.NoError(t, err)
		}
		_, err := m.TryAcquire(ctx, "c", 1)
		require.ErrorIs(t, err, ErrTooManyKeys)
		assert.Nil(t, m.Get("c"))
		assert.True(t, m.has("a") && m.has("b"), "no state lost")

		// A permit comes back every 12 minutes: then a is full again, and
		// makes room; b, which has used one more, is not.
		_, err = m.TryAcquire(ctx, "b", 1)
		require.NoError(t, err)
		time.Sleep(12 * time.Minute)
		d, err := m.TryAcquire(ctx, "c", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.False(t, m.has("a"))
		assert.Equal(t, Stats{Keys: 2, Refused: 2}, m.Stats(), "c twice (TryAcquire and Get); nothing evicted")
	})
}

// adminRepo is what the Admin tests need of a repository.
type adminRepo interface {
	Repository
	Admin
	Len() int
}

// eachAdminRepo runs f, in a synctest bubble, on each memory repository
// with 3 permits an hour a key.
func eachAdminRepo(t *testing.T, f func(t *testing.T, r adminRepo)) {
	for name, newRepo := range map[string]func() adminRepo{
		"Memory": func() adminRepo { return NewMemory(tokenBucket(limiters.PerHour(3), 3)) },
		"GCRA":   func() adminRepo { return NewGCRA(limiters.PerHour(3), 3) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo()
				defer r.Close()
				f(t, r)
			})
		})
	}
}

func TestPeekSpendsNothingAndCreatesNothing(t *testing.T) {
	eachAdminRepo(t, func(t *testing.T, r adminRepo) {
		ctx := context.Background()
		for range 3 {
			d, err := r.Peek(ctx, "absent")
			require.NoError(t, err)
			assert.Equal(t, limiters.Decision{Allowed: true, Limit: 3, Remaining: 3}, d, "a full limiter")
		}
		assert.Equal(t, 0, r.Len(), "Peek created no key")

		_, err := r.TryAcquire(ctx, "k", 2)
		require.NoError(t, err)
		want, err := r.TryAcquire(ctx, "k", 0)
		require.NoError(t, err)
		for range 5 {
			d, err := r.Peek(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, want, d)
		}
		d, err := r.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "the peeks spent nothing")
		assert.Equal(t, 0, d.Remaining)
		assert.Equal(t, 1, r.Len())
	})
}

func TestResetGivesAFullLimiter(t *testing.T) {
	eachAdminRepo(t, func(t *testing.T, r adminRepo) {
		ctx := context.Background()
		require.NoError(t, r.Reset(ctx, "absent"), "resetting an absent key is not an error")
		assert.Equal(t, 0, r.Len())

		_, err := r.TryAcquire(ctx, "k", 3)
		require.NoError(t, err)
		d, err := r.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		require.False(t, d.Allowed)

		require.NoError(t, r.Reset(ctx, "k"))
		d, err = r.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.Equal(t, 2, d.Remaining, "a full limiter")
	})
}

func TestResetFailsWaiters(t *testing.T) {
	eachAdminRepo(t, func(t *testing.T, r adminRepo) {
		ctx := context.Background()
		require.NoError(t, r.Acquire(ctx, "k", 3))
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- r.Acquire(ctx, "k", 1) }()
		}
		// Another key's waiter is not disturbed.
		require.NoError(t, r.Acquire(ctx, "other", 3))
		other := make(chan error, 1)
		go func() { other <- r.Acquire(ctx, "other", 1) }()
		synctest.Wait()

		require.NoError(t, r.Reset(ctx, "k"))
		for range 2 {
			assert.ErrorIs(t, <-errs, limiters.ErrClosed)
		}
		d, err := r.TryAcquire(ctx, "k", 3)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "the failed waiters took nothing from the new limiter")

		time.Sleep(20 * time.Minute)
		assert.NoError(t, <-other)
	})
}

func TestAdminAfterClose(t *testing.T) {
	eachAdminRepo(t, func(t *testing.T, r adminRepo) {
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.Peek(cancelled, "k")
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, r.Reset(cancelled, "k"), context.Canceled)

		require.NoError(t, r.Close())
		_, err = r.Peek(context.Background(), "k")
		assert.ErrorIs(t, err, limiters.ErrClosed)
		assert.ErrorIs(t, r.Reset(context.Background(), "k"), limiters.ErrClosed)
	})
}

// TestReleaseAfterResetIsHarmless: the permit held when its key was reset
// comes back after the key has a new limiter, whose own holder still holds
// its permit. The late Release neither panics nor frees the new holder's
// permit.
func TestReleaseAfterResetIsHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(1) })
		defer m.Close()
		ctx := context.Background()
		require.NoError(t, m.Acquire(ctx, "k", 1)) // holder A
		require.NoError(t, m.Reset(ctx, "k"))
		require.NoError(t, m.Acquire(ctx, "k", 1)) // holder B, on the new limiter

		require.NotPanics(t, func() { require.NoError(t, m.Release(ctx, "k", 1)) }) // A's, late
		d, err := m.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "B still holds the only permit")

		require.NoError(t, m.Release(ctx, "k", 1)) // B's
		d, err = m.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		require.NoError(t, m.Release(ctx, "k", 1))

		// A permit whose key was reset and never recreated: its Release
		// finds nothing, and settles the debt, so later pairs balance.
		require.NoError(t, m.Acquire(ctx, "j", 1))
		require.NoError(t, m.Reset(ctx, "j"))
		require.NoError(t, m.Release(ctx, "j", 1))
		assert.False(t, m.has("j"), "Release created nothing")
		require.NoError(t, m.Acquire(ctx, "j", 1))
		require.NoError(t, m.Release(ctx, "j", 1))
		d, err = m.TryAcquire(ctx, "j", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)

		g := NewGCRA(limiters.PerHour(1), 1)
		defer g.Close()
		require.NoError(t, g.Acquire(ctx, "k", 1))
		require.NoError(t, g.Reset(ctx, "k"))
		assert.NoError(t, g.Release(ctx, "k", 1), "token buckets hold nothing to release")
	})
}

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

// TestResetUnderChurn: holders acquire and release Concurrency permits while
// their keys are reset over and over. No Release ever lands on a limiter
// that does not hold it (that would panic), and once every holder has
// released, every key's limiter has all its permits back: the permits Reset
// forgot were each dropped exactly once.
func TestResetUnderChurn(t *testing.T) {
	const max, keys, workers = 2, 3, 16
	m := NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(max) })
	defer m.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 300 {
				key := "c" + strconv.Itoa((w+i)%keys)
				switch err := m.Acquire(ctx, key, 1); {
				case errors.Is(err, limiters.ErrClosed):
					continue // its limiter was reset while it waited
				case err != nil:
					t.Error(err)
					return
				}
				if err := m.Release(ctx, key, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 500 {
		require.NoError(t, m.Reset(ctx, "c"+strconv.Itoa(i%keys)))
	}
	wg.Wait()
	for k := range keys {
		d, err := m.Peek(ctx, "c"+strconv.Itoa(k))
		require.NoError(t, err)
		assert.Equal(t, max, d.Remaining, "key %d", k)
	}
	for i := range m.shards {
		assert.Empty(t, m.shards[i].debt, "every forgotten permit was released")
	}
}

// slowRelease is a Concurrency limiter whose Release signals entered and
// waits for proceed before giving the permits back.
type slowRelease struct {
	*limiters.Concurrency
	entered, proceed chan struct{}
}

func (s *slowRelease) Release(n int) {
	close(s.entered)
	<-s.proceed
	s.Concurrency.Release(n)
}

// TestResetWaitsForAReleaseInFlight: a Reset that came while a Release was
// giving permits back would count them as held, and drop a later Release
// of the key's next holder, whose permit would then never come back.
func TestResetWaitsForAReleaseInFlight(t *testing.T) {
	first := &slowRelease{limiters.NewConcurrency(1), make(chan struct{}), make(chan struct{})}
	made := 0
	m := NewMemory(func(string) limiters.Limiter {
		if made++; made == 1 {
			return first
		}
		return limiters.NewConcurrency(1)
	})
	defer m.Close()
	ctx := context.Background()
	require.NoError(t, m.Acquire(ctx, "k", 1))

	released := make(chan error)
	go func() { released <- m.Release(ctx, "k", 1) }()
	<-first.entered
	reset := make(chan error)
	go func() { reset <- m.Reset(ctx, "k") }()
	select {
	case <-reset:
		t.Fatal("Reset completed while a Release of the key was in flight")
	case <-time.After(50 * time.Millisecond):
		// Reset is waiting for the Release (a slow machine may hide the
		// fault from this check, never the other way round).
	}
	close(first.proceed)
	require.NoError(t, <-released)
	require.NoError(t, <-reset)

	require.NoError(t, m.Acquire(ctx, "k", 1)) // the new limiter's holder
	require.NoError(t, m.Release(ctx, "k", 1))
	d, err := m.TryAcquire(ctx, "k", 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the new holder's Release reached the new limiter")
}

// TestMemoryReconfigureRealLimiters changes the limit of live keys backed by
// the package limiters: a key keeps what it used, and a new key gets the new
// limit.
func TestMemoryReconfigureRealLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 10, Window: time.Hour}
		repo := NewMemory(func(string) limiters.Limiter {
			l, err := spec.New()
			if err != nil {
				panic(err)
			}
			return l
		})
		defer repo.Close()
		ctx := context.Background()
		for range 4 {
			d, err := repo.TryAcquire(ctx, "a", 1)
			if err != nil || !d.Allowed {
				t.Fatalf("TryAcquire = %+v, %v", d, err)
			}
		}
		lower := spec
		lower.Limit = 5
		if err := repo.Reconfigure(lower); err != nil {
			t.Fatal(err)
		}
		d, err := repo.Peek(ctx, "a")
		if err != nil || d.Limit != 5 || d.Remaining != 1 {
			t.Fatalf("after lowering, key a = %+v, %v; want limit 5 with 1 left (4 used)", d, err)
		}
		d, err = repo.Peek(ctx, "b")
		if err != nil || d.Limit != 5 || d.Remaining != 5 {
			t.Fatalf("new key b = %+v, %v; want a full limit of 5", d, err)
		}
	})
}
