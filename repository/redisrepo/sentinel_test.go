package redisrepo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// newFailoverClient returns a Sentinel failover client of sn that honours
// contexts and fails fast, closed when t ends.
func newFailoverClient(t testing.TB, sn *redistest.Sentinel) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: sn.Addrs(),
		MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// newUniversalSentinelClient returns what redis.NewUniversalClient makes
// of a MasterName (a failover client), with go-redis's default timeouts,
// closed when t ends.
func newUniversalSentinelClient(t testing.TB, sn *redistest.Sentinel) redis.UniversalClient {
	t.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: redistest.MasterName, Addrs: sn.Addrs(),
		MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSentinelExact: two repositories, one on a failover client and one on
// the universal client of a MasterName (as two replicas of a service),
// with 16 goroutines each on one key, grant exactly the limit of 100 per
// day, for every algorithm (one permit for the leaky bucket, which never
// bursts), as one local limiter of the same spec does (TestContention).
func TestSentinelExact(t *testing.T) {
	sn := redistest.StartSentinel(t, 1)
	clients := []redis.UniversalClient{newFailoverClient(t, sn), newUniversalSentinelClient(t, sn)}
	const lim = 100
	for alg, spec := range specs(lim, dayWindow(t)) {
		t.Run(alg, func(t *testing.T) {
			want := int64(lim)
			if alg == limiters.AlgLeakyBucket {
				want = 1 // a shaper: the other calls would have to wait
			}
			if got := contention(t, clients, "sentinel-"+alg, spec); got != want {
				t.Errorf("granted %d through Sentinel, want %d", got, want)
			}
		})
	}
}

// failoverSpec is spent in one burst and refills one permit every 90s: a
// denial of a spent key can only come from the state in Redis, never from
// FailOpen nor from FailLocal's fresh local limiter.
var failoverSpec = limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 40, Rate: limiters.PerHour(40)}

// decide runs TryAcquire(key, 1) on r in a loop on two goroutines of wg
// until stop, each call within a 1s context, counting the calls that
// outlive it in late and in bad the outcomes mode forbids: under FailClosed
// an error must wrap ErrUnavailable and come with no grant; FailOpen and
// FailLocal never return an error.
func decide(wg *sync.WaitGroup, r *Repository, mode FailMode, key string, stop <-chan struct{}, late, bad *atomic.Int64) {
	until(wg, 2, stop, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		begin := time.Now()
		d, err := r.TryAcquire(ctx, key, 1)
		if time.Since(begin) > outlived {
			late.Add(1)
		}
		if mode == FailClosed && err != nil && (!errors.Is(err, ErrUnavailable) || d.Allowed) ||
			mode != FailClosed && err != nil {
			bad.Add(1)
		}
		time.Sleep(time.Millisecond)
		return true
	})
}

// TestSentinelFailover fails the master over to its replica while
// repositories of each fail mode, each on its own failover client, keep
// deciding: no call outlives its context, each returns what its fail mode
// promises, and every repository decides again through Redis by itself,
// on the promoted replica, which kept the state the master had replicated.
// The master is either killed (the sentinels find it down and promote the
// replica) or handed over alive by SENTINEL FAILOVER (it keeps taking
// writes until the sentinels demote it, so only a client that follows the
// switch reaches the promoted replica).
func TestSentinelFailover(t *testing.T) {
	for _, how := range []struct {
		name      string
		sentinels int
		kill      bool
	}{{"kill master", 3, true}, {"SENTINEL FAILOVER", 1, false}} {
		t.Run(how.name, func(t *testing.T) {
			sn := redistest.StartSentinel(t, how.sentinels)
			ctx := ctxT(t)
			modes := []FailMode{FailClosed, FailOpen, FailLocal}
			repos := make([]*Repository, len(modes))
			events := make([]*eventLog, len(modes))
			for i, mode := range modes {
				events[i] = &eventLog{}
				repos[i] = newRepo(t, newFailoverClient(t, sn), failoverSpec, faultOpts(mode, events[i])...)
			}
			for range failoverSpec.Limit {
				if d, err := repos[0].TryAcquire(ctx, "spent", 1); err != nil || !d.Allowed {
					t.Fatalf("spending the burst: %+v, %v", d, err)
				}
			}
			master := newClient(t, sn.Master)
			if n, err := master.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
				t.Fatalf("WAIT for the replica: %d, %v", n, err)
			}
			for i, r := range repos {
				if d, err := r.TryAcquire(ctx, "spent", 1); err != nil || d.Allowed {
					t.Fatalf("%v: a spent key before the failover: %+v, %v", modes[i], d, err)
				}
			}

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var late, bad atomic.Int64
			for i, r := range repos {
				decide(&wg, r, modes[i], "load", stop, &late, &bad)
			}
			stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
			t.Cleanup(stopLoad)               // also after a Fatal, before the repositories close
			time.Sleep(50 * time.Millisecond) // under load before the failover starts
			if how.kill {
				sn.Master.Stop()
			} else {
				sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Sentinels[0].Addr})
				err := sc.Failover(ctx, redistest.MasterName).Err()
				sc.Close()
				if err != nil {
					t.Fatalf("SENTINEL FAILOVER: %v", err)
				}
			}
			sn.WaitPromoted(t, 15*time.Second)
			promoted := newClient(t, sn.Replica)
			for i, r := range repos {
				waitRedis(t, r, promoted, fmt.Sprint("fresh", i))
			}
			stopLoad()
			if n := late.Load(); n > 0 {
				t.Errorf("%d calls outlived their 1s context", n)
			}
			if n := bad.Load(); n > 0 {
				t.Errorf("%d calls returned what their fail mode forbids", n)
			}
			if how.kill { // the master was down for at least down-after-milliseconds
				for i, mode := range modes {
					kind := map[FailMode]EventKind{FailClosed: EventFailClosed, FailOpen: EventFailOpen, FailLocal: EventFailLocal}[mode]
					if events[i].count(kind, "") == 0 {
						t.Errorf("%v: the observer heard no %v event while the master was down", mode, mode)
					}
				}
			}
		})
	}
}

// waitRedis waits, at most 10s, until r decides through Redis again, on
// the promoted replica, with the state the master replicated to it: the
// spent key is denied for a long while, and a fresh key grants two permits,
// the second seeing the first (FailOpen would report 39 left both times),
// and its state is on promoted.
func waitRedis(t *testing.T, r *Repository, promoted *redis.Client, fresh string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		var spent limiters.Decision
		var got [2]limiters.Decision
		var on int64
		var err error
		key := fmt.Sprint(fresh, "/", i)
		bounded(t, func(ctx context.Context) { spent, err = r.TryAcquire(ctx, "spent", 1) })
		if err == nil && !spent.Allowed && spent.RetryAfter > time.Minute {
			for j := range got {
				if err == nil {
					bounded(t, func(ctx context.Context) { got[j], err = r.TryAcquire(ctx, key, 1) })
				}
			}
		}
		if err == nil && got[1].Allowed {
			bounded(t, func(ctx context.Context) { on, err = promoted.Exists(ctx, r.keys(key)...).Result() })
		}
		if err == nil && got[0].Remaining == failoverSpec.Limit-1 && got[1].Remaining == failoverSpec.Limit-2 &&
			got[1].Limit == failoverSpec.Limit && on == 1 && r.BreakerState() == "closed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no decisions through the promoted replica: spent %+v; fresh %+v, on it %d; last error %v; breaker %s",
				spent, got, on, err, r.BreakerState())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
