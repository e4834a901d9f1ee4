package server_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// answer is one request's answer and when it came, from the burst's start.
type answer struct {
	w  *httptest.ResponseRecorder
	at time.Duration
}

// burst sends k requests at once from one caller and returns their
// answers, admitted first, each group in the order they came.
func burst(h http.Handler, k int) (admitted, refused []answer) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	start := time.Now()
	for range k {
		wg.Go(func() {
			w := do(h, "GET", "/", "192.0.2.1:1")
			a := answer{w, time.Since(start)}
			mu.Lock()
			defer mu.Unlock()
			if w.Code == http.StatusOK {
				admitted = append(admitted, a)
			} else {
				refused = append(refused, a)
			}
		})
	}
	wg.Wait()
	byTime := func(a, b answer) int { return int(a.at - b.at) }
	slices.SortStableFunc(admitted, byTime)
	slices.SortStableFunc(refused, byTime)
	return admitted, refused
}

// TestLeakyBucketHolds: a leaky bucket is a queue. A request that finds
// its slot taken and room in its queue is held until its slot, exactly
// one emission interval after the one before, and admitted; only a
// request that finds the queue full is refused, at once, told to come
// back at the next slot (when a place frees). What it advertises is
// that queue: r its free room, t its next slot. Under a policy's Block
// action and with server.New alike.
func TestLeakyBucketHolds(t *testing.T) {
	spec := limiters.Spec{Algorithm: limiters.AlgLeakyBucket, Rate: limiters.PerSecond(10), Limit: 5}
	const name = "default 10/s shaped"
	slots := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond}
	check := func(t *testing.T, h http.Handler, legacyLimit string) {
		// Ten at once: one now, five held, four refused.
		admitted, refused := burst(h, 10)
		require.Len(t, admitted, 6)
		require.Len(t, refused, 4)
		var at []time.Duration
		for _, a := range admitted {
			at = append(at, a.at)
		}
		assert.Equal(t, slots, at, "held until their slots")
		for k, a := range admitted[1:] {
			assert.Equal(t, strconv.Itoa(k+1), a.w.Header().Get("X-RateLimit-Remaining"), "room after slot %d", k+1)
		}
		for _, a := range refused {
			assert.Zero(t, a.at, "a full queue refuses at once")
			info := headers.Parse(a.w.Header(), time.Now())
			assert.Equal(t, 100*time.Millisecond, info.RetryAfter, "retry-after-ms: the next slot")
			assert.Equal(t, "1", a.w.Header().Get("Retry-After"))
			assert.Equal(t, "0", a.w.Header().Get("X-RateLimit-Remaining"))
		}
		// The last one admitted left the queue empty, its own slot
		// taken: five places, the next slot 100 ms away.
		last := admitted[len(admitted)-1].w
		assert.Equal(t, [3]string{legacyLimit, "5", "1"}, legacy(last))

		// One at a time, each at the slot the answer before said: no
		// wait, no refusal.
		time.Sleep(100 * time.Millisecond)
		for i := range 5 {
			start := time.Now()
			w := do(h, "GET", "/", "192.0.2.1:1")
			require.Equal(t, http.StatusOK, w.Code, "request %d", i)
			assert.Zero(t, time.Since(start), "request %d held", i)
			assert.Equal(t, "0.100", w.Header().Get("X-RateLimit-Reset-After"))
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Run("policy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
				Default: &server.Rule{Limits: []limiters.Spec{spec}},
			}}})
			var mu sync.Mutex
			kinds := map[server.EventKind]int{}
			h := server.New(nil, server.WithPolicy(p), server.WithObserver(func(e server.Event) {
				mu.Lock()
				kinds[e.Kind]++
				mu.Unlock()
			})).Middleware(ok)
			w := do(h, "GET", "/", "192.0.2.1:1")
			require.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, seen{q: 10, w: time.Second, r: 5, t: time.Second}, read(t, w, name), "after the first request")
			time.Sleep(100 * time.Millisecond)
			check(t, h, "10")
			assert.Equal(t, 5, kinds[server.EventDelayed], "the held requests")
			assert.Equal(t, 4, kinds[server.EventRejected])
		})
	})
	t.Run("server.New", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			repo := memoryOf(spec)
			defer repo.Close()
			var mu sync.Mutex
			kinds := map[server.EventKind]int{}
			check(t, server.New(repo, server.WithObserver(func(e server.Event) {
				mu.Lock()
				kinds[e.Kind]++
				mu.Unlock()
			})).Middleware(ok), "5")
			assert.Equal(t, 5, kinds[server.EventDelayed], "the held requests")
			assert.Equal(t, 4, kinds[server.EventRejected])
		})
	})
	t.Run("chained", func(t *testing.T) {
		// Beside a looser limit, the chain's waiters are the queue:
		// at most a full queue's drain (5 intervals) held.
		synctest.Test(t, func(t *testing.T) {
			p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
				Default: &server.Rule{Limits: []limiters.Spec{spec, fixed(1000, time.Hour)}},
			}}})
			h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
			admitted, refused := burst(h, 10)
			require.Len(t, admitted, 6)
			require.Len(t, refused, 4)
			var at []time.Duration
			for _, a := range admitted {
				at = append(at, a.at)
			}
			assert.Equal(t, slots, at)
			for k, a := range admitted[1:] {
				assert.EqualValues(t, k+1, read(t, a.w, name).r, "room after slot %d, the chain's waiters counted", k+1)
			}
			for _, a := range refused {
				assert.Equal(t, 100*time.Millisecond, headers.Parse(a.w.Header(), time.Now()).RetryAfter)
			}
		})
	})
}

// TestSlowLeakyBucketRefuses: a bucket that drains slowly (10 an hour, a
// slot every six minutes) does not hold a request for minutes: one whose
// slot is further off than a second is refused at once with the wait, as
// before, under server.New and a Policy alike.
func TestSlowLeakyBucketRefuses(t *testing.T) {
	spec := limiters.Spec{Algorithm: limiters.AlgLeakyBucket, Rate: limiters.Rate{N: 10, Per: time.Hour}, Limit: 6}
	check := func(t *testing.T, h http.Handler) {
		require.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.1:1").Code)
		start := time.Now()
		w := do(h, "GET", "/", "192.0.2.1:1")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Zero(t, time.Since(start), "refused at once, not held")
		info := headers.Parse(w.Header(), time.Now())
		assert.Equal(t, 6*time.Minute, info.RetryAfter.Round(time.Second), "the next slot")
	}
	t.Run("server.New", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			repo := memoryOf(spec)
			defer repo.Close()
			check(t, server.New(repo).Middleware(ok))
		})
	})
	t.Run("policy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
				Default: &server.Rule{Limits: []limiters.Spec{spec}},
			}}})
			check(t, server.New(nil, server.WithPolicy(p)).Middleware(ok))
		})
	})
}

// memoryOf is a repository.Memory whose keys each get a limiter of spec.
func memoryOf(spec limiters.Spec) *repository.Memory {
	return repository.NewMemory(func(string) limiters.Limiter {
		l, err := spec.New()
		if err != nil {
			panic(err)
		}
		return l
	})
}
