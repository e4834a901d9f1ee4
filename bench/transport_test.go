package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/limiters"
)

// --- 6. Transport overhead: throttle.Transport vs the bare http.Transport --
//
// Both sides send GET requests to an httptest server on loopback, in the
// same process, through a fresh *http.Transport each (keep-alive, enough
// idle connections for every goroutine). Ours wraps that transport in
// throttle.NewTransport with a TokenBucket that never waits (10⁹/s, burst
// 10⁹), with server feedback on (the default). The loop calls RoundTrip
// directly on a request built once per goroutine (RoundTrip must not modify
// it), reads the body to EOF and closes it, and checks for a 200.
//
// The server runs in the benchmark's process, so ns/op, cpu-ns/op and
// allocs/op include the server's share of each request; it is the same for
// both sides, so the difference is the Transport's own cost.

// transportParallelism is the number of goroutines per GOMAXPROCS under
// mode=par: enough requests in flight that loopback latency does not leave
// the cores idle.
const transportParallelism = 4

var okBody = []byte("ok\n")

// plainHandler answers every request with a small 200 body.
func plainHandler(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(okBody)))
	w.Write(okBody)
}

// githubHandler answers like GitHub's REST API does, with X-RateLimit-*
// fields, but with a quota no benchmark can use up (10⁹ per hour, reset an
// hour after the server started): the client parses them on every response
// and never pauses or paces.
func githubHandler() http.HandlerFunc {
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(okBody)))
		h.Set("X-RateLimit-Limit", "1000000000")
		h.Set("X-RateLimit-Remaining", "999999999")
		h.Set("X-RateLimit-Reset", reset)
		h.Set("X-RateLimit-Used", "1")
		h.Set("X-RateLimit-Resource", "core")
		w.Write(okBody)
	}
}

func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(plainHandler))
	defer srv.Close()
	benchTransports(b, srv.URL)
}

// BenchmarkTransportFeedback is BenchmarkTransport against a server that
// sends GitHub-style X-RateLimit-* fields, so ours runs headers.Parse and
// the partition's gate bookkeeping on every response.
func BenchmarkTransportFeedback(b *testing.B) {
	srv := httptest.NewServer(githubHandler())
	defer srv.Close()
	benchTransports(b, srv.URL)
}

// BenchmarkTransportStub isolates the Transport's own cost: the base
// RoundTripper is a stub that answers at once, without a network, with a
// canned 200 (impl=bare is the stub alone). header=github gives the stub's
// responses the GitHub-style fields of BenchmarkTransportFeedback.
func BenchmarkTransportStub(b *testing.B) {
	gh := httptest.NewRecorder()
	githubHandler()(gh, nil)
	for _, hs := range []struct {
		name string
		h    http.Header
	}{{"plain", http.Header{"Content-Type": {"text/plain; charset=utf-8"}}}, {"github", gh.Header()}} {
		b.Run("header="+hs.name, func(b *testing.B) {
			modes(b, func(b *testing.B, parallel bool) {
				b.Run("impl=bare", func(b *testing.B) {
					benchRoundTrip(b, parallel, stubTransport{hs.h}, "http://api.example/")
				})
				b.Run("impl=throttle", func(b *testing.B) {
					t := throttle.NewTransport(stubTransport{hs.h}, throttle.WithLimiter(limiters.NewTokenBucket(hugeRate, huge)))
					defer t.Close()
					benchRoundTrip(b, parallel, t, "http://api.example/")
				})
			})
		})
	}
}

// stubTransport answers every request with a 200, header h (shared, never
// written) and an empty body.
type stubTransport struct{ h http.Header }

func (s stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: s.h, Body: http.NoBody, Request: req}, nil
}

func newBaseTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     time.Minute,
	}
}

func benchTransports(b *testing.B, url string) {
	modes(b, func(b *testing.B, parallel bool) {
		b.Run("impl=bare", func(b *testing.B) {
			base := newBaseTransport()
			defer base.CloseIdleConnections()
			benchRoundTrip(b, parallel, base, url)
		})
		b.Run("impl=throttle", func(b *testing.B) {
			base := newBaseTransport()
			t := throttle.NewTransport(base, throttle.WithLimiter(limiters.NewTokenBucket(hugeRate, huge)))
			defer t.Close()
			defer t.CloseIdleConnections()
			benchRoundTrip(b, parallel, t, url)
		})
	})
}

// benchRoundTrip sends b.N requests through rt and reports, besides ns/op
// and cpu-ns/op, the throughput as req/s.
func benchRoundTrip(b *testing.B, parallel bool, rt http.RoundTripper, url string) {
	newReq := func() *http.Request {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		return req
	}
	// One request outside the timer opens the first connection.
	if !roundTrip(rt, newReq()) {
		b.Fatal("fixture: the warm-up request failed")
	}
	b.ReportAllocs()
	var misses atomic.Int64
	b.ResetTimer()
	cpu := startCPU()
	if !parallel {
		req := newReq()
		for i := 0; i < b.N; i++ {
			if !roundTrip(rt, req) {
				misses.Add(1)
			}
		}
	} else {
		b.SetParallelism(transportParallelism)
		b.RunParallel(func(pb *testing.PB) {
			req := newReq()
			var m int64
			for pb.Next() {
				if !roundTrip(rt, req) {
					m++
				}
			}
			misses.Add(m)
		})
	}
	b.StopTimer()
	cpu.report(b)
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "req/s")
	}
	check(b, misses.Load(), "a 200 with its body read")
}

// roundTrip sends req, reads the body to EOF and closes it, and reports
// whether all went well with a 200.
func roundTrip(rt http.RoundTripper, req *http.Request) bool {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}
