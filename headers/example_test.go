package headers_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
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

func ExampleClassify() {
	// GitHub's secondary rate limit: a 403 whose body says so, without
	// Retry-After.
	body := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
	resp := &http.Response{
		StatusCode:    http.StatusForbidden,
		Header:        http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: -1,
	}
	c := headers.Classify(resp.StatusCode, resp.Header, headers.PeekBody(resp))
	fmt.Println(c.Signal, c.Code, "final:", c.Signal.Final(), "wait at least:", c.MinWait)

	// The caller still reads the whole body.
	all, _ := io.ReadAll(resp.Body)
	fmt.Println(len(all) == len(body))
	_ = resp.Body.Close()

	// OpenAI's billing limit: retrying cannot help.
	c = headers.Classify(http.StatusTooManyRequests, http.Header{"X-Should-Retry": {"false"}},
		[]byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	fmt.Println(c.Signal, c.Code, "final:", c.Signal.Final(), "should retry:", c.ShouldRetry == headers.RetryYes)
	// Output:
	// rate limited secondary_rate_limit final: false wait at least: 1m0s
	// true
	// quota exhausted insufficient_quota final: true should retry: false
}

func ExampleParse_dialects() {
	now := time.Date(2024, 1, 2, 15, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Sforce-Limit-Info", "api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)")
	h.Set("X-HubSpot-RateLimit-Max", "190")
	h.Set("X-HubSpot-RateLimit-Remaining", "189")
	h.Set("X-HubSpot-RateLimit-Interval-Milliseconds", "10000")
	h.Set("RateLimit-Policy", `"peruser";q=100;w=60;qu="concurrent-requests"`)
	for _, q := range headers.Parse(h, now).Quotas {
		fmt.Printf("%s: %d %s per %v, %d left", q.Name, q.Limit, q.Unit, q.Window, q.Remaining)
		if q.Partition != "" {
			fmt.Printf(", for %s", q.Partition)
		}
		fmt.Println()
	}
	// Output:
	// peruser: 100 concurrent-requests per 1m0s, -1 left
	// interval: 190 requests per 10s, 189 left
	// api-usage: 5000 requests per 24h0m0s, 4975 left
	// per-app-api-usage: 250 requests per 0s, 233 left, for sample-connected-app
}
