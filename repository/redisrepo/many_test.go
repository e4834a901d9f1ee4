package redisrepo

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// TestTryAcquireMany: for every algorithm, a batch of 200 calls (tries of
// several keys, repeated, peeks, and calls beyond the limit) costs exactly
// one round trip, and decides each call as TryAcquire decides the same
// calls one by one, every Decision field alike, at one clock; WithBatch
// splits larger batches.
func TestTryAcquireMany(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	h := &roundTrips{}
	c.AddHook(h)
	ctx := ctxT(t)
	now := time.Now().UnixMicro()
	rng := rand.New(rand.NewPCG(3, 4))
	for alg, spec := range specs(5, time.Minute) {
		t.Run(alg, func(t *testing.T) {
			batched := newRepo(t, c, spec, WithPrefix("many:"), WithBatch(200))
			single := newRepo(t, c, spec, WithPrefix("one:"))
			for _, r := range []*Repository{batched, single} {
				r.SetClock(func() int64 { return now })
			}
			var calls []Call
			for i := range 200 {
				k := Call{Key: "k" + strconv.Itoa(rng.IntN(40)), N: 1 + rng.IntN(2)}
				switch i % 10 {
				case 0:
					k.N = 0
				case 1:
					k.N = 6 // beyond the limit
				}
				calls = append(calls, k)
			}
			batched.TryAcquireMany(ctx, calls[:2]) // loads the scripts
			before := h.single.Load() + h.pipes.Load()
			ds, errs := batched.TryAcquireMany(ctx, calls)
			if n := h.single.Load() + h.pipes.Load() - before; n != 1 {
				t.Fatalf("%d round trips for a batch of 200, want 1", n)
			}
			single.TryAcquireMany(ctx, calls[:2])
			allowed := 0
			for i, call := range calls {
				want, err := single.TryAcquire(ctx, call.Key, call.N)
				if err != nil || errs[i] != nil {
					t.Fatal(err, errs[i])
				}
				if ds[i] != want {
					t.Fatalf("call %d %+v: batched %+v, one by one %+v", i, call, ds[i], want)
				}
				if ds[i].Allowed && call.N > 0 {
					allowed++
				}
			}
			if allowed == 0 || allowed == 160 {
				t.Fatalf("%d of 160 tries allowed: the batch does not exercise the limits", allowed)
			}

			small := newRepo(t, c, spec, WithPrefix("small:"), WithBatch(64))
			small.TryAcquireMany(ctx, calls[:2])
			before = h.single.Load() + h.pipes.Load()
			small.TryAcquireMany(ctx, calls)
			if n := h.single.Load() + h.pipes.Load() - before; n != 4 {
				t.Fatalf("%d round trips for 200 calls by 64, want 4", n)
			}
		})
	}
}

// TestTryAcquireManyFailMode: while Redis is away the fail mode decides
// each call, as TryAcquire's; after Close every call fails with ErrClosed;
// a foreign value fails its own call only.
func TestTryAcquireManyFailMode(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	ctx := ctxT(t)
	spec := limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 2, Window: time.Minute}
	closed := newRepo(t, c, spec, WithPrefix("closed:"))
	open := newRepo(t, c, spec, WithPrefix("open:"), WithFailMode(FailOpen))
	calls := []Call{{Key: "a", N: 1}, {Key: "bad", N: 1}, {Key: "a", N: 1}, {Key: "a", N: 1}}
	if err := c.Set(ctx, closed.keys("bad")[0], "not ours", 0).Err(); err != nil {
		t.Fatal(err)
	}
	ds, errs := closed.TryAcquireMany(ctx, calls)
	if errs[0] != nil || errs[2] != nil || errs[3] != nil || !errors.Is(errs[1], ErrForeignValue) {
		t.Fatalf("errors %v, want the foreign value's on call 1 only", errs)
	}
	if !ds[0].Allowed || !ds[2].Allowed || ds[3].Allowed {
		t.Fatalf("decisions %+v, want two of key a allowed, then refused", ds)
	}

	s.Stop()
	_, errs = closed.TryAcquireMany(ctx, calls)
	for i, err := range errs {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("FailClosed call %d: %v, want ErrUnavailable", i, err)
		}
	}
	ds, errs = open.TryAcquireMany(ctx, calls)
	for i := range calls {
		if errs[i] != nil || !ds[i].Allowed {
			t.Errorf("FailOpen call %d: %+v %v, want allowed", i, ds[i], errs[i])
		}
	}

	closed.Close()
	_, errs = closed.TryAcquireMany(ctx, calls)
	for i, err := range errs {
		if !errors.Is(err, limiters.ErrClosed) {
			t.Errorf("after Close, call %d: %v", i, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, errs = open.TryAcquireMany(cctx, calls); !errors.Is(errs[0], context.Canceled) {
		t.Errorf("with a cancelled ctx: %v", errs[0])
	}
}

// TestTryAcquireManyCluster: on a Cluster a batch is one pipeline (one
// script call per hash tag, sent to each master at once), still deciding
// the calls of one key in order.
func TestTryAcquireManyCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	h := &roundTrips{}
	c.AddHook(h)
	ctx := ctxT(t)
	for alg, spec := range map[string]limiters.Spec{"gcra": specs(5, time.Minute)[limiters.AlgGCRA], "fixed_window": {Algorithm: limiters.AlgFixedWindow, Limit: 5, Window: time.Minute}} {
		t.Run(alg, func(t *testing.T) {
			r := newRepo(t, c, spec, WithPrefix(alg+":"), WithBatch(240))
			calls := make([]Call, 240) // six of each key: the sixth is refused
			for i := range calls {
				calls[i] = Call{Key: "k" + strconv.Itoa(i%40), N: 1}
			}
			warm := make([]Call, 40)
			for i := range warm {
				warm[i] = Call{Key: "warm" + strconv.Itoa(i), N: 1}
			}
			r.TryAcquireMany(ctx, warm) // loads the scripts on every master
			single, pipes := h.single.Load(), h.pipes.Load()
			ds, errs := r.TryAcquireMany(ctx, calls)
			if s, p := h.single.Load()-single, h.pipes.Load()-pipes; s != 0 || p != 1 {
				t.Fatalf("%d commands and %d pipelines for a batch, want one pipeline", s, p)
			}
			for i := range calls {
				if errs[i] != nil || ds[i].Allowed != (i < 200) || ds[i].Remaining != max(4-i/40, 0) {
					t.Fatalf("call %d (the %dth of its key): %+v %v", i, i/40, ds[i], errs[i])
				}
			}
		})
	}
}
