package server_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// discard is a ResponseWriter that keeps one header map, cleared per
// request, so the benchmark measures the middleware and not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkMiddleware measures the admitted path: key by IP (or a header),
// one GCRA per key among 1,000, the fields written in both styles (their
// values and the header map's slices are all the allocations there are).
func BenchmarkMiddleware(b *testing.B) {
	for _, style := range []struct {
		name string
		opts []server.Option
	}{
		{"ip", nil},
		{"header-key", []server.Option{server.WithKey(keyextract.Header("X-Key"))}},
		// Without rate-limit fields: what the middleware itself allocates.
		{"no-fields", []server.Option{server.WithHeaders(headers.Style(0))}},
	} {
		b.Run(style.name, func(b *testing.B) {
			repo := repository.NewMemory(func(string) limiters.Limiter {
				return limiters.NewGCRA(limiters.PerSecond(1e9), 1e9)
			}, repository.WithMaxKeys(10_000))
			defer repo.Close()
			h := server.New(repo, style.opts...).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			const nkeys = 1000
			reqs := make([]*http.Request, nkeys)
			for i := range reqs {
				r := httptest.NewRequest("GET", "/items/1", nil)
				r.RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
				r.Header.Set("X-Key", "key-"+strconv.Itoa(i))
				reqs[i] = r
			}
			for _, r := range reqs { // fill the repository, and check it is filled
				h.ServeHTTP(&discard{h: http.Header{}}, r)
			}
			if repo.Len() != nkeys {
				b.Fatalf("repository holds %d keys, want %d", repo.Len(), nkeys)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &discard{h: make(http.Header, 8)}
				i := int(next.Add(1)) * 7919
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, reqs[i%nkeys])
					i++
				}
			})
		})
	}
}

// BenchmarkPolicyMiddleware measures the admitted path under a Policy: plan
// lookup, ServeMux matching, a chain of two limits and a cost cap.
func BenchmarkPolicyMiddleware(b *testing.B) {
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"only": {
		Endpoints: map[string]server.Rule{"GET /items/{id}": {
			Limits: []limiters.Spec{
				{Algorithm: limiters.AlgGCRA, Rate: limiters.PerSecond(1e9), Limit: 1e9},
				{Algorithm: limiters.AlgFixedWindow, Limit: 1e9, Window: time.Hour},
			},
			CostCaps: []limiters.Spec{{Algorithm: limiters.AlgFixedWindow, Limit: 1e12, Window: time.Hour}},
		}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/items/1", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &discard{h: make(http.Header, 8)}
		for pb.Next() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	})
}
