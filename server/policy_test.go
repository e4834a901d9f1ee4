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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

func mustPolicy(t *testing.T, cfg server.PolicyConfig, opts ...server.PolicyOption) *server.Policy {
	t.Helper()
	p, err := server.NewPolicy(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func fixed(limit int, window time.Duration) limiters.Spec {
	return limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: limit, Window: window}
}

// planHeader resolves the plan from X-Plan.
func planHeader(r keyextract.Request) string { return r.Header("X-Plan") }

// admitted counts 200s among n requests.
func admitted(h http.Handler, n int, method, target, remote string, hdr ...string) int {
	c := 0
	for range n {
		if do(h, method, target, remote, hdr...).Code == http.StatusOK {
			c++
		}
	}
	return c
}

func TestPolicyPlansAndEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{
			DefaultPlan: "free",
			Plans: map[string]server.Plan{
				"free": {
					Endpoints: map[string]server.Rule{
						"POST /api/ask":       {Limits: []limiters.Spec{fixed(2, time.Hour)}},
						"GET /items/{id}":     {Limits: []limiters.Spec{fixed(3, time.Hour)}},
						"GET /items/featured": {Limits: []limiters.Spec{fixed(1, time.Hour)}},
					},
					Default: &server.Rule{Limits: []limiters.Spec{fixed(4, time.Hour)}},
				},
				"pro": {
					Endpoints: map[string]server.Rule{
						"POST /api/ask": {Limits: []limiters.Spec{fixed(20, time.Hour)}},
					},
				},
			},
		}, server.WithPlan(planHeader))
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe)).Middleware(ok)
		a := "192.0.2.1:1"
		assert.Equal(t, 2, admitted(h, 5, "POST", "/api/ask", a))
		assert.Equal(t, 20, admitted(h, 25, "POST", "/api/ask", a, "X-Plan", "pro"))
		// Unknown plans get the default plan, whose ask budget is spent.
		assert.Equal(t, 0, admitted(h, 1, "POST", "/api/ask", a, "X-Plan", "platinum"))
		// {id} matches any item, sharing one budget per caller...
		assert.Equal(t, 3, admitted(h, 2, "GET", "/items/1", a)+admitted(h, 3, "GET", "/items/2", a))
		// ...but the more specific pattern wins for /items/featured.
		assert.Equal(t, 1, admitted(h, 3, "GET", "/items/featured", a))
		// GET /api/ask matches no endpoint (the pattern says POST): default.
		assert.Equal(t, 4, admitted(h, 3, "GET", "/api/ask", a)+admitted(h, 3, "DELETE", "/other", a))
		// Pro has no default rule: unmatched endpoints are not limited.
		w := do(h, "GET", "/other", a, "X-Plan", "pro")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
		// Another caller has its own budgets.
		assert.Equal(t, 2, admitted(h, 3, "POST", "/api/ask", "192.0.2.2:1"))

		var last server.Event
		for _, e := range rec.events {
			if e.Kind == server.EventRejected {
				last = e
			}
		}
		assert.Equal(t, "free", last.Plan)
		assert.Equal(t, "POST /api/ask", last.Endpoint)
		assert.Equal(t, "192.0.2.2", last.Key)
		assert.Equal(t, "requests", last.Limit)
	})
}

func TestPolicySeveralLimitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{Limits: []limiters.Spec{
				fixed(10, time.Minute),
				fixed(25, 24*time.Hour),
				{Algorithm: limiters.AlgConcurrency, Limit: 5},
			}},
		}}})
		var mu sync.Mutex
		gate := make(chan struct{})
		var inside int
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				mu.Lock()
				inside++
				mu.Unlock()
				<-gate
			}
		})
		h := server.New(nil, server.WithPolicy(p)).Middleware(slow)
		a := "192.0.2.1:1"

		// 5 in flight: the 6th is refused, and taking its in-flight permit
		// back leaves the others free.
		var wg sync.WaitGroup
		codes := make(chan int, 5)
		for range 5 {
			wg.Go(func() { codes <- do(h, "GET", "/slow", a).Code })
		}
		synctest.Wait()
		assert.Equal(t, 5, inside)
		w := do(h, "GET", "/fast", a)
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Contains(t, problem(t, w)["detail"], "limit of 5 exceeded")
		close(gate)
		wg.Wait()
		close(codes)
		for c := range codes {
			assert.Equal(t, http.StatusOK, c)
		}
		// 10 per minute: 5 used by the slow ones; the refused one took
		// nothing from any limit (the rule's limits are all or nothing).
		assert.Equal(t, 5, admitted(h, 7, "GET", "/fast", a))
		time.Sleep(time.Minute)
		assert.Equal(t, 10, admitted(h, 12, "GET", "/fast", a))
		time.Sleep(time.Minute)
		// 25 per day: 20 used so far.
		assert.Equal(t, 5, admitted(h, 10, "GET", "/fast", a))
		w = do(h, "GET", "/fast", a)
		// The legacy triple is the day's limit, the one exhausted; each
		// limit is its own IETF item.
		assert.Equal(t, "25", w.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, []any{"default 25/1d"}, problem(t, w)["violated-policies"])
		info := headers.Parse(w.Header(), time.Now())
		byName := map[string]headers.Quota{}
		for _, q := range info.Quotas {
			byName[q.Name] = q
		}
		assert.EqualValues(t, 10, byName["default 10/1m"].Limit)
		assert.EqualValues(t, 5, byName["default 10/1m"].Remaining)
		assert.EqualValues(t, 25, byName["default 25/1d"].Limit)
		assert.EqualValues(t, 0, byName["default 25/1d"].Remaining)
		assert.Equal(t, 24*time.Hour, byName["default 25/1d"].Window)
		assert.EqualValues(t, 5, byName["default 5 in flight"].Limit)
		assert.Equal(t, "concurrent-requests", byName["default 5 in flight"].Unit)
	})
}

func TestPolicyCostCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Endpoints: map[string]server.Rule{"POST /api/ask": {
				Limits:   []limiters.Spec{fixed(100, time.Hour)},
				CostCaps: []limiters.Spec{fixed(1000, time.Hour), fixed(1500, 24*time.Hour)},
			}},
		}}}, server.WithCapCost(func(r keyextract.Request) int {
			n, _ := strconv.Atoi(r.Header("X-Tokens"))
			return n
		}))
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe)).Middleware(ok)
		a := "192.0.2.1:1"
		ask := func(tokens int) *httpResponse {
			w := do(h, "POST", "/api/ask", a, "X-Tokens", strconv.Itoa(tokens))
			return &httpResponse{w.Code, w}
		}
		assert.Equal(t, 200, ask(600).code)
		assert.Equal(t, 200, ask(300).code)
		r := ask(200) // 1100 > 1000 this hour
		require.Equal(t, 429, r.code)
		body := problem(t, r.w)
		assert.Contains(t, body["detail"], "cost cap of 1000 exceeded by a request costing 200")
		assert.EqualValues(t, 3600, body["retry_after"])
		assert.Equal(t, 200, ask(100).code) // exactly 1000
		// A request costing more than a cap could ever allow: 429, clear.
		r = ask(5000)
		require.Equal(t, 429, r.code)
		assert.Contains(t, problem(t, r.w)["detail"], "costs 5000, more than the cost limit of 1000")

		time.Sleep(time.Hour)
		r = ask(500)
		assert.Equal(t, 200, r.code, "%s %v", r.w.Body.String(), r.w.Header()) // 1500 today
		r = ask(1)
		require.Equal(t, 429, r.code)
		ev := rec.last()
		assert.Equal(t, "cost", ev.Limit)
		assert.Equal(t, 1, ev.Cost)
		// Request counts are separate: 7 requests so far, well under 100.
		assert.Equal(t, 200, do(h, "POST", "/api/ask", a, "X-Tokens", "0").Code)
	})
}

type httpResponse struct {
	code int
	w    *httptest.ResponseRecorder
}

func TestPolicyAllowAndBlockLists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{
			Plans: map[string]server.Plan{"only": {Default: &server.Rule{Limits: []limiters.Spec{fixed(1, time.Hour)}}}},
			Allow: []string{"10.0.0.0/8", "2001:db8::/48"},
			Block: []string{"203.0.113.7", "10.6.6.0/24"},
		})
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe)).Middleware(ok)
		assert.Equal(t, 5, admitted(h, 5, "GET", "/", "10.1.2.3:1"))
		assert.Equal(t, 5, admitted(h, 5, "GET", "/", "[2001:db8:0:1::5]:1"))
		assert.Equal(t, 1, admitted(h, 5, "GET", "/", "[2001:db9::5]:1"))
		w := do(h, "GET", "/", "203.0.113.7:1")
		assert.Equal(t, http.StatusForbidden, w.Code)
		assert.EqualValues(t, 403, problem(t, w)["status"])
		// Block wins over allow.
		assert.Equal(t, http.StatusForbidden, do(h, "GET", "/", "10.6.6.6:1").Code)
		// Lists use the client address, through trusted proxies only.
		assert.Equal(t, 1, admitted(h, 3, "GET", "/", "192.0.2.1:1", "X-Forwarded-For", "10.0.0.1"))
		assert.Equal(t, 10, rec.count(server.EventBypassed))
		assert.Equal(t, 2, rec.count(server.EventForbidden))

		trusting := mustPolicy(t, server.PolicyConfig{
			Plans: map[string]server.Plan{"only": {Default: &server.Rule{Limits: []limiters.Spec{fixed(1, time.Hour)}}}},
			Block: []string{"198.51.100.0/24"},
		}, server.WithClientIP(keyextract.IP(netipPrefix("192.0.2.0/24"))))
		h = server.New(nil, server.WithPolicy(trusting)).Middleware(ok)
		assert.Equal(t, http.StatusForbidden, do(h, "GET", "/", "192.0.2.1:1", "X-Forwarded-For", "198.51.100.9").Code)
	})
}

func TestPolicyDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{
				Limits:   []limiters.Spec{{Algorithm: limiters.AlgTokenBucket, Rate: limiters.PerSecond(1), Limit: 1}},
				Action:   server.Delay,
				MaxDelay: 2500 * time.Millisecond,
			},
		}}})
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe)).Middleware(ok)
		a := "192.0.2.1:1"
		start := time.Now()
		var wg sync.WaitGroup
		got := make([]time.Duration, 4)
		codes := make([]int, 4)
		for i := range 4 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond) // arrive in order
				codes[i] = do(h, "GET", "/", a).Code
				got[i] = time.Since(start).Round(time.Millisecond)
			})
		}
		wg.Wait()
		// One at once, two slowed down to the rate, the fourth would wait
		// 3s > 2.5s: refused at once.
		assert.Equal(t, []int{200, 200, 200, 429}, codes)
		assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Millisecond}, got)
		assert.Equal(t, 2, rec.count(server.EventDelayed))
		assert.Equal(t, 1, rec.count(server.EventRejected))
	})
}

func TestPolicyDelayInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{
				Limits:   []limiters.Spec{{Algorithm: limiters.AlgConcurrency, Limit: 1}},
				Action:   server.Delay,
				MaxDelay: time.Second,
			},
		}}})
		h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			time.Sleep(600 * time.Millisecond)
		}))
		start := time.Now()
		var wg sync.WaitGroup
		codes := make([]int, 3)
		ends := make([]time.Duration, 3)
		for i := range 3 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				codes[i] = do(h, "GET", "/", "192.0.2.1:1").Code
				ends[i] = time.Since(start)
			})
		}
		wg.Wait()
		// The second waits for the first's permit; the third cannot get one
		// within its second.
		assert.Equal(t, []int{200, 200, 429}, codes)
		assert.Equal(t, []time.Duration{600 * time.Millisecond, 1200 * time.Millisecond, 1002 * time.Millisecond}, ends)
	})
}

func TestPolicyShadow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{Limits: []limiters.Spec{fixed(2, time.Hour), {Algorithm: limiters.AlgConcurrency, Limit: 1}}, Action: server.Shadow},
		}}})
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe)).Middleware(ok)
		for range 4 {
			w := do(h, "GET", "/", "192.0.2.1:1")
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
			assert.Empty(t, w.Header().Get("Retry-After"))
		}
		assert.Equal(t, []server.EventKind{server.EventAllowed, server.EventAllowed, server.EventShadowRejected, server.EventShadowRejected}, rec.kinds())
	})
}

func TestPolicyNearLimitHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{Limits: []limiters.Spec{fixed(10, time.Hour)}, CostCaps: []limiters.Spec{fixed(100, time.Hour)}},
		}}}, server.WithCapCost(func(r keyextract.Request) int { n, _ := strconv.Atoi(r.Header("X-Tokens")); return n }))
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe), server.WithNearLimit(0.5, "X-Near-Limit")).Middleware(ok)
		assert.Empty(t, do(h, "GET", "/", "192.0.2.1:1", "X-Tokens", "10").Header().Get("X-Near-Limit"))
		// Half the cost cap: near.
		assert.Equal(t, "true", do(h, "GET", "/", "192.0.2.1:1", "X-Tokens", "40").Header().Get("X-Near-Limit"))
		ev := rec.last()
		assert.Equal(t, server.EventNearLimit, ev.Kind)
		assert.Equal(t, "cost", ev.Limit)
	})
}

func TestPolicyFailOpen(t *testing.T) {
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"only": {
		Default: &server.Rule{Limits: []limiters.Spec{fixed(1, time.Hour)}},
	}}})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	assert.Equal(t, http.StatusOK, do(server.New(nil, server.WithPolicy(p)).Middleware(ok), "GET", "/", "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusServiceUnavailable, do(server.New(nil, server.WithPolicy(p), server.WithFailOpen(false)).Middleware(ok), "GET", "/", "192.0.2.1:1").Code)
}

func TestPolicyMaxKeys(t *testing.T) {
	p := mustPolicy(t, server.PolicyConfig{
		MaxKeys: 50,
		Plans:   map[string]server.Plan{"only": {Default: &server.Rule{Limits: []limiters.Spec{fixed(1, time.Hour)}}}},
	})
	h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
	for i := range 500 {
		do(h, "GET", "/", "198.51.100."+strconv.Itoa(i%250)+":1", "X-I", strconv.Itoa(i))
		require.LessOrEqual(t, p.Len(), 50)
	}
}

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestPolicyDelayRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{
				Limits:   []limiters.Spec{{Algorithm: limiters.AlgTokenBucket, Rate: limiters.PerSecond(1), Limit: 1, QueueLimit: 2}},
				CostCaps: []limiters.Spec{fixed(100, time.Hour)},
				Action:   server.Delay,
				MaxDelay: time.Hour,
			},
		}}}, server.WithCapCost(func(r keyextract.Request) int { n, _ := strconv.Atoi(r.Header("X-Tokens")); return n }))
		rec := &recorder{}
		h := server.New(nil, server.WithPolicy(p), server.WithObserver(rec.observe)).Middleware(ok)
		a := "192.0.2.1:1"
		// A cost over the cap is refused at once, however long the bound.
		w := do(h, "GET", "/", a, "X-Tokens", "101")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Contains(t, problem(t, w)["detail"], "costs 101, more than the cost limit of 100")

		// That request took its request permit before the cost cap refused
		// it: the next two wait in the queue (of 2), a third finds it full.
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range 2 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				codes[i] = do(h, "GET", "/", a, "X-Tokens", "1").Code
			})
		}
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		w = do(h, "GET", "/", a, "X-Tokens", "1")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.ErrorIs(t, rec.last().Err, limiters.ErrQueueFull)
		wg.Wait()
		assert.Equal(t, []int{200, 200}, codes)
	})
}

func TestEventKindString(t *testing.T) {
	assert.Equal(t, "shadow_rejected", server.EventShadowRejected.String())
	assert.Equal(t, "error", server.EventError.String())
	assert.Equal(t, "unknown", server.EventKind(200).String())
}

// specRepo is a storage of the shape WithStorage wants, as a Redis one
// would be: one repository per set of specs, counting its calls.
type specRepo struct {
	*repository.Memory
	specs           []limiters.Spec
	tries, releases atomic.Int64
}

func (s *specRepo) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	s.tries.Add(1)
	return s.Memory.TryAcquire(ctx, key, n)
}

func (s *specRepo) Release(ctx context.Context, key string, n int) error {
	s.releases.Add(1)
	return s.Memory.Release(ctx, key, n)
}

// specStorage is a WithStorage function that records what it made.
type specStorage struct {
	mu   sync.Mutex
	made []*specRepo
}

func (st *specStorage) make(specs []limiters.Spec) (repository.Repository, error) {
	r := &specRepo{specs: specs, Memory: repository.NewMemory(func(string) limiters.Limiter {
		ls := make([]limiters.Limiter, len(specs))
		for i, s := range specs {
			ls[i], _ = s.New()
		}
		return limiters.Chain(ls...)
	})}
	st.mu.Lock()
	st.made = append(st.made, r)
	st.mu.Unlock()
	return r, nil
}

func TestPolicyStorage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conc := limiters.Spec{Algorithm: limiters.AlgConcurrency, Limit: 2}
		caps := []limiters.Spec{fixed(10, time.Hour)}
		st := &specStorage{}
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {
			Endpoints: map[string]server.Rule{
				"/ask":   {Limits: []limiters.Spec{fixed(3, time.Hour), conc}, CostCaps: caps},
				"/items": {Limits: []limiters.Spec{fixed(2, time.Hour)}},
			},
		}}}, server.WithStorage(st.make))
		// Called once per set of limits, in sorted order, with its specs.
		require.Len(t, st.made, 3)
		ask, askCaps, items := st.made[0], st.made[1], st.made[2]
		assert.Equal(t, []limiters.Spec{fixed(3, time.Hour), conc}, ask.specs)
		assert.Equal(t, caps, askCaps.specs)
		assert.Equal(t, []limiters.Spec{fixed(2, time.Hour)}, items.specs)

		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		a := "192.0.2.1:1"
		assert.Equal(t, 3, admitted(h, 4, "GET", "/ask", a))
		assert.Equal(t, 2, admitted(h, 3, "GET", "/items", a))
		// Every limit of a rule in one call per request.
		assert.EqualValues(t, 4, ask.tries.Load())
		assert.EqualValues(t, 3, askCaps.tries.Load(), "the refused request never reached the caps")
		assert.EqualValues(t, 3, items.tries.Load())
		// Only the limits that hold permits (the concurrency limit of /ask)
		// are given back, once per admitted request.
		assert.EqualValues(t, 3, ask.releases.Load())
		assert.Zero(t, askCaps.releases.Load())
		assert.Zero(t, items.releases.Load())

		p.Close()
		for _, r := range st.made {
			_, err := r.Memory.TryAcquire(context.Background(), "k", 1)
			assert.ErrorIs(t, err, limiters.ErrClosed, "the policy closes what the storage made")
		}
	})
}

// permitRepo says whether it holds permits.
type permitRepo struct {
	specRepo
	holds bool
}

func (p *permitRepo) HoldsPermits() bool { return p.holds }

func TestMiddlewareReleasesOnlyWhatIsHeld(t *testing.T) {
	for _, holds := range []bool{false, true} {
		repo := &permitRepo{holds: holds, specRepo: specRepo{Memory: windowRepo(5)}}
		h := server.New(repo).Middleware(ok)
		assert.Equal(t, 5, admitted(h, 6, "GET", "/", "192.0.2.1:1"))
		if holds {
			assert.EqualValues(t, 5, repo.releases.Load())
		} else {
			assert.Zero(t, repo.releases.Load())
		}
		repo.Close()
	}
	// A repository that does not say is released (harmless for a rate
	// limiter; vital for a semaphore).
	repo := &specRepo{Memory: windowRepo(5)}
	defer repo.Close()
	assert.Equal(t, 1, admitted(server.New(repo).Middleware(ok), 1, "GET", "/", "192.0.2.1:1"))
	assert.EqualValues(t, 1, repo.releases.Load())
}

func TestChargeCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {
			Default: &server.Rule{
				Limits:   []limiters.Spec{fixed(100, time.Hour)},
				CostCaps: []limiters.Spec{fixed(100, time.Hour)},
			},
		}}}, server.WithChargeAfter(), server.WithCapCost(func(keyextract.Request) int { return 1 }))
		// Each request is charged 1 when admitted (an estimate), and the
		// rest (say, tokens) once its handler has run.
		var got []limiters.Decision
		h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := server.ChargeCost(r.Context(), 60)
			require.NoError(t, err)
			got = append(got, d)
		}))
		a := "192.0.2.1:1"
		require.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
		require.Len(t, got, 1)
		assert.True(t, got[0].Allowed)
		assert.Equal(t, 39, got[0].Remaining)
		// 38 left after the next admission: its charge of 60 takes those 38
		// and says so.
		require.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
		require.Len(t, got, 2)
		assert.False(t, got[1].Allowed)
		assert.Equal(t, 0, got[1].Remaining)
		// The caps are spent: the caller is refused until they refill...
		w := do(h, "GET", "/", a)
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Len(t, got, 2)
		// ...while another caller is not.
		assert.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.2:1").Code)
		time.Sleep(time.Hour)
		assert.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
	})
}

func TestChargeCostNeedsCostCaps(t *testing.T) {
	rules := map[string]server.Rule{
		"/caps":   {CostCaps: []limiters.Spec{fixed(100, time.Hour)}},
		"/nocaps": {Limits: []limiters.Spec{fixed(100, time.Hour)}},
	}
	_, err := server.ChargeCost(context.Background(), 1)
	assert.ErrorIs(t, err, server.ErrNoCostCaps)
	for _, after := range []bool{false, true} {
		var opts []server.PolicyOption
		if after {
			opts = append(opts, server.WithChargeAfter())
		}
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {Endpoints: rules}}}, opts...)
		var errs []error
		h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := server.ChargeCost(r.Context(), 1)
			errs = append(errs, err)
		}))
		do(h, "GET", "/caps", "192.0.2.1:1")
		do(h, "GET", "/nocaps", "192.0.2.1:1")
		require.Len(t, errs, 2)
		assert.Equal(t, after, errs[0] == nil, "with caps, WithChargeAfter %v: %v", after, errs[0])
		assert.True(t, errors.Is(errs[1], server.ErrNoCostCaps))
	}
}
