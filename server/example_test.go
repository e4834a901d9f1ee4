package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// Per-IP limits: every client address gets a token bucket of 2 requests,
// refilled at 2 a minute.
func Example() {
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewTokenBucket(limiters.PerMinute(2), 2)
	}, repository.WithMaxKeys(100_000))
	defer repo.Close()

	rl := server.New(repo) // keyed by the peer's IP; X-Forwarded-For is not trusted
	h := rl.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:4321"
		r.Header.Set("X-Forwarded-For", "198.51.100.7") // forged: ignored
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, "remaining:", w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Content-Type"))
	}
	// Output:
	// 200 remaining: 1 text/plain; charset=utf-8
	// 200 remaining: 0 text/plain; charset=utf-8
	// 429 remaining: 0 application/problem+json
}

// A policy with plans: the plan comes from the API key, each plan limits
// endpoints by ServeMux pattern, and a pro caller gets more.
func ExamplePolicy() {
	p, err := server.ParsePolicy([]byte(`
default_plan: free
plans:
  free:
    default:
      limits: [{algorithm: gcra, rate: 60/m, limit: 5}]
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: sliding_log, limit: 1, window: 1m}
          - {algorithm: concurrency, limit: 1}
  pro:
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: sliding_log, limit: 3, window: 1m}
`), "yaml", server.WithPlan(func(r keyextract.Request) string {
		if r.Header("X-API-Key") == "key-of-a-pro" {
			return "pro"
		}
		return "" // the default plan
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	rl := server.New(nil, server.WithPolicy(p), server.WithKey(keyextract.Header("X-API-Key")))
	h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	for _, key := range []string{"key-of-a-free", "key-of-a-pro"} {
		fmt.Print(key, ":")
		for range 4 {
			r := httptest.NewRequest("POST", "/api/ask", nil)
			r.Header.Set("X-API-Key", key)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			fmt.Print(" ", w.Code)
		}
		fmt.Println()
	}
	// Output:
	// key-of-a-free: 200 429 429 429
	// key-of-a-pro: 200 200 200 429
}

// A policy's limits can live anywhere: WithStorage is given each rule's
// specs and returns the one repository that decides them, all or nothing,
// per caller. Here it is memory, counting what it was asked for; a store
// shared by a fleet of servers fits the same function.
func ExampleWithStorage() {
	storage := func(specs []limiters.Spec) (repository.Repository, error) {
		fmt.Println("a repository for", len(specs), "limits")
		return repository.NewMemory(func(string) limiters.Limiter {
			ls := make([]limiters.Limiter, len(specs))
			for i, s := range specs {
				ls[i], _ = s.New() // NewPolicy validated them
			}
			return limiters.Chain(ls...)
		}), nil
	}
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"free": {
		Default: &server.Rule{Limits: []limiters.Spec{
			{Algorithm: limiters.AlgFixedWindow, Limit: 2, Window: time.Hour},
			{Algorithm: limiters.AlgConcurrency, Limit: 1},
		}},
	}}}, server.WithStorage(storage))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code)
	}
	// Output:
	// a repository for 2 limits
	// 200
	// 200
	// 429
}

// An LLM proxy knows what a completion cost only once it has returned: the
// handler charges it to the rule's cost caps then, and the caller is
// refused once they are spent.
func ExampleChargeCost() {
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"free": {
		Default: &server.Rule{CostCaps: []limiters.Spec{
			{Algorithm: limiters.AlgFixedWindow, Limit: 1000, Window: time.Hour}, // tokens per hour
		}},
	}}}, server.WithChargeAfter())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		tokens := 400 // as the completion reports them
		d, err := server.ChargeCost(r.Context(), tokens)
		fmt.Println("charged:", d.Allowed, "left:", d.Remaining, err)
	}))
	for range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat", nil))
		fmt.Println(w.Code)
	}
	// Output:
	// charged: true left: 599 <nil>
	// 200
	// charged: true left: 198 <nil>
	// 200
	// charged: false left: 0 <nil>
	// 200
	// 429
}
