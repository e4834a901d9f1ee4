package headers

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

func BenchmarkParse(b *testing.B) {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	h.Set("Etag", `W/"deadbeef"`)
	h.Set("X-Github-Request-Id", "CAFE:1234:5678:9ABC:DEF0")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Used", "1")
	h.Set("X-RateLimit-Reset", "1704211200")
	h.Set("X-RateLimit-Resource", "core")
	if q := Parse(h, now).Quotas; len(q) != 1 || q[0].Remaining != 4999 {
		b.Fatalf("fixture not parsed: %+v", q)
	}
	b.ReportAllocs()
	for b.Loop() {
		Parse(h, now)
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
