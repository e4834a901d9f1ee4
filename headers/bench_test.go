package headers

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// fixture is the header of one response and how many quotas it holds.
type fixture struct {
	name   string
	h      http.Header
	quotas int
}

// fixtures are headers of real responses: one that says nothing of rate
// limits (most responses), and GitHub's, OpenAI's and Anthropic's.
func fixtures() []fixture {
	plain := http.Header{}
	plain.Set("Content-Type", "application/json; charset=utf-8")
	plain.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	plain.Set("Etag", `W/"deadbeef"`)
	plain.Set("Date", "Tue, 02 Jan 2024 15:04:05 GMT")

	github := http.Header{}
	github.Set("Content-Type", "application/json; charset=utf-8")
	github.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	github.Set("Etag", `W/"deadbeef"`)
	github.Set("X-Github-Request-Id", "CAFE:1234:5678:9ABC:DEF0")
	github.Set("X-RateLimit-Limit", "5000")
	github.Set("X-RateLimit-Remaining", "4999")
	github.Set("X-RateLimit-Used", "1")
	github.Set("X-RateLimit-Reset", "1704211200")
	github.Set("X-RateLimit-Resource", "core")

	openai := http.Header{}
	openai.Set("Content-Type", "application/json")
	openai.Set("Openai-Processing-Ms", "412")
	openai.Set("X-Request-Id", "req_0123456789abcdef")
	openai.Set("X-Ratelimit-Limit-Requests", "500")
	openai.Set("X-Ratelimit-Limit-Tokens", "30000")
	openai.Set("X-Ratelimit-Remaining-Requests", "499")
	openai.Set("X-Ratelimit-Remaining-Tokens", "29000")
	openai.Set("X-Ratelimit-Reset-Requests", "120ms")
	openai.Set("X-Ratelimit-Reset-Tokens", "2s")

	anthropic := http.Header{}
	anthropic.Set("Content-Type", "application/json")
	anthropic.Set("Request-Id", "req_0123456789abcdef")
	for _, q := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		anthropic.Set("Anthropic-Ratelimit-"+q+"-Limit", "50000")
		anthropic.Set("Anthropic-Ratelimit-"+q+"-Remaining", "49000")
		anthropic.Set("Anthropic-Ratelimit-"+q+"-Reset", "2024-01-02T15:04:06Z")
	}
	return []fixture{{"plain", plain, 0}, {"github", github, 1}, {"openai", openai, 2}, {"anthropic", anthropic, 4}}
}

// BenchmarkParse parses the headers of the fixtures.
func BenchmarkParse(b *testing.B) {
	for _, bc := range fixtures() {
		b.Run(bc.name, func(b *testing.B) {
			if q := Parse(bc.h, now).Quotas; len(q) != bc.quotas {
				b.Fatalf("fixture not parsed: %+v", q)
			}
			b.ReportAllocs()
			for b.Loop() {
				Parse(bc.h, now)
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, bc := range []struct {
		name  string
		style Style
	}{{"Legacy", Legacy}, {"IETF", IETF}, {"Both", Both}} {
		b.Run(bc.name, func(b *testing.B) {
			h := http.Header{}
			d := limiters.Decision{Limit: 100, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 1200 * time.Millisecond}
			Write(h, d, bc.style)
			if h.Get("Retry-After") != "2" {
				b.Fatalf("fixture not written: %v", h)
			}
			b.ReportAllocs()
			for b.Loop() {
				Write(h, d, bc.style)
			}
		})
	}
}
