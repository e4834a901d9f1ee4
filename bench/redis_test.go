package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/redisrepo"
)

// --- 8. Redis: decisions per second and latency, ours vs the peers -------
//
// Every implementation decides on 100 keys with a limit high enough that
// every decision is allowed (10⁶ per second, burst 10⁶), against one local
// redis-server the benchmark starts, through one go-redis client (default
// pool). g=1 is one goroutine, g=64 sixty-four: ops are split between them.
// Each reports decisions/s (all goroutines together) and the p50 and p99
// latency of one decision.
//
//	redis_rate        redis_rate.NewLimiter(client).Allow (GCRA, one EVALSHA per call)
//	throttled         throttled GCRA over goredisstore.v9 (GET, then a CAS script)
//	ulule             ulule/limiter with its go-redis store (a fixed-window script)
//	ours-gcra         redisrepo.New(gcra).TryAcquire (batched into pipelines)
//	ours-sliding      redisrepo.New(sliding_window).TryAcquire
//	ours-gcra-cancellable  ours-gcra with a cancellable context, as a request's:
//	                  a lone call makes its own round trip on the caller's
//	                  goroutine, bounded by its deadline on the socket (the
//	                  others pass context.Background)
//	ours-gcra-cancellable-plain  the same through a client built as the docs
//	                  build it (redis.NewClient(&redis.Options{Addr: …}),
//	                  ContextTimeoutEnabled false): redisrepo makes its own
//	                  client from its options, which honours deadlines
//	ours-gcra-leases  ours-gcra in lease mode (WithLeases(100ms)): decisions
//	                  local within this process's share, leased from Redis;
//	                  every key leased and its share's burst refilled first
//	evalsha-empty     EVALSHA of "return 1", one per call: the unpipelined ceiling
//	evalsha-pipe100   a small TIME+INCR+PEXPIRE script, 100 per pipeline: the batched ceiling

type redisImpl struct {
	name  string
	batch int // decisions per check call
	make  func(b *testing.B, c *redis.Client) func(ctx context.Context, key string) error
}

var redisImpls = []redisImpl{
	{"redis_rate", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		l := redis_rate.NewLimiter(c)
		lim := redis_rate.Limit{Rate: 1e6, Burst: 1e6, Period: time.Second}
		return func(ctx context.Context, key string) error {
			res, err := l.Allow(ctx, key, lim)
			if err == nil && res.Allowed == 0 {
				err = fmt.Errorf("denied")
			}
			return err
		}
	}},
	{"throttled", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		st, err := goredisstore.NewCtx(c, "throttled:")
		if err != nil {
			b.Fatal(err)
		}
		rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerSec(1e6), MaxBurst: 1e6})
		if err != nil {
			b.Fatal(err)
		}
		return func(ctx context.Context, key string) error {
			limited, _, err := rl.RateLimitCtx(ctx, key, 1)
			if err == nil && limited {
				err = fmt.Errorf("denied")
			}
			return err
		}
	}},
	{"ulule", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		st, err := ululeredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule", MaxRetry: 3})
		if err != nil {
			b.Fatal(err)
		}
		l := ulule.New(st, ulule.Rate{Period: time.Second, Limit: 1e6})
		return func(ctx context.Context, key string) error {
			res, err := l.Get(ctx, key)
			if err == nil && res.Reached {
				err = fmt.Errorf("denied")
			}
			return err
		}
	}},
	{"ours-gcra", 1, ours(limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1e6, Rate: limiters.PerSecond(1e6)})},
	{"ours-sliding", 1, ours(limiters.Spec{Algorithm: limiters.AlgSlidingWindow, Limit: 1e6, Window: time.Second})},
	{"ours-gcra-cancellable", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		check := ours(limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1e6, Rate: limiters.PerSecond(1e6)})(b, c)
		ctx, cancel := context.WithCancel(context.Background()) // as a request's context is
		b.Cleanup(cancel)
		return func(_ context.Context, key string) error { return check(ctx, key) }
	}},
	{"ours-gcra-cancellable-plain", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		// the client as redisrepo's documentation builds it: go-redis's
		// defaults, whose reads ignore contexts
		plain := redis.NewClient(&redis.Options{Addr: c.Options().Addr})
		b.Cleanup(func() { plain.Close() })
		check := ours(limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1e6, Rate: limiters.PerSecond(1e6)})(b, plain)
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		return func(_ context.Context, key string) error { return check(ctx, key) }
	}},
	{"ours-gcra-leases", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1e6, Rate: limiters.PerSecond(1e6)}
		check := ours(spec, redisrepo.WithLeases(100*time.Millisecond))(b, c)
		// A new share starts empty: lease every key, and keep using them
		// (an idle lease is given back) while the shares' bursts refill
		// (10⁶ at 10⁶/s).
		for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			for i := range 100 {
				check(context.Background(), "key"+strconv.Itoa(i)) // denied at first: empty
			}
		}
		return check
	}},
	{"evalsha-empty", 1, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		s := redis.NewScript("return 1")
		return func(ctx context.Context, key string) error { return s.Run(ctx, c, []string{key}).Err() }
	}},
	{"evalsha-pipe100", 100, func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		s := redis.NewScript(`local t = redis.call('TIME')
local v = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], 1000)
return v`)
		s.Load(context.Background(), c)
		return func(ctx context.Context, key string) error {
			p := c.Pipeline()
			for range 100 {
				s.EvalSha(ctx, p, []string{key})
			}
			_, err := p.Exec(ctx)
			return err
		}
	}},
}

func ours(spec limiters.Spec, opts ...redisrepo.Option) func(b *testing.B, c *redis.Client) func(context.Context, string) error {
	return func(b *testing.B, c *redis.Client) func(context.Context, string) error {
		r, err := redisrepo.New(c, spec, append([]redisrepo.Option{redisrepo.WithPrefix("ours:")}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		return func(ctx context.Context, key string) error {
			d, err := r.TryAcquire(ctx, key, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("denied: %+v", d)
			}
			return err
		}
	}
}

func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "key" + strconv.Itoa(i)
	}
	for _, g := range []int{1, 64} {
		for _, impl := range redisImpls {
			b.Run(fmt.Sprintf("g=%d/impl=%s", g, impl.name), func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
				defer c.Close()
				check := impl.make(b, c)
				calls := max(b.N/impl.batch, g)
				lat := make([]time.Duration, calls)
				var wg sync.WaitGroup
				ctx := context.Background()
				b.ResetTimer()
				start := time.Now()
				for w := range g {
					wg.Go(func() {
						for i := w; i < calls; i += g {
							t0 := time.Now()
							if err := check(ctx, keys[i%len(keys)]); err != nil {
								b.Error(err)
								return
							}
							lat[i] = time.Since(t0)
						}
					})
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(calls*impl.batch)/el.Seconds(), "decisions/s")
				b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
			})
		}
	}
}
