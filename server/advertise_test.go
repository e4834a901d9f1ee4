package server_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// quotaNamed returns the quota Parse read under name.
func quotaNamed(t *testing.T, info headers.Info, name string) headers.Quota {
	t.Helper()
	for _, q := range info.Quotas {
		if q.Name == name {
			return q
		}
	}
	require.Failf(t, "no quota", "no quota named %q in %+v", name, info.Quotas)
	return headers.Quota{}
}

// seen is what a client reads of one limit: q, w, r, t (-1: none).
type seen struct {
	q, r int64
	w, t time.Duration
}

func read(t *testing.T, w *httptest.ResponseRecorder, name string) seen {
	t.Helper()
	now := time.Now()
	q := quotaNamed(t, headers.Parse(w.Header(), now), name)
	s := seen{q: q.Limit, r: q.Remaining, w: q.Window, t: -1}
	if !q.Reset.IsZero() {
		s.t = q.Reset.Sub(now)
	}
	return s
}

// legacy is the X-RateLimit-* triple.
func legacy(w *httptest.ResponseRecorder) [3]string {
	h := w.Header()
	return [3]string{h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")}
}

// TestAdvertisedPerAlgorithm: each algorithm, at ten per second, tells
// what it admits: q and w the rate, r what is admitted now, t until more
// is, whole seconds rounded up, and a refusal's wait to the millisecond.
// (The leaky bucket holds requests rather than refusing them:
// TestLeakyBucketHolds.)
func TestAdvertisedPerAlgorithm(t *testing.T) {
	rate := limiters.PerSecond(10)
	cases := []struct {
		spec  limiters.Spec
		name  string
		burst int // requests admitted at once from fresh
		q     int64
		w     time.Duration
		first seen // after the first request
		retry time.Duration
	}{
		{spec: limiters.Spec{Algorithm: limiters.AlgTokenBucket, Rate: rate, Limit: 5}, name: "default 10/s burst 5",
			burst: 5, q: 10, w: time.Second, first: seen{r: 4, t: time.Second}, retry: 100 * time.Millisecond},
		{spec: limiters.Spec{Algorithm: limiters.AlgGCRA, Rate: rate, Limit: 10}, name: "default 10/s",
			burst: 10, q: 10, w: time.Second, first: seen{r: 9, t: time.Second}, retry: 100 * time.Millisecond},
		{spec: limiters.Spec{Algorithm: limiters.AlgGCRA, Rate: limiters.PerMinute(100), Limit: 100}, name: "default 100/m",
			burst: 100, q: 100, w: time.Minute, first: seen{r: 99, t: time.Second}, retry: 600 * time.Millisecond},
		{spec: limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 10, Window: time.Second}, name: "default 10/1s",
			burst: 10, q: 10, w: time.Second, first: seen{r: 9, t: time.Second}, retry: time.Second},
		// The counter approximation: ten more only once the first
		// request's window has passed out of the weighting (2 s), the
		// eleventh once 10·(1−x)+1 ≤ 10 (1.1 s).
		{spec: limiters.Spec{Algorithm: limiters.AlgSlidingWindow, Limit: 10, Window: time.Second}, name: "default 10/1s",
			burst: 10, q: 10, w: time.Second, first: seen{r: 9, t: 2 * time.Second}, retry: 1100 * time.Millisecond},
		{spec: limiters.Spec{Algorithm: limiters.AlgSlidingLog, Limit: 10, Window: time.Second}, name: "default 10/1s",
			burst: 10, q: 10, w: time.Second, first: seen{r: 9, t: time.Second}, retry: time.Second},
	}
	for _, c := range cases {
		t.Run(c.spec.Algorithm+" "+c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
					Default: &server.Rule{Limits: []limiters.Spec{c.spec}},
				}}})
				h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
				a := "192.0.2.1:1"
				w := do(h, "GET", "/", a)
				require.Equal(t, http.StatusOK, w.Code)
				got := read(t, w, c.name)
				assert.Equal(t, seen{q: c.q, w: c.w, r: c.first.r, t: c.first.t}, got, "after the first request")
				assert.Equal(t, [3]string{strconv.FormatInt(c.q, 10), strconv.FormatInt(c.first.r, 10),
					strconv.FormatInt(int64(c.first.t/time.Second), 10)}, legacy(w))
				for i := 1; i < c.burst; i++ {
					w = do(h, "GET", "/", a)
					require.Equal(t, http.StatusOK, w.Code, "request %d", i)
				}
				if c.burst > 1 {
					got = read(t, w, c.name)
					assert.EqualValues(t, 0, got.r, "the last of the burst leaves nothing")
					assert.Positive(t, got.t, "and says when more comes")
				}
				w = do(h, "GET", "/", a)
				require.Equal(t, http.StatusTooManyRequests, w.Code)
				info := headers.Parse(w.Header(), time.Now())
				assert.Equal(t, c.retry, info.RetryAfter, "retry-after-ms")
				assert.Equal(t, strconv.FormatInt(int64((c.retry+time.Second-1)/time.Second), 10), w.Header().Get("Retry-After"))
				got = read(t, w, c.name)
				assert.EqualValues(t, 0, got.r)
				assert.GreaterOrEqual(t, got.t, c.retry, "t is never before the retry")
				pr := problem(t, w)
				assert.Equal(t, []any{c.name}, pr["violated-policies"])
				assert.Equal(t, server.ProblemTypeQuotaExceeded, pr["type"])
				// Waiting what it says admits the next request.
				time.Sleep(c.retry)
				assert.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
			})
		})
	}
}

// TestAdvertisedConcurrency: a concurrency limit has no window and no t,
// and its unit is concurrent requests.
func TestAdvertisedConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Endpoints: map[string]server.Rule{"GET /x": {Limits: []limiters.Spec{{Algorithm: limiters.AlgConcurrency, Limit: 2}}}},
		}}})
		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		w := do(h, "GET", "/x", "192.0.2.1:1")
		q := quotaNamed(t, headers.Parse(w.Header(), time.Now()), "GET /x 2 in flight")
		assert.Equal(t, headers.Quota{Name: "GET /x 2 in flight", Limit: 2, Remaining: 1, Unit: "concurrent-requests"}, q)
	})
}

// TestAdvertisedChain: a rule's two limits are two items, each with its
// own numbers; the legacy triple is all one limit's, the binding one's.
func TestAdvertisedChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Endpoints: map[string]server.Rule{"POST /api/ask": {Limits: []limiters.Spec{
				{Algorithm: limiters.AlgSlidingWindow, Limit: 10, Window: time.Minute},
				fixed(1000, 24*time.Hour),
			}}},
		}}})
		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		a := "192.0.2.1:1"
		minute, day := "POST /api/ask 10/1m", "POST /api/ask 1000/1d"
		var w *httptest.ResponseRecorder
		for i := range 10 {
			w = do(h, "POST", "/api/ask", a)
			require.Equal(t, http.StatusOK, w.Code)
			m, d := read(t, w, minute), read(t, w, day)
			assert.Equal(t, seen{q: 10, w: time.Minute, r: int64(9 - i)}, seen{q: m.q, w: m.w, r: m.r})
			assert.Equal(t, seen{q: 1000, w: 24 * time.Hour, r: int64(999 - i)}, seen{q: d.q, w: d.w, r: d.r})
			// The minute has the least left relative to its size.
			assert.Equal(t, [3]string{"10", strconv.Itoa(9 - i), strconv.FormatInt(int64((m.t+time.Second-1)/time.Second), 10)}, legacy(w))
		}
		m := read(t, w, minute)
		assert.LessOrEqual(t, m.t, 2*time.Minute, "the minute's t is the minute's, not the day's")
		w = do(h, "POST", "/api/ask", a)
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, []any{minute}, problem(t, w)["violated-policies"])
		lg := legacy(w)
		assert.Equal(t, "10", lg[0])
		assert.Equal(t, "0", lg[1])
		reset, err := strconv.Atoi(lg[2])
		require.NoError(t, err)
		assert.LessOrEqual(t, reset, 120, "the reset of the minute that refused, not of the day")
		assert.Equal(t, w.Header().Get("Retry-After"), lg[2])
	})
}

// TestFinalRefusal: a request costing more than a cost cap ever admits is
// refused for good: no Retry-After, its own problem type, Classify reads it
// as final.
func TestFinalRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Endpoints: map[string]server.Rule{"POST /api/ask": {
				Limits:   []limiters.Spec{fixed(100, time.Hour)},
				CostCaps: []limiters.Spec{fixed(1000, time.Hour)},
			}},
		}}}, server.WithCapCost(func(r keyextract.Request) int {
			n, _ := strconv.Atoi(r.Header("X-Tokens"))
			return n
		}))
		var evs []server.Event
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(func(ev server.Event) { evs = append(evs, ev) })).Middleware(ok)
		w := do(h, "POST", "/api/ask", "192.0.2.1:1", "X-Tokens", "5000")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Empty(t, w.Header().Get("Retry-After"))
		assert.Empty(t, w.Header().Get("Retry-After-Ms"))
		pr := problem(t, w)
		assert.Equal(t, server.ProblemTypeRequestExceedsLimit, pr["type"])
		assert.NotContains(t, pr, "retry_after")
		assert.Equal(t, []any{"POST /api/ask cost 1000/1h"}, pr["violated-policies"])
		assert.Contains(t, pr["detail"], "costs 5000, more than the cost limit of 1000")
		c := headers.Classify(w.Code, w.Header(), w.Body.Bytes())
		assert.Equal(t, headers.TooLarge, c.Signal)
		assert.True(t, c.Signal.Final())
		require.NotEmpty(t, evs)
		assert.True(t, evs[len(evs)-1].Final)
		// The limits still advertise themselves, the cap with its unit.
		q := quotaNamed(t, headers.Parse(w.Header(), time.Now()), "POST /api/ask cost 1000/1h")
		assert.Equal(t, "cost", q.Unit)
		assert.EqualValues(t, 1000, q.Remaining)
		// A request that fits is admitted.
		assert.Equal(t, http.StatusOK, do(h, "POST", "/api/ask", "192.0.2.1:1", "X-Tokens", "900").Code)
	})
}

// TestFinalRefusalPlain: without a policy, a weight above the limit is
// final too.
func TestFinalRefusalPlain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(10)
		defer repo.Close()
		h := server.New(repo, server.WithCost(func(keyextract.Request) int { return 11 })).Middleware(ok)
		w := do(h, "GET", "/", "192.0.2.1:1")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Empty(t, w.Header().Get("Retry-After"))
		assert.Equal(t, server.ProblemTypeRequestExceedsLimit, problem(t, w)["type"])
	})
}

// TestAdvertisedWithoutMembers: a storage that cannot report its limits one
// by one has them advertised as one item, from its Decision: named after
// the limit when there is one, after the rule when there are several.
func TestAdvertisedWithoutMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		storage := func(specs []limiters.Spec) (repository.Repository, error) {
			return repository.NewMemory(func(string) limiters.Limiter {
				ls := make([]limiters.Limiter, len(specs))
				for i, s := range specs {
					ls[i], _ = s.New()
				}
				if len(ls) == 1 {
					return ls[0]
				}
				return limiters.Chain(ls...)
			}), nil
		}
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Endpoints: map[string]server.Rule{
				"/one": {Limits: []limiters.Spec{fixed(10, time.Minute)}},
				"/two": {Limits: []limiters.Spec{fixed(10, time.Minute), fixed(100, time.Hour)}},
			},
		}}}, server.WithStorage(storage))
		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		w := do(h, "GET", "/one", "192.0.2.1:1")
		got := read(t, w, "/one 10/1m")
		assert.Equal(t, []any{int64(10), int64(9), time.Minute}, []any{got.q, got.r, got.w})
		w = do(h, "GET", "/two", "192.0.2.1:1")
		got = read(t, w, "/two")
		assert.Equal(t, []any{int64(10), int64(9)}, []any{got.q, got.r})
	})
}
