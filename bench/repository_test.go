package bench

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	goLimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// --- 7. Per-key stores: repository.Memory vs go-limiter and throttled -----
//
// Every store limits each key to 10 per second with a burst of 10:
//
//	ours       repository.NewMemory(factory), factory = NewGCRA(PerSecond(10), 10)
//	           or NewTokenBucket(PerSecond(10), 10); no options (unbounded,
//	           never expires), like the peers' defaults below
//	sethvargo  memorystore.New(&Config{Tokens: 10, Interval: time.Second})
//	throttled  throttled.NewGCRARateLimiterCtx(memstore.NewCtx(0),
//	           RateQuota{MaxRate: PerSec(10), MaxBurst: 9}) — MaxBurst counts
//	           the requests beyond the first, so 9 is a burst of 10;
//	           maxKeys 0 is its unbounded map
//
// TestRepositoryMemory (-memkeys) measures the heap each idle key keeps;
// BenchmarkRepository the time of one check.

var memkeys = flag.Bool("memkeys", false, "run TestRepositoryMemory: 1M keys per store, a few seconds and ~200 MB each")

const (
	storeTokens   = 10
	storeInterval = time.Second
	memKeyCount   = 1_000_000
)

// store is one per-key limiter behind a common face: check charges one
// request to key and reports whether it was allowed and the remaining
// count; size is the number of keys held, or -1 when the store cannot say;
// close releases it (stops the peer's sweeper goroutine).
type store struct {
	check func(key string) (allowed bool, remaining int)
	size  func() int
	close func()
	// forgets: the store drops a key once its bucket is full again
	// (repository.NewGCRA), so after a run longer than a refill it holds
	// fewer keys than it was given; check proves each key new instead.
	forgets bool
}

// storeImpl makes a store that allows tokens per interval, with a burst of
// tokens.
type storeImpl struct {
	name string
	make func(tb testing.TB, tokens int, interval time.Duration) store
}

// storeImpls lists the peers first, so benchstat -col /impl has a peer as
// its base column.
var storeImpls = []storeImpl{
	{"sethvargo", newSethvargo},
	{"throttled", newThrottled},
	{"gcra", func(tb testing.TB, tokens int, interval time.Duration) store {
		return newOurs(func(string) limiters.Limiter {
			return limiters.NewGCRA(limiters.Rate{N: tokens, Per: interval}, tokens)
		})
	}},
	{"tokenbucket", func(tb testing.TB, tokens int, interval time.Duration) store {
		return newOurs(func(string) limiters.Limiter {
			return limiters.NewTokenBucket(limiters.Rate{N: tokens, Per: interval}, tokens)
		})
	}},
	{"compact", func(tb testing.TB, tokens int, interval time.Duration) store {
		g := repository.NewGCRA(limiters.Rate{N: tokens, Per: interval}, tokens)
		ctx := context.Background()
		return store{
			check: func(key string) (bool, int) {
				d, err := g.TryAcquire(ctx, key, 1)
				return err == nil && d.Allowed, d.Remaining
			},
			size:    g.Len,
			close:   func() { g.Close() },
			forgets: true,
		}
	}},
}

func newOurs(factory func(string) limiters.Limiter) store {
	m := repository.NewMemory(factory)
	ctx := context.Background()
	return store{
		check: func(key string) (bool, int) {
			d, err := m.TryAcquire(ctx, key, 1)
			return err == nil && d.Allowed, d.Remaining
		},
		size:  m.Len,
		close: func() { m.Close() },
	}
}

func newSethvargo(tb testing.TB, tokens int, interval time.Duration) store {
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(tokens), Interval: interval})
	if err != nil {
		tb.Fatal(err)
	}
	var _ goLimiter.Store = s
	ctx := context.Background()
	return store{
		check: func(key string) (bool, int) {
			_, remaining, _, ok, err := s.Take(ctx, key)
			return err == nil && ok, int(remaining)
		},
		size:  func() int { return -1 },
		close: func() { s.Close(ctx) },
	}
}

func newThrottled(tb testing.TB, tokens int, interval time.Duration) store {
	st, err := memstore.NewCtx(0)
	if err != nil {
		tb.Fatal(err)
	}
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
		MaxRate:  throttled.PerDuration(tokens, interval),
		MaxBurst: tokens - 1,
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	return store{
		check: func(key string) (bool, int) {
			limited, res, err := rl.RateLimitCtx(ctx, key, 1)
			return err == nil && !limited, res.Remaining
		},
		size:  func() int { return -1 },
		close: func() {},
	}
}

// ipKey is the i-th distinct client key: an IPv4 address in 10.0.0.0/8 as
// text (8 to 11 bytes, so one 16-byte allocation), what an IP-keyed server
// limiter stores.
func ipKey(i int) string {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
}

func ipKeys(n, offset int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = ipKey(offset + i)
	}
	return ks
}

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestRepositoryMemory inserts 1,000,000 distinct keys into each store, one
// check each, and prints the live heap that the store then holds per key,
// the key strings included (each key is made inside the measured region and
// is kept only if the store keeps it). It runs only with -memkeys:
//
//	go test -run=TestRepositoryMemory -memkeys -v .
func TestRepositoryMemory(t *testing.T) {
	if !*memkeys {
		t.Skip("allocates ~1M keys per store; run with -memkeys")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "impl\tkeys\tB/key\tns/insert\t\n")
	for _, im := range storeImpls {
		before := heapAlloc()
		// 10 per hour: no key is full again before the measurement, so
		// every store must keep every key (repository.NewGCRA forgets a
		// key once its bucket is full again, which loses nothing).
		s := im.make(t, storeTokens, time.Hour)
		start := time.Now()
		for i := range memKeyCount {
			if ok, rem := s.check(ipKey(i)); !ok || rem != storeTokens-1 {
				t.Fatalf("%s: key %d: allowed %v, remaining %d; want a fresh key: true, %d", im.name, i, ok, rem, storeTokens-1)
			}
		}
		took := time.Since(start)
		after := heapAlloc()
		n := s.size()
		runtime.KeepAlive(s)
		if n >= 0 && n != memKeyCount {
			t.Fatalf("%s: holds %d keys, want %d", im.name, n, memKeyCount)
		}
		// A peer that cannot count its keys proved each one new above: its
		// first check left exactly storeTokens-1.
		perKey := float64(int64(after)-int64(before)) / memKeyCount
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f\t\n", im.name, memKeyCount, perKey, float64(took.Nanoseconds())/memKeyCount)
		s.close()
	}
	tw.Flush()
}

// existingKeys is the fixture of BenchmarkRepository/op=existing: enough
// keys to spread over every shard, few enough to build fast.
const existingKeys = 1 << 16

// BenchmarkRepository times one check: op=new is the first check of a key
// never seen (the store creates its entry; keys are made before the timer
// starts, b.N of them, one store per run, so the store grows to b.N keys),
// op=existing a check of one of existingKeys keys already present, on
// stores whose limit (10⁹ per second) never denies. Under mode=par the
// goroutines take keys in turn from a shared counter.
func BenchmarkRepository(b *testing.B) {
	b.Run("op=new", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			for _, im := range storeImpls {
				b.Run("impl="+im.name, func(b *testing.B) { benchNewKey(b, parallel, im) })
			}
		})
	})
	b.Run("op=existing", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			for _, im := range storeImpls {
				b.Run("impl="+im.name, func(b *testing.B) { benchExistingKey(b, parallel, im) })
			}
		})
	})
}

func benchNewKey(b *testing.B, parallel bool, im storeImpl) {
	s := im.make(b, storeTokens, storeInterval)
	defer s.close()
	ks := ipKeys(b.N, 0)
	runtime.GC()
	b.ReportAllocs()
	var misses atomic.Int64
	b.ResetTimer()
	cpu := startCPU()
	if !parallel {
		for _, k := range ks {
			if ok, rem := s.check(k); !ok || rem != storeTokens-1 {
				misses.Add(1)
			}
		}
	} else {
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var m int64
			for pb.Next() {
				if ok, rem := s.check(ks[next.Add(1)-1]); !ok || rem != storeTokens-1 {
					m++
				}
			}
			misses.Add(m)
		})
	}
	b.StopTimer()
	cpu.report(b)
	check(b, misses.Load(), "allowed with a fresh key's remaining count")
	if n := s.size(); n >= 0 && !s.forgets && n != b.N {
		b.Fatalf("the store holds %d keys, want %d", n, b.N)
	}
}

func benchExistingKey(b *testing.B, parallel bool, im storeImpl) {
	s := im.make(b, huge, time.Second)
	defer s.close()
	ks := ipKeys(existingKeys, 0)
	for _, k := range ks {
		if ok, _ := s.check(k); !ok {
			b.Fatal("fixture: a first check was denied")
		}
	}
	if n := s.size(); n >= 0 && !s.forgets && n != existingKeys {
		b.Fatalf("fixture: the store holds %d keys, want %d", n, existingKeys)
	}
	const mask = existingKeys - 1
	runtime.GC()
	b.ReportAllocs()
	var misses atomic.Int64
	b.ResetTimer()
	cpu := startCPU()
	if !parallel {
		i := 0
		for b.Loop() {
			if ok, _ := s.check(ks[i&mask]); !ok {
				misses.Add(1)
			}
			i++
		}
	} else {
		var worker atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine walks the keys from its own starting point.
			i := int(worker.Add(1)) * (existingKeys / 8)
			var m int64
			for pb.Next() {
				if ok, _ := s.check(ks[i&mask]); !ok {
					m++
				}
				i++
			}
			misses.Add(m)
		})
	}
	b.StopTimer()
	cpu.report(b)
	check(b, misses.Load(), "allowed")
	if n := s.size(); n >= 0 && !s.forgets && n != existingKeys {
		b.Fatalf("the store holds %d keys after the run, want %d", n, existingKeys)
	}
}
