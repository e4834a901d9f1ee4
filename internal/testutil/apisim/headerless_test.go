package apisim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outcome is one reply of a burst and when it came back.
type outcome struct {
	status int
	header http.Header
	after  time.Duration
}

// burst sends n GET requests at once to h and returns what came back, in
// the order the replies arrived.
func burst(t *testing.T, h http.Handler, n int) []outcome {
	t.Helper()
	start := time.Now()
	var mu sync.Mutex
	var out []outcome
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r := get(t, h, "/")
			mu.Lock()
			out = append(out, outcome{r.status, r.header, time.Since(start)})
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func statuses(out []outcome) map[int]int {
	m := make(map[int]int)
	for _, o := range out {
		m[o.status]++
	}
	return m
}

// bare reports whether a refusal carries nothing a client could learn from.
func bare(h http.Header) bool {
	for name := range h {
		if name != "Content-Type" && name != "X-Content-Type-Options" {
			return false
		}
	}
	return true
}

func TestLeakyBucketShapesWithSmallBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLeakyBucket(10, 2)
		out := burst(t, l, 5)
		assert.Equal(t, map[int]int{200: 3, 429: 2}, statuses(out), "one passes, two wait, two are refused")
		var times []time.Duration
		for _, o := range out {
			if o.status == 200 {
				times = append(times, o.after)
			} else {
				assert.True(t, bare(o.header), "a bare 429: %v", o.header)
				assert.Zero(t, o.after, "refused at once")
			}
		}
		slices.Sort(times)
		assert.Equal(t, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, times, "spaced 1/rate apart")
		// Two held while the third came (the times above show the
		// holding); the refused pair, in and out at once, may overlap
		// them or each other as the goroutines happen to run.
		assert.GreaterOrEqual(t, l.Snapshot().MaxInFlight, 3, "two held while the third came")

		// Spaced at the rate, nothing is refused.
		time.Sleep(time.Second)
		for range 20 {
			require.Equal(t, http.StatusOK, get(t, l, "/").status)
			time.Sleep(100 * time.Millisecond)
		}
		assert.Equal(t, int64(2), l.Snapshot().Refused)
	})
}

func TestPenaltyWindowPunishesRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPenaltyWindow(3, time.Second)
		// Window 1: six requests, three admitted, three refused and
		// counted: three over the limit.
		assert.Equal(t, map[int]int{200: 3, 429: 3}, statuses(burst(t, p, 6)))
		// Window 2 starts three in debt: nothing is admitted, and the
		// refusal adds one more over the limit.
		time.Sleep(time.Second)
		r := get(t, p, "/")
		assert.Equal(t, http.StatusTooManyRequests, r.status)
		assert.True(t, bare(r.header))
		// Window 3 starts one in debt: two of three.
		time.Sleep(time.Second)
		assert.Equal(t, map[int]int{200: 2, 429: 1}, statuses(burst(t, p, 3)))
		// A quiet window clears the debt.
		time.Sleep(2 * time.Second)
		assert.Equal(t, map[int]int{200: 3}, statuses(burst(t, p, 3)))
	})
}

func TestPenaltyWindowSparesTheWellBehaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPenaltyWindow(3, time.Second)
		for range 5 {
			assert.Equal(t, map[int]int{200: 3}, statuses(burst(t, p, 3)))
			time.Sleep(time.Second)
		}
		assert.Zero(t, p.Snapshot().Refused)
	})
}

func TestSlidingWindowMisreportsReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble starts on a whole second, so windows are [0,1s), [1s,2s)…
		s := NewSlidingWindow(10, time.Second)
		out := burst(t, s, 11)
		assert.Equal(t, map[int]int{200: 10, 429: 1}, statuses(out))
		for _, o := range out {
			assert.Equal(t, "946684801", o.header.Get("X-RateLimit-Reset"), "the end of the current window")
			if o.status == 429 {
				assert.Equal(t, "1", o.header.Get("Retry-After"), "the whole window length")
				assert.Equal(t, "0", o.header.Get("X-RateLimit-Remaining"))
			}
		}
		// At 1.5s the previous window still weighs half: 5 fit, not 10.
		time.Sleep(1500 * time.Millisecond)
		out = burst(t, s, 10)
		assert.Equal(t, map[int]int{200: 5, 429: 5}, statuses(out))
		assert.Equal(t, "946684802", out[0].header.Get("X-RateLimit-Reset"))
		// At the advertised reset (2s) a client expects 10, and gets 5:
		// the 5 of the window just ended still count in full.
		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, map[int]int{200: 5, 429: 5}, statuses(burst(t, s, 10)))
		// After two quiet windows the slate is clean.
		time.Sleep(2 * time.Second)
		assert.Equal(t, map[int]int{200: 10}, statuses(burst(t, s, 10)))
	})
}

func TestCapacityRefusesBeyondConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCapacity(2, 100*time.Millisecond)
		out := burst(t, c, 3)
		assert.Equal(t, map[int]int{200: 2, 503: 1}, statuses(out))
		for _, o := range out {
			if o.status == 503 {
				assert.True(t, bare(o.header))
				assert.Zero(t, o.after)
			} else {
				assert.Equal(t, 100*time.Millisecond, o.after, "held for the service time")
			}
		}
		// One at a time, all are served: it caps concurrency, not rate.
		for range 10 {
			require.Equal(t, http.StatusOK, get(t, c, "/").status)
		}
		s := c.Snapshot()
		assert.Equal(t, 3, s.MaxInFlight)
		assert.Equal(t, Counts{Admitted: 12, Refused: 1}, s.ByKey[""])
	})
}

func TestQuotaPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQuota(2, 10*time.Second, "X-API-Key")
		tr := &Transport{Handler: q}
		time.Sleep(2500 * time.Millisecond)
		r := send(t, tr, http.MethodGet, "/", "", "X-API-Key", "a")
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "2", r.header.Get("X-RateLimit-Limit"))
		assert.Equal(t, "1", r.header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "946684810", r.header.Get("X-RateLimit-Reset"), "the epoch-aligned window's end")
		send(t, tr, http.MethodGet, "/", "", "X-API-Key", "a")
		r = send(t, tr, http.MethodGet, "/", "", "X-API-Key", "a")
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Equal(t, "0", r.header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "8", r.header.Get("Retry-After"), "7.5s rounded up")
		// Another key has its own quota.
		assert.Equal(t, http.StatusOK, send(t, tr, http.MethodGet, "/", "", "X-API-Key", "b").status)
		time.Sleep(7500 * time.Millisecond)
		assert.Equal(t, http.StatusOK, send(t, tr, http.MethodGet, "/", "", "X-API-Key", "a").status, "a new window")

		s := q.Snapshot()
		assert.Equal(t, Counts{Admitted: 3, Refused: 1}, s.ByKey["a"])
		assert.Equal(t, Counts{Admitted: 1}, s.ByKey["b"])
	})
}

func TestConstructorsPanicOnBadConfig(t *testing.T) {
	assert.Panics(t, func() { NewLeakyBucket(0, 1) })
	assert.Panics(t, func() { NewLeakyBucket(1, -1) })
	assert.Panics(t, func() { NewPenaltyWindow(0, time.Second) })
	assert.Panics(t, func() { NewSlidingWindow(1, 0) })
	assert.Panics(t, func() { NewCapacity(0, 0) })
	assert.Panics(t, func() { NewQuota(1, 0, "K") })
}

func TestShapersForgetClientsThatGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, h := range []interface {
			http.Handler
			Snapshot() Stats
		}{NewLeakyBucket(1, 5), NewCapacity(5, time.Second)} {
			get(t, h, "/") // the leaky bucket's first passes at once; the capacity holds it 1s
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			cancel()
			s := h.Snapshot()
			assert.Equal(t, int64(1), s.Admitted, "%T: a request whose client left is not admitted", h)
			assert.Zero(t, s.Refused)
		}
	})
}

func TestSnapshotWhileServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQuota(30, time.Second, "K")
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 50 {
				s := q.Snapshot()
				s.ByKey["mine"] = Counts{Admitted: 99} // a copy: the server does not see it
				time.Sleep(time.Millisecond)
			}
		}()
		out := burst(t, q, 50)
		<-done
		assert.Equal(t, map[int]int{200: 30, 429: 20}, statuses(out))
		s := q.Snapshot()
		assert.Equal(t, Counts{Admitted: 30, Refused: 20}, s.ByKey[""])
		assert.NotContains(t, s.ByKey, "mine")
		assert.Len(t, s.Refusals, 20)
	})
}
