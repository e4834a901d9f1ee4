package throttle

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// staticRT answers every request with the same headers and an empty body,
// so a benchmark measures only the layer above it.
type staticRT struct{ h http.Header }

func (s staticRT) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: s.h, Body: http.NoBody, Request: req}, nil
}

func BenchmarkRoundTripOverhead(b *testing.B) {
	plain := http.Header{"Content-Type": {"text/plain"}}
	github := http.Header{
		"X-Ratelimit-Limit":     {"1000000000"},
		"X-Ratelimit-Remaining": {"999999999"},
		"X-Ratelimit-Reset":     {"1893456000"},
	}
	// GitHub names its bucket: every request is routed to the bucket's gate.
	bucketed := http.Header{"X-Ratelimit-Resource": {"core"}}
	for k, v := range github {
		bucketed[k] = v
	}
	for _, bc := range []struct {
		name string
		h    http.Header
		opts []Option
	}{
		{"bare", plain, nil},
		{"limiter", plain, nil},
		{"limiter+quota headers", github, nil},
		{"limiter+bucket headers", bucketed, nil},
		{"limiter+max wait", plain, []Option{WithMaxWait(time.Second)}},
		{"no feedback", plain, []Option{WithServerFeedback(false)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var rt http.RoundTripper = staticRT{bc.h}
			if bc.name != "bare" {
				// A limiter of its own each run: Close closes it.
				opts := append([]Option{WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(1e9), 1e9))}, bc.opts...)
				tr := NewTransport(rt, opts...)
				defer tr.Close()
				rt = tr
			}
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestRoundTripAllocates: a round trip through the Transport allocates
// nothing of its own, whether the answer says nothing of rate limits,
// reports a quota, or names its bucket too: the quotas an answer reports
// are parsed into a pooled buffer, not into a slice of their own. (Under
// the race detector, whose sync.Pool drops some of what is put back, a
// fraction of an allocation is allowed.)
func TestRoundTripAllocates(t *testing.T) {
	allowed := 0.0
	if raceEnabled {
		allowed = 0.5
	}
	for name, h := range map[string]http.Header{
		"plain": {"Content-Type": {"text/plain"}},
		"quota": {"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4999"}, "X-Ratelimit-Reset": {"1893456000"}},
		"bucket": {"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4999"}, "X-Ratelimit-Reset": {"1893456000"},
			"X-Ratelimit-Resource": {"core"}},
		"two quotas": {"X-Ratelimit-Limit-Requests": {"5000"}, "X-Ratelimit-Remaining-Requests": {"4999"},
			"X-Ratelimit-Reset-Requests": {"12ms"}, "X-Ratelimit-Limit-Tokens": {"200000"},
			"X-Ratelimit-Remaining-Tokens": {"199000"}, "X-Ratelimit-Reset-Tokens": {"30ms"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp := &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody}
			tr := NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }),
				WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(1e9), 1e9)))
			defer tr.Close()
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			trip := func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			}
			trip() // the partition's gate, and its bucket's, come first
			trip()
			if n := testing.AllocsPerRun(1000, trip); n > allowed {
				t.Errorf("%v allocations a round trip, want %v at most", n, allowed)
			}
		})
	}
}
