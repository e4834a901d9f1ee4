package redisrepo

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

const (
	replicas   = 8
	goroutines = 16
	perG       = 10 // calls per goroutine: 1280 calls for a limit of 1000
	contLimit  = 1000
)

// contention runs replicas repositories, each on its own client, with
// goroutines goroutines each calling TryAcquire(1) perG times on one key,
// and returns the number of permits granted.
func contention(t *testing.T, clients []redis.UniversalClient, key string, specs ...limiters.Spec) int64 {
	t.Helper()
	var granted atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		r, err := NewChain(c, specs, WithPrefix("cont:"), WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		for range goroutines {
			wg.Go(func() {
				for range perG {
					if !try(t, r, key, nil, &granted) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return granted.Load()
}

// localGrants is what one local limiter of spec grants to the same number
// of calls made at once.
func localGrants(t *testing.T, specs ...limiters.Spec) int64 {
	lim := chain(specs)
	defer lim.Close()
	var n int64
	for range replicas * goroutines * perG {
		if lim.TryAcquire(1).Allowed {
			n++
		}
	}
	return n
}

// dayWindow is a window over which nothing refills during a test; the test
// waits out the last minute of a UTC day, where a window would roll.
func dayWindow(t *testing.T) time.Duration {
	if left := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)); left < time.Minute {
		time.Sleep(left + time.Second)
	}
	return 24 * time.Hour
}

// TestContention: 8 replicas × 16 goroutines on one key with a limit of
// 1000 grant exactly what one local limiter of the same spec grants, for
// every algorithm.
func TestContention(t *testing.T) {
	s := redistest.Start(t)
	clients := make([]redis.UniversalClient, replicas)
	for i := range clients {
		clients[i] = newClient(t, s)
	}
	for alg, spec := range specs(contLimit, dayWindow(t)) {
		t.Run(alg, func(t *testing.T) {
			got, want := contention(t, clients, "hot-"+alg, spec), localGrants(t, spec)
			if got != want {
				t.Fatalf("granted %d across replicas, a local limiter grants %d", got, want)
			}
			if alg != limiters.AlgLeakyBucket && got != contLimit {
				t.Fatalf("granted %d, want the limit %d", got, contLimit)
			}
		})
	}
}

// TestContentionCluster is TestContention on a three-master Redis Cluster,
// plus a chain of four algorithms on one key (all its keys in one slot).
func TestContentionCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	clients := make([]redis.UniversalClient, replicas)
	for i := range clients {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	for alg, spec := range specs(contLimit, dayWindow(t)) {
		t.Run(alg, func(t *testing.T) {
			got, want := contention(t, clients, "hot-"+alg, spec), localGrants(t, spec)
			if got != want {
				t.Fatalf("granted %d across replicas, a local limiter grants %d", got, want)
			}
		})
	}
	t.Run("chain", func(t *testing.T) {
		all := specs(contLimit, dayWindow(t))
		chained := []limiters.Spec{all[limiters.AlgGCRA], all[limiters.AlgFixedWindow],
			all[limiters.AlgSlidingLog], all[limiters.AlgConcurrency]}
		got, want := contention(t, clients, "hot-chain", chained...), localGrants(t, chained...)
		if got != want || got != contLimit {
			t.Fatalf("chain granted %d across replicas, a local chain grants %d, limit %d", got, want, contLimit)
		}
	})
}
