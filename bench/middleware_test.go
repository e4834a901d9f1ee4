package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// --- 8. Server middleware overhead -----------------------------------------
//
// Each middleware wraps the same handler (a 200 with a 3-byte body), keys
// requests by the client IP (RemoteAddr's host), keeps its state in memory,
// and allows 10⁹ requests per second per key, so no request is ever
// refused; each loop checks that it got a 200. Requests are served without
// a network: handler.ServeHTTP(httptest.NewRecorder(), req), with req built
// once per goroutine. Under mode=par each goroutine is its own client IP
// (its own key). impl=none is the handler alone: the floor, recorder
// included.
//
//	sethvargo    httplimit.NewMiddleware(memorystore (10⁹ per 1s), httplimit.IPKeyFunc()).Handle
//	ulule        stdlib.NewMiddleware(limiter.New(memory.NewStore(), Rate{1s, 10⁹})).Handler
//	throttled    (&HTTPRateLimiterCtx{GCRA over memstore (PerSec(10⁹), burst 10⁹),
//	             VaryBy{RemoteAddr: true}}).RateLimit
//	throttle     server.New(repository.NewMemory(TokenBucket 10⁹/s, burst 10⁹),
//	             server.WithKey(keyextract.IP())).Middleware — writes the legacy
//	             X-RateLimit-* and the IETF RateLimit/RateLimit-Policy fields
//	throttle-legacy  the same with server.WithHeaders(headers.Legacy), which
//	             writes only X-RateLimit-*, as the peers do (for reference)

func okHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(okBody)
}

type middlewareImpl struct {
	name string
	// wrap returns next behind the middleware and a func that releases it.
	wrap func(b *testing.B, next http.Handler) (http.Handler, func())
}

var middlewareImpls = []middlewareImpl{
	{"none", func(_ *testing.B, next http.Handler) (http.Handler, func()) { return next, func() {} }},
	{"sethvargo", func(b *testing.B, next http.Handler) (http.Handler, func()) {
		s, err := memorystore.New(&memorystore.Config{Tokens: huge, Interval: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		mw, err := httplimit.NewMiddleware(s, httplimit.IPKeyFunc())
		if err != nil {
			b.Fatal(err)
		}
		return mw.Handle(next), func() { s.Close(context.Background()) }
	}},
	{"ulule", func(_ *testing.B, next http.Handler) (http.Handler, func()) {
		// The memory store's cleaner goroutine stops only through a
		// finalizer; it wakes once a minute, after the benchmark.
		l := ulule.New(ululememory.NewStore(), ulule.Rate{Period: time.Second, Limit: huge})
		return stdlib.NewMiddleware(l).Handler(next), func() {}
	}},
	{"throttled", func(b *testing.B, next http.Handler) (http.Handler, func()) {
		st, err := memstore.NewCtx(0)
		if err != nil {
			b.Fatal(err)
		}
		rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
			MaxRate:  throttled.PerSec(huge),
			MaxBurst: huge - 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		h := &throttled.HTTPRateLimiterCtx{
			RateLimiter: rl,
			VaryBy:      &throttled.VaryBy{RemoteAddr: true},
		}
		return h.RateLimit(next), func() {}
	}},
	{"throttle", func(_ *testing.B, next http.Handler) (http.Handler, func()) {
		return ourMiddleware(next)
	}},
	{"throttle-legacy", func(_ *testing.B, next http.Handler) (http.Handler, func()) {
		return ourMiddleware(next, server.WithHeaders(headers.Legacy))
	}},
}

func ourMiddleware(next http.Handler, opts ...server.Option) (http.Handler, func()) {
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewTokenBucket(hugeRate, huge)
	})
	rl := server.New(repo, append([]server.Option{server.WithKey(keyextract.IP())}, opts...)...)
	return rl.Middleware(next), func() { repo.Close() }
}

func BenchmarkMiddleware(b *testing.B) {
	modes(b, func(b *testing.B, parallel bool) {
		for _, im := range middlewareImpls {
			b.Run("impl="+im.name, func(b *testing.B) {
				h, release := im.wrap(b, http.HandlerFunc(okHandler))
				defer release()
				benchServe(b, parallel, h)
			})
		}
	})
}

func benchServe(b *testing.B, parallel bool, h http.Handler) {
	newReq := func(client int) *http.Request {
		req := httptest.NewRequest(http.MethodGet, "http://api.example/v1/items", nil)
		req.RemoteAddr = ipKey(client) + ":54321"
		return req
	}
	b.ReportAllocs()
	var misses atomic.Int64
	cpu := startCPU()
	if !parallel {
		req := newReq(1)
		for b.Loop() {
			if !serve(h, req) {
				misses.Add(1)
			}
		}
	} else {
		var client atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			req := newReq(int(client.Add(1)))
			var m int64
			for pb.Next() {
				if !serve(h, req) {
					m++
				}
			}
			misses.Add(m)
		})
	}
	cpu.report(b)
	check(b, misses.Load(), "served with a 200")
}

func serve(h http.Handler, req *http.Request) bool {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code == http.StatusOK
}
