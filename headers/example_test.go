package headers_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

func ExampleParse() {
	// A response from GitHub's REST API that used up the hourly quota.
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Used", "5000")
	h.Set("X-RateLimit-Reset", "1704211200")
	h.Set("X-RateLimit-Resource", "core")

	now := time.Date(2024, 1, 2, 15, 0, 0, 0, time.UTC)
	info := headers.Parse(h, now)
	for _, q := range info.Quotas {
		fmt.Printf("%s: %d of %d left, resets at %s\n",
			q.Name, q.Remaining, q.Limit, q.Reset.Format(time.RFC3339))
	}
	fmt.Println("wait:", info.Delay(now))
	// Output:
	// core: 0 of 5000 left, resets at 2024-01-02T16:00:00Z
	// wait: 1h0m0s
}

func ExampleWrite() {
	d := limiters.Decision{
		Allowed:    false,
		Limit:      100,
		Remaining:  0,
		ResetAfter: time.Minute,
		RetryAfter: 1200 * time.Millisecond,
	}
	h := http.Header{}
	headers.Write(h, d, headers.Both)
	for _, k := range []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining",
		"X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"} {
		fmt.Printf("%s: %s\n", k, h.Get(k))
	}
	// Output:
	// Retry-After: 2
	// X-RateLimit-Limit: 100
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 2
	// RateLimit-Policy: "default";q=100
	// RateLimit: "default";r=0;t=2
}

func ExampleInfo_Delay() {
	// OpenAI reports two quotas; the exhausted one decides the wait.
	h := http.Header{}
	h.Set("x-ratelimit-remaining-requests", "0")
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-tokens", "6m0s")

	now := time.Date(2024, 1, 2, 15, 0, 0, 0, time.UTC)
	fmt.Println(headers.Parse(h, now).Delay(now))
	// Output: 1s
}
