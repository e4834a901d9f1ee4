package redisrepo

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// newClient returns a client of s that honours contexts (the setting the
// package doc recommends), closed when t ends.
func newClient(t testing.TB, s *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// newPlainClient returns a client with go-redis's defaults, which ignore
// contexts on sockets: every call then goes through the batcher's sender.
func newPlainClient(t testing.TB, s *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// clientKinds are the two paths a call can take.
var clientKinds = []struct {
	name string
	make func(testing.TB, *redistest.Server) *redis.Client
}{{"ctx-client", newClient}, {"plain-client", newPlainClient}}

// testTimeout bounds each round trip of the tests' repositories in place
// of the default 1 s: on a loaded machine (2 cores, -race, two CPU-bound
// processes beside) a Redis Cluster has taken longer than 1 s to answer.
// Tests of the timeout itself give their own WithTimeout, which comes later
// and wins.
const testTimeout = 10 * time.Second

// newRepo returns a repository closed when t ends.
func newRepo(t testing.TB, c redis.UniversalClient, spec limiters.Spec, opts ...Option) *Repository {
	t.Helper()
	r, err := New(c, spec, append([]Option{WithTimeout(testTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// try makes one TryAcquire(key, 1) on r, counting it in calls (unless nil)
// and its grant in granted. It reports false after an error.
func try(t testing.TB, r *Repository, key string, calls, granted *atomic.Int64) bool {
	d, err := r.TryAcquire(context.Background(), key, 1)
	if err != nil {
		t.Error(err)
		return false
	}
	if calls != nil {
		calls.Add(1)
	}
	if d.Allowed {
		granted.Add(1)
	}
	return true
}

// until runs f on g goroutines of wg, each until stop closes or f returns
// false.
func until(wg *sync.WaitGroup, g int, stop <-chan struct{}, f func() bool) {
	for range g {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !f() {
					return
				}
			}
		})
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// specs is one spec per algorithm, limit lim per window (or rate lim/window).
func specs(lim int, window time.Duration) map[string]limiters.Spec {
	r := limiters.Rate{N: lim, Per: window}
	return map[string]limiters.Spec{
		limiters.AlgTokenBucket:   {Algorithm: limiters.AlgTokenBucket, Limit: lim, Rate: r},
		limiters.AlgGCRA:          {Algorithm: limiters.AlgGCRA, Limit: lim, Rate: r},
		limiters.AlgLeakyBucket:   {Algorithm: limiters.AlgLeakyBucket, Limit: lim, Rate: r},
		limiters.AlgFixedWindow:   {Algorithm: limiters.AlgFixedWindow, Limit: lim, Window: window},
		limiters.AlgSlidingWindow: {Algorithm: limiters.AlgSlidingWindow, Limit: lim, Window: window},
		limiters.AlgSlidingLog:    {Algorithm: limiters.AlgSlidingLog, Limit: lim, Window: window},
		limiters.AlgConcurrency:   {Algorithm: limiters.AlgConcurrency, Limit: lim},
	}
}
