package throttle

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzGateLearns feeds a partition's gate answers with arbitrary statuses
// and rate-limit fields (GitHub's, OpenAI's, Anthropic's, IETF, bucket
// names, Retry-After) and costs, in arbitrary order, and checks that it
// never panics, never pauses past WithMaxPause, and lets a request through
// again once every answer is in and the longest pause is over.
func FuzzGateLearns(f *testing.F) {
	f.Add(429, "1", "0", "60", "100", "tokens", int64(50), "9m0s", "core", uint8(3))
	f.Add(200, "", "5", "1893456000", "10", "requests", int64(1), "1s", "", uint8(1))
	f.Add(529, "x", "-1", "", "0", "input-tokens", int64(0), "", "search", uint8(7))
	f.Add(503, "99999999999", "0", "2026-01-01T00:00:00Z", "1", "graphql", int64(1<<40), "6m0s", "", uint8(2))
	f.Fuzz(func(t *testing.T, status int, retryAfter, remaining, reset, limit, quota string, units int64, openaiReset, resource string, steps uint8) {
		if status < 100 || status > 999 {
			return
		}
		const maxPause = time.Minute
		g := &gate{key: "api.test", maxPause: maxPause}
		ctx := WithCost(context.Background(), quota, units)
		c := costsOf(ctx)
		if c.check() != nil {
			return // RoundTrip refuses it before the gate
		}
		h := http.Header{}
		set := func(k, v string) {
			if v != "" {
				h[k] = []string{v}
			}
		}
		set("Retry-After", retryAfter)
		set("X-Ratelimit-Remaining", remaining)
		set("X-Ratelimit-Reset", reset)
		set("X-Ratelimit-Limit", limit)
		set("X-Ratelimit-Resource", resource)
		set("X-Ratelimit-Limit-Tokens", limit)
		set("X-Ratelimit-Remaining-Tokens", remaining)
		set("X-Ratelimit-Reset-Tokens", openaiReset)
		set("Ratelimit-Policy", `"p";q=`+limit+`;w=60;qu="concurrent-requests"`)
		now := time.Unix(1_800_000_000, 0)
		var tks []ticket
		for i := range int(steps%8) + 1 {
			if g.quiet() {
				var none [maxQuotas]int64
				tks = append(tks, ticket{})
				g.sent(now, c, &none, &tks[len(tks)-1])
			} else {
				g.advance(now)
				var ch [maxQuotas]int64
				if ok, _, err := g.check(now, c, &ch, time.Time{}); err == nil && ok {
					tks = append(tks, ticket{})
					g.sent(now, c, &ch, &tks[len(tks)-1])
				}
				g.due(now, 0)
			}
			if len(tks) > 0 && i%2 == 0 {
				var a answer
				a.read(&http.Response{StatusCode: status, Header: h, Body: http.NoBody}, nil, now)
				until := g.learn(&tks[0], &a, now)
				g.settle(&tks[0])
				tks = tks[1:]
				if !until.IsZero() && until.Sub(now) > maxPause {
					t.Fatalf("paused %v > max %v", until.Sub(now), maxPause)
				}
			}
			now = now.Add(time.Duration(i) * 100 * time.Millisecond)
			h.Set("X-Ratelimit-Remaining", strconv.Itoa(i))
		}
		for _, tk := range tks {
			g.settle(&tk)
		}
		if g.inflight != 0 {
			t.Fatalf("inflight %d after every answer", g.inflight)
		}
		later := now.Add(2 * maxPause)
		g.advance(later)
		var ch [maxQuotas]int64
		if ok, wake, err := g.check(later, c, &ch, time.Time{}); err == nil && !ok {
			t.Fatalf("still held after every answer and the longest pause (until %v)", wake.Sub(later))
		}
	})
}

// FuzzDiscordRetryAfter: any body reads as no wait or as a wait between
// zero and a day, without panicking.
func FuzzDiscordRetryAfter(f *testing.F) {
	f.Add([]byte(`{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}`))
	f.Add([]byte(`{"retry_after": 1e308}`))
	f.Add([]byte(`{"retry_after": -0}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, ok := discordRetryAfter(body)
		if !ok && d != 0 || d < 0 || d > maxRetryAfterSeconds*time.Second {
			t.Fatalf("discordRetryAfter(%q) = %v, %v", body, d, ok)
		}
	})
}

// FuzzRouteOf: any path reads as a route whose parts are pieces of it,
// without panicking or allocating.
func FuzzRouteOf(f *testing.F) {
	f.Add("/api/v10/channels/1234/messages/5")
	f.Add("/api/v")
	f.Add("/v1/")
	f.Add("//api//v2//x")
	f.Fuzz(func(t *testing.T, path string) {
		req := &http.Request{Method: "GET", URL: &url.URL{Path: path}}
		r := routeOf(req)
		if !strings.Contains(path, r.first) || !strings.Contains(path, r.second) {
			t.Fatalf("routeOf(%q) = %q", path, r)
		}
		if r.family().method != "GET" {
			t.Fatalf("family of %q: %q", path, r.family())
		}
		if n := testing.AllocsPerRun(1, func() { routeOf(req) }); n != 0 {
			t.Fatalf("routeOf(%q) allocates", path)
		}
	})
}
