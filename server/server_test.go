package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// windowRepo is a repository of fixed windows of limit per hour.
func windowRepo(limit int) *repository.Memory {
	return repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewFixedWindow(limit, time.Hour)
	}, repository.WithMaxKeys(1000))
}

func TestMiddlewarePerIPIgnoresForgedForwardedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(3)
		defer repo.Close()
		h := server.New(repo).Middleware(ok)
		// One peer forging a different X-Forwarded-For on every request is
		// still one client.
		for i := range 3 {
			w := do(h, "GET", "/", "192.0.2.1:1000", "X-Forwarded-For", "198.51.100."+strconv.Itoa(i))
			require.Equal(t, http.StatusOK, w.Code, i)
		}
		w := do(h, "GET", "/", "192.0.2.1:1001", "X-Forwarded-For", "198.51.100.99")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		// Another peer has its own limit.
		assert.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.2:1000").Code)
	})
}

func TestMiddlewarePerIPHonoursTrustedProxies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(2)
		defer repo.Close()
		proxies := netip.MustParsePrefix("10.0.0.0/8")
		h := server.New(repo, server.WithKey(keyextract.IP(proxies))).Middleware(ok)
		// Through the trusted proxy, each forwarded client is its own key,
		// even when it prepends a forged hop.
		for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
			for i := range 2 {
				w := do(h, "GET", "/", "10.1.2.3:5000", "X-Forwarded-For", "203.0.113."+strconv.Itoa(i)+", "+client)
				require.Equal(t, http.StatusOK, w.Code, client)
			}
			w := do(h, "GET", "/", "10.1.2.3:5000", "X-Forwarded-For", client)
			require.Equal(t, http.StatusTooManyRequests, w.Code, client)
		}
		// An untrusted peer's header is ignored: its key is its address.
		for range 2 {
			require.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.9:1", "X-Forwarded-For", "198.51.100.77").Code)
		}
		require.Equal(t, http.StatusTooManyRequests, do(h, "GET", "/", "192.0.2.9:1", "X-Forwarded-For", "198.51.100.78").Code)
	})
}

func TestHeadersAndProblemDetails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(2)
		defer repo.Close()
		h := server.New(repo).Middleware(ok)

		w := do(h, "GET", "/", "192.0.2.1:1")
		require.Equal(t, http.StatusOK, w.Code)
		info := headers.Parse(w.Header(), time.Now())
		require.NotEmpty(t, info.Quotas)
		for _, q := range info.Quotas {
			assert.EqualValues(t, 2, q.Limit)
			assert.EqualValues(t, 1, q.Remaining)
		}
		assert.False(t, info.HasRetryAfter)

		do(h, "GET", "/", "192.0.2.1:1")
		w = do(h, "GET", "/", "192.0.2.1:1")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "3600", w.Header().Get("Retry-After")) // the window is one hour, starting now
		info = headers.Parse(w.Header(), time.Now())
		assert.True(t, info.HasRetryAfter)
		assert.Equal(t, time.Hour, info.RetryAfter)
		assert.Equal(t, time.Hour, info.Delay(time.Now()))
		for _, q := range info.Quotas {
			assert.EqualValues(t, 0, q.Remaining)
		}

		// go-retryablehttp's backoff reads our Retry-After.
		resp := w.Result()
		defer resp.Body.Close()
		assert.Equal(t, time.Hour, retryablehttp.DefaultBackoff(time.Second, 2*time.Hour, 1, resp))

		p := problem(t, w)
		assert.Equal(t, server.ProblemTypeQuotaExceeded, p["type"])
		assert.Equal(t, "Too Many Requests", p["title"])
		assert.EqualValues(t, 429, p["status"])
		assert.EqualValues(t, 3600, p["retry_after"])
		assert.Equal(t, []any{"default"}, p["violated-policies"])
		assert.Contains(t, p["detail"], "rate limit of 2 exceeded")
	})
}

func TestHeaderStyles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(5)
		defer repo.Close()
		legacy := do(server.New(repo, server.WithHeaders(headers.Legacy)).Middleware(ok), "GET", "/", "192.0.2.1:1")
		assert.NotEmpty(t, legacy.Header().Get("X-RateLimit-Limit"))
		assert.Empty(t, legacy.Header().Get("RateLimit"))
		ietf := do(server.New(repo, server.WithHeaders(headers.IETF)).Middleware(ok), "GET", "/", "192.0.2.1:1")
		assert.Empty(t, ietf.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, `"default";r=3;t=3600`, ietf.Header().Get("RateLimit"))
	})
}

func TestAnonymousRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(1)
		defer repo.Close()
		rec := &recorder{}
		h := server.New(repo, server.WithObserver(rec.observe)).Middleware(ok)
		// No RemoteAddr: no IP key. Such requests share one bucket.
		require.Equal(t, http.StatusOK, do(h, "GET", "/", "").Code)
		require.Equal(t, http.StatusTooManyRequests, do(h, "GET", "/", "@unix").Code)
		assert.Equal(t, server.AnonymousKey, rec.events[0].Key)

		// Or are refused.
		strict := server.New(repo, server.WithAnonymousKey("")).Middleware(ok)
		w := do(strict, "GET", "/", "")
		assert.Equal(t, http.StatusForbidden, w.Code)
		assert.EqualValues(t, 403, problem(t, w)["status"])
	})
}

func TestWeightedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(10)
		defer repo.Close()
		cost := func(r keyextract.Request) int {
			n, _ := strconv.Atoi(r.Header("X-Cost"))
			return n
		}
		h := server.New(repo, server.WithCost(cost)).Middleware(ok)
		require.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.1:1", "X-Cost", "7").Code)
		w := do(h, "GET", "/", "192.0.2.1:1", "X-Cost", "4")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		require.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.1:1", "X-Cost", "3").Code)
		// More than the limit could ever grant: 429 with a clear detail.
		w = do(h, "GET", "/", "192.0.2.2:1", "X-Cost", "11")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Contains(t, problem(t, w)["detail"], "costs 11, more than the limit of 10")
	})
}

func TestFailOpenAndClosed(t *testing.T) {
	boom := errors.New("redis down")
	rec := &recorder{}
	open := server.New(&fakeRepo{err: boom}, server.WithObserver(rec.observe)).Middleware(ok)
	w := do(open, "GET", "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
	require.Len(t, rec.events, 1)
	assert.Equal(t, server.EventError, rec.events[0].Kind)
	assert.True(t, rec.events[0].FailedOpen)
	assert.ErrorIs(t, rec.events[0].Err, boom)

	closed := server.New(&fakeRepo{err: boom}, server.WithFailOpen(false)).Middleware(ok)
	w = do(closed, "GET", "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.EqualValues(t, 503, problem(t, w)["status"])
}

// countingRepo counts Releases on top of a Memory.
type countingRepo struct {
	*repository.Memory
	releases atomic.Int64
}

func (c *countingRepo) Release(ctx context.Context, key string, n int) error {
	c.releases.Add(1)
	return c.Memory.Release(ctx, key, n)
}

func TestConcurrencyReleasedOnceEvenOnPanic(t *testing.T) {
	repo := &countingRepo{Memory: repository.NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(1) })}
	defer repo.Close()
	rl := server.New(repo)
	panicky := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler bug") }))
	require.PanicsWithValue(t, "handler bug", func() { do(panicky, "GET", "/", "192.0.2.1:1") })
	assert.EqualValues(t, 1, repo.releases.Load())
	// The permit came back: the next request is admitted, and gives it back.
	assert.Equal(t, http.StatusOK, do(rl.Middleware(ok), "GET", "/", "192.0.2.1:1").Code)
	assert.EqualValues(t, 2, repo.releases.Load())

	// While one request is in flight, a second is refused.
	inside, leave := make(chan struct{}), make(chan struct{})
	slow := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(inside); <-leave }))
	var wg sync.WaitGroup
	wg.Go(func() { do(slow, "GET", "/", "192.0.2.1:1") })
	<-inside
	w := do(rl.Middleware(ok), "GET", "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	close(leave)
	wg.Wait()
	assert.Equal(t, http.StatusOK, do(rl.Middleware(ok), "GET", "/", "192.0.2.1:1").Code)
	// A refused request takes nothing, so gives nothing back.
	assert.EqualValues(t, 4, repo.releases.Load())
}

func TestOnRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(1)
		defer repo.Close()
		var got limiters.Decision
		h := server.New(repo, server.WithOnRejected(func(w http.ResponseWriter, _ *http.Request, d limiters.Decision) {
			got = d
			w.WriteHeader(http.StatusServiceUnavailable)
		})).Middleware(ok)
		do(h, "GET", "/", "192.0.2.1:1")
		w := do(h, "GET", "/", "192.0.2.1:1")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Equal(t, "3600", w.Header().Get("Retry-After")) // set before the callback
		assert.False(t, got.Allowed)
		assert.Equal(t, 1, got.Limit)
	})
}

func TestNearLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := windowRepo(5)
		defer repo.Close()
		rec := &recorder{}
		h := server.New(repo, server.WithObserver(rec.observe), server.WithNearLimit(0.8, "X-RateLimit-Near")).Middleware(ok)
		var near []string
		for range 5 {
			near = append(near, do(h, "GET", "/", "192.0.2.1:1").Header().Get("X-RateLimit-Near"))
		}
		// Used 1..5 of 5: 4/5 is the first at 80%.
		assert.Equal(t, []string{"", "", "", "true", "true"}, near)
		assert.Equal(t, 2, rec.count(server.EventNearLimit))
		assert.Equal(t, 5, rec.count(server.EventAllowed))
	})
}

func TestTryAllowAllowRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := repository.NewMemory(func(string) limiters.Limiter {
			return limiters.NewTokenBucket(limiters.PerSecond(1), 1)
		})
		defer repo.Close()
		rec := &recorder{}
		rl := server.New(repo, server.WithObserver(rec.observe))
		ctx := context.Background()
		d, err := rl.TryAllow(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		d, err = rl.TryAllow(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed)
		assert.Equal(t, time.Second, d.RetryAfter)

		start := time.Now()
		require.NoError(t, rl.Allow(ctx, "k", 1))
		assert.Equal(t, time.Second, time.Since(start))

		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		var re *limiters.RejectedError
		require.ErrorAs(t, rl.Allow(short, "k", 1), &re)
		rl.Release(ctx, "k", 1) // a rate limiter ignores it
		assert.Equal(t, []server.EventKind{server.EventAllowed, server.EventNearLimit, server.EventRejected}, rec.kinds())

		none := server.New(nil, server.WithPolicy(mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{
			"p": {Default: &server.Rule{Limits: []limiters.Spec{{Algorithm: "concurrency", Limit: 1}}}},
		}})))
		_, err = none.TryAllow(ctx, "k", 1)
		assert.ErrorIs(t, err, server.ErrNoRepository)
		assert.ErrorIs(t, none.Allow(ctx, "k", 1), server.ErrNoRepository)
	})
}

func TestNewPanicsWithoutRepository(t *testing.T) {
	assert.Panics(t, func() { server.New(nil) })
}

// TestLastPermitAdvertisesTheNextPermit: the response that takes the last
// permit of a token bucket advertises, as its reset, when the next permit
// comes (60 s at 1/min), not when the bucket is full again (300 s), so a
// client that waits for the reset loses no throughput.
func TestLastPermitAdvertisesTheNextPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := repository.NewMemory(func(string) limiters.Limiter {
			return limiters.NewTokenBucket(limiters.PerMinute(1), 5)
		})
		defer repo.Close()
		rl := server.New(repo, server.WithKey(keyextract.Global()), server.WithHeaders(headers.Both))
		h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		var last *httptest.ResponseRecorder
		for range 5 {
			last = httptest.NewRecorder()
			h.ServeHTTP(last, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Equal(t, http.StatusOK, last.Code)
		}
		assert.Equal(t, "0", last.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, "60", last.Header().Get("X-RateLimit-Reset"))
		assert.Equal(t, `"default";r=0;t=60`, last.Header().Get("RateLimit"))

		denied := httptest.NewRecorder()
		h.ServeHTTP(denied, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, http.StatusTooManyRequests, denied.Code)
		assert.Equal(t, "60", denied.Header().Get("Retry-After"))
	})
}

func TestProblemTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A Policy rule chooses its rejections' type.
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {
			Endpoints: map[string]server.Rule{
				"/busy":  {Limits: []limiters.Spec{fixed(1, time.Hour)}, Problem: "temporary-reduced-capacity"},
				"/abuse": {Limits: []limiters.Spec{fixed(1, time.Hour)}, Problem: "abnormal-usage-detected"},
				"/quota": {Limits: []limiters.Spec{fixed(1, time.Hour)}},
			},
		}}})
		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		for _, c := range []struct {
			path, typ string
			status    int
		}{
			{"/busy", server.ProblemTypeTemporaryReducedCapacity, http.StatusServiceUnavailable},
			{"/abuse", server.ProblemTypeAbnormalUsageDetected, http.StatusTooManyRequests},
			{"/quota", server.ProblemTypeQuotaExceeded, http.StatusTooManyRequests},
		} {
			require.Equal(t, http.StatusOK, do(h, "GET", c.path, "192.0.2.1:1").Code)
			w := do(h, "GET", c.path, "192.0.2.1:1")
			assert.Equal(t, c.status, w.Code, c.path)
			assert.NotEmpty(t, w.Header().Get("Retry-After"), c.path)
			pr := problem(t, w)
			assert.Equal(t, c.typ, pr["type"], c.path)
			assert.EqualValues(t, c.status, pr["status"], c.path)
			assert.Equal(t, []any{c.path + " 1/1h"}, pr["violated-policies"], c.path)
		}

		// WithProblemType decides per rejection, from its event.
		repo := windowRepo(1)
		defer repo.Close()
		flagged := func(ev server.Event) string {
			if ev.Key == "192.0.2.66" {
				return server.ProblemTypeAbnormalUsageDetected
			}
			return ""
		}
		h = server.New(repo, server.WithProblemType(flagged)).Middleware(ok)
		for _, c := range []struct{ remote, typ string }{
			{"192.0.2.66:1", server.ProblemTypeAbnormalUsageDetected},
			{"192.0.2.7:1", server.ProblemTypeQuotaExceeded},
		} {
			do(h, "GET", "/", c.remote)
			w := do(h, "GET", "/", c.remote)
			require.Equal(t, http.StatusTooManyRequests, w.Code)
			assert.Equal(t, c.typ, problem(t, w)["type"])
		}
	})
	_, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"p": {
		Default: &server.Rule{Limits: []limiters.Spec{fixed(1, time.Hour)}, Problem: "slow-down"},
	}}})
	assert.EqualError(t, err, `server: policy: plans.p.default.problem: unknown problem type "slow-down"; want quota-exceeded, temporary-reduced-capacity or abnormal-usage-detected`)
}

// TestNilIsRefusedAtConstruction: a nil option, extractor or policy panics
// at once naming it; the nil functions the options document as the
// default build a RateLimiter that works.
func TestNilIsRefusedAtConstruction(t *testing.T) {
	repo := repository.NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(1) })
	defer repo.Close()
	tests := []struct {
		want string
		f    func()
	}{
		{"server: New: option 1 of 1 is nil", func() { server.New(repo, nil) }},
		{"server: WithKey: nil extractor", func() { server.WithKey(nil) }},
		{"server: WithPolicy: nil policy", func() { server.WithPolicy(nil) }},
		{"server: WithClientIP: nil extractor", func() { server.WithClientIP(nil) }},
		{"server: NewPolicy: option 2 of 2 is nil", func() {
			server.NewPolicy(server.PolicyConfig{}, server.WithChargeAfter(), nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) { assert.PanicsWithValue(t, tt.want, tt.f) })
	}
	rl := server.New(repo, server.WithCost(nil), server.WithOnRejected(nil), server.WithProblemType(nil), server.WithObserver(nil))
	h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
}

// TestChainAdvertisedLimitByLimit: a repository whose limiter is a Chain
// (a token bucket's burst under a per-second window) advertises each of
// its limits on its own — one IETF item each, the legacy fields from the
// one that binds — and a refusal names the limit that refused. Its one
// Decision mixed them: the bucket's refilling count under the window's
// reset, read by a client as a bucket that refills, which sent into the
// spent window (8 refusals in 100 requests at one phase, issue 18).
func TestChainAdvertisedLimitByLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) // at a second's start
		repo := repository.NewMemory(func(string) limiters.Limiter {
			return limiters.Chain(limiters.NewGCRA(limiters.Rate{N: 20, Per: time.Second}, 10), limiters.NewFixedWindow(10, time.Second))
		})
		defer repo.Close()
		rl := server.New(repo, server.WithKey(keyextract.Global()), server.WithHeaders(headers.Both))
		h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		get := func() *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			return w
		}
		first := get()
		require.Equal(t, http.StatusOK, first.Code)
		assert.Equal(t, `"gcra";q=10, "fixed_window";q=10`, first.Header().Get("RateLimit-Policy"))
		assert.Equal(t, `"gcra";r=9;t=1, "fixed_window";r=9;t=1`, first.Header().Get("RateLimit"))
		for range 8 {
			require.Equal(t, http.StatusOK, get().Code)
		}
		last := get()
		require.Equal(t, http.StatusOK, last.Code)
		assert.Equal(t, "0", last.Header().Get("X-RateLimit-Remaining"))

		// Half a second on: the bucket has 10 again, the window none.
		time.Sleep(500 * time.Millisecond)
		denied := get()
		require.Equal(t, http.StatusTooManyRequests, denied.Code)
		assert.Equal(t, `"gcra";r=10, "fixed_window";r=0;t=1`, denied.Header().Get("RateLimit"), "a full bucket says no t")
		assert.Equal(t, "1", denied.Header().Get("Retry-After"), "the window's")
		assert.Equal(t, "500", denied.Header().Get("Retry-After-Ms"))
		assert.Equal(t, "0", denied.Header().Get("X-RateLimit-Remaining"), "the legacy fields are the window's, which refused")

		// A single limiter is advertised as before.
		single := repository.NewMemory(func(string) limiters.Limiter { return limiters.NewFixedWindow(10, time.Second) })
		defer single.Close()
		w := httptest.NewRecorder()
		server.New(single, server.WithKey(keyextract.Global())).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, `"default";q=10`, w.Header().Get("RateLimit-Policy"))
	})
}
