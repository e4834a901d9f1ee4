package redisrepo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// leaseSpec is a hot quota: 2000 per second, bursts of 100.
var leaseSpec = limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 100, Rate: limiters.PerSecond(2000)}

// leaseRefresh is the tests' refresh: a lease lives 300 ms, so that a
// renewer starved of CPU for a while (the suites run on loaded machines)
// keeps its share; a share whose lease ran out on our clock is not used.
const leaseRefresh = 100 * time.Millisecond

// hammer calls r.TryAcquire(key, 1) from g goroutines until stop closes,
// counting the calls and the grants. Each goroutine sleeps a millisecond
// every 64 calls: its demand stays far above any rate the tests set (tens
// of thousands a second), but goroutines that spin without a pause starve
// the renewals and tickers of the same process on a loaded machine (under
// -race, a million calls in 2 s left a 5 ms ticker 85 of its 400 ticks).
func hammer(t *testing.T, r *Repository, key string, g int, stop <-chan struct{}, calls, granted *atomic.Int64, wg *sync.WaitGroup) {
	for range g {
		n := 0 // this goroutine's calls
		until(wg, 1, stop, func() bool {
			if n++; n%64 == 0 {
				time.Sleep(time.Millisecond)
			}
			return try(t, r, key, calls, granted)
		})
	}
}

// loadFor starts load, lets it run for d, then stops it and waits for it.
func loadFor(d time.Duration, load func(stop <-chan struct{}, wg *sync.WaitGroup)) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	load(stop, &wg)
	time.Sleep(d) // the load's duration
	close(stop)
	wg.Wait()
}

func leaseRepo(t *testing.T, s *redistest.Server, opts ...Option) *Repository {
	return newRepo(t, newClient(t, s), leaseSpec, append([]Option{WithLeases(leaseRefresh), WithPrefix("lease:")}, opts...)...)
}

// TestLeasesBound: four replicas hammering one quota admit no more than the
// documented bound, rate × time + burst + one permit per replica, and use
// most of it (95% on 2 cores beside two CPU-bound processes).
func TestLeasesBound(t *testing.T) {
	s := redistest.Start(t)
	var calls, granted atomic.Int64
	start := time.Now()
	loadFor(1500*time.Millisecond, func(stop <-chan struct{}, wg *sync.WaitGroup) {
		for range 4 {
			hammer(t, leaseRepo(t, s), "k", 2, stop, &calls, &granted, wg)
		}
	})
	elapsed := time.Since(start)
	rate := float64(leaseSpec.Rate.N) / leaseSpec.Rate.Per.Seconds()
	bound := rate*elapsed.Seconds() + float64(leaseSpec.Limit) + 4
	got := float64(granted.Load())
	t.Logf("%d calls, %d granted in %v; bound %.0f", calls.Load(), granted.Load(), elapsed, bound)
	if got > bound {
		t.Fatalf("granted %.0f, more than rate × time + burst + replicas = %.0f", got, bound)
	}
	// Under CPU starvation a renewal may come after its lease ran out on
	// our clock, and the share is unused until it does: room for that.
	if got < 0.4*rate*elapsed.Seconds() {
		t.Fatalf("granted %.0f, less than 40%% of the %.0f the rate allows", got, rate*elapsed.Seconds())
	}
}

// TestLeasesFair: a replica asking for a tenth of the rate gets nearly all
// it asks, and a greedy one the rest; two greedy replicas split the rate.
func TestLeasesFair(t *testing.T) {
	s := redistest.Start(t)
	rate := float64(leaseSpec.Rate.N) / leaseSpec.Rate.Per.Seconds()
	t.Run("unequal", func(t *testing.T) {
		small, greedy := leaseRepo(t, s, WithPrefix("fair1:")), leaseRepo(t, s, WithPrefix("fair1:"))
		var calls, granted, gcalls, ggranted atomic.Int64
		tick := time.NewTicker(5 * time.Millisecond) // small asks for 200/s
		defer tick.Stop()
		loadFor(2*time.Second, func(stop <-chan struct{}, wg *sync.WaitGroup) {
			hammer(t, greedy, "k", 2, stop, &gcalls, &ggranted, wg)
			until(wg, 1, stop, func() bool {
				<-tick.C
				return try(t, small, "k", &calls, &granted)
			})
		})
		t.Logf("small: %d of %d; greedy: %d of %d", granted.Load(), calls.Load(), ggranted.Load(), gcalls.Load())
		if float64(granted.Load()) < 0.5*float64(calls.Load()) {
			t.Errorf("the small replica got %d of its %d calls: its share is not its demand", granted.Load(), calls.Load())
		}
		if float64(ggranted.Load()) < 0.6*(2*rate-float64(granted.Load())) {
			t.Errorf("the greedy replica got %d: the rest of the rate goes unused", ggranted.Load())
		}
	})
	t.Run("equal", func(t *testing.T) {
		a, b := leaseRepo(t, s, WithPrefix("fair2:")), leaseRepo(t, s, WithPrefix("fair2:"))
		var ac, ag, bc, bg atomic.Int64
		loadFor(2*time.Second, func(stop <-chan struct{}, wg *sync.WaitGroup) {
			hammer(t, a, "k", 2, stop, &ac, &ag, wg)
			hammer(t, b, "k", 2, stop, &bc, &bg, wg)
		})
		t.Logf("a: %d, b: %d; shares %d and %d", ag.Load(), bg.Load(), a.Share("k"), b.Share("k"))
		x, y := float64(ag.Load()), float64(bg.Load())
		if x < 0.35*(x+y) || y < 0.35*(x+y) {
			t.Errorf("a got %.0f and b %.0f: not a fair split", x, y)
		}
	})
}

// TestLeasesExpiry: the share of a replica that died (it stops renewing
// and cannot give its share back) returns to the others when its lease
// expires, three refreshes later.
func TestLeasesExpiry(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	c := newClient(t, s)
	dead, err := New(c, leaseSpec, WithLeases(leaseRefresh), WithPrefix("exp:"), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	live := leaseRepo(t, s, WithPrefix("exp:"))
	var calls, granted atomic.Int64
	var wg, deadWG sync.WaitGroup
	stop, deadStop := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	hammer(t, dead, "k", 1, deadStop, &calls, &granted, &deadWG)
	hammer(t, live, "k", 1, stop, &calls, &granted, &wg)
	key := dead.q.key("k")
	waitFor(t, "both replicas hold a share", func() bool {
		return dead.Share("k") > 0 && live.Share("k") > 0
	})
	// Kill it: its connection goes first, while it still asks (so no
	// renewal of an idle lease shrinks its share before it dies), and
	// Close cannot give the share back.
	c.Close()
	close(deadStop)
	deadWG.Wait()
	dead.Close()
	// Right after the kill the dead lease still stands (unless a starved
	// test already outlived it): nobody gave it back.
	if n, err := live.client.HLen(ctx, key).Result(); err != nil || n < 1 {
		t.Fatalf("right after the kill: %d lease fields, %v", n, err)
	}
	killed := time.Now()
	waitFor(t, "the dead lease expires and the live replica gets the whole rate", func() bool {
		n, err := live.client.HLen(ctx, key).Result()
		return err == nil && n == 1 && live.Share("k") == live.q.capacity
	})
	if took := time.Since(killed); took > 3*3*leaseRefresh+time.Second {
		t.Errorf("the dead share came back after %v", took)
	}
}

// waitFor polls cond for up to 5s (real time: the leases live in Redis).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeasesClose: Close gives the shares back at once, and lease mode
// accepts one gcra or token_bucket spec only.
func TestLeasesClose(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	r := leaseRepo(t, s, WithPrefix("close:"))
	if _, err := r.TryAcquire(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	key := r.q.key("k")
	if n, _ := r.client.HLen(ctx, key).Result(); n != 1 {
		t.Fatalf("%d lease fields, want 1", n)
	}
	r.Close()
	if n, _ := r.client.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("Close left the lease in Redis")
	}
	c := newClient(t, s)
	for _, spec := range []limiters.Spec{specs(10, time.Second)[limiters.AlgSlidingWindow], specs(10, time.Second)[limiters.AlgConcurrency]} {
		if _, err := New(c, spec, WithLeases(time.Second)); err == nil {
			t.Errorf("WithLeases took a %s spec", spec.Algorithm)
		}
	}
	if _, err := NewChain(c, []limiters.Spec{leaseSpec, leaseSpec}, WithLeases(time.Second)); err == nil {
		t.Error("WithLeases took a chain")
	}
}

// TestLeasesAllocs: a decision within a lease allocates nothing.
func TestLeasesAllocs(t *testing.T) {
	s := redistest.Start(t)
	r := leaseRepo(t, s, WithPrefix("allocs:"))
	ctx := context.Background()
	if _, err := r.TryAcquire(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { r.TryAcquire(ctx, "k", 1) }); n != 0 {
		t.Fatalf("%v allocs per decision, want 0", n)
	}
}

// TestLeasesAcquire: Acquire waits within the share, refuses at once a wait
// past its deadline, and refuses more than the share's burst.
func TestLeasesAcquire(t *testing.T) {
	s := redistest.Start(t)
	spec := limiters.Spec{Algorithm: limiters.AlgTokenBucket, Limit: 2, Rate: limiters.PerSecond(20)}
	r := newRepo(t, newClient(t, s), spec, WithLeases(leaseRefresh), WithPrefix("acq:"))
	ctx := ctxT(t)
	start := time.Now()
	for range 4 { // a new share starts empty: 4 permits at 20/s take 200ms
		if err := r.Acquire(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("4 permits at 20/s in %v", took)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if err := r.Acquire(short, "k", 1); !errors.Is(err, limiters.ErrRateLimited) {
		t.Errorf("a wait past the deadline: %v, want a *limiters.RejectedError", err)
	}
	if err := r.Acquire(ctx, "k", 3); !errors.Is(err, limiters.ErrExceedsLimit) {
		t.Errorf("3 of a burst of 2: %v, want ErrExceedsLimit", err)
	}
}

// TestLeasesRedisAway: while Redis is away a process keeps deciding within
// its share until its lease would have expired, then the fail mode decides;
// when Redis is back, so are the leases.
func TestLeasesRedisAway(t *testing.T) {
	s := redistest.Start(t)
	var open atomic.Int64
	r := leaseRepo(t, s, WithPrefix("away:"), WithFailMode(FailOpen), WithTimeout(100*time.Millisecond),
		WithObserver(func(e Event) {
			if e.Kind == EventFailOpen {
				open.Add(1)
			}
		}))
	ctx := ctxT(t)
	if _, err := r.TryAcquire(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := r.TryAcquire(ctx, "k", 1); err != nil || open.Load() != 0 {
		t.Fatalf("within the lease: %v, %d fail-open events; want a local decision", err, open.Load())
	}
	waitFor(t, "the fail mode decides", func() bool {
		d, err := r.TryAcquire(ctx, "k", 1)
		return err == nil && d.Allowed && open.Load() > 0
	})
	s.Restart(t)
	waitFor(t, "the lease is back", func() bool {
		before := open.Load()
		_, err := r.TryAcquire(ctx, "k", 1)
		return err == nil && open.Load() == before && r.Share("k") > 0
	})
}

// TestLeasesSmallRate: a rate of one permit per period is shared too
// (counted over a longer period, in at least 1024 parts): two greedy
// replicas both get some of one per 50ms, and no more together than the
// bound, nor much less than the rate.
func TestLeasesSmallRate(t *testing.T) {
	s := redistest.Start(t)
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 2, Rate: limiters.Rate{N: 1, Per: 50 * time.Millisecond}}
	a := newRepo(t, newClient(t, s), spec, WithLeases(leaseRefresh), WithPrefix("small:"))
	b := newRepo(t, newClient(t, s), spec, WithLeases(leaseRefresh), WithPrefix("small:"))
	var ac, ag, bc, bg atomic.Int64
	start := time.Now()
	loadFor(1500*time.Millisecond, func(stop <-chan struct{}, wg *sync.WaitGroup) {
		hammer(t, a, "k", 1, stop, &ac, &ag, wg)
		hammer(t, b, "k", 1, stop, &bc, &bg, wg)
	})
	allowed := 20 * time.Since(start).Seconds()
	bound := allowed + 2 + 2
	t.Logf("a: %d, b: %d; bound %.0f", ag.Load(), bg.Load(), bound)
	if ag.Load() == 0 || bg.Load() == 0 {
		t.Errorf("a got %d and b %d: one of them has no share", ag.Load(), bg.Load())
	}
	switch got := float64(ag.Load() + bg.Load()); {
	case got > bound:
		t.Errorf("granted %.0f, more than the bound %.0f", got, bound)
	case got < allowed/4:
		t.Errorf("granted %.0f, less than a quarter of the %.0f the rate allows: the shares do not add up to it", got, allowed)
	}
}
