package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

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
