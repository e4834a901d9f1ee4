package redisrepo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ single, pipes, piped atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.single.Add(1)
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipes.Add(1)
		h.piped.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestBatching: 64 goroutines calling at once share round trips: far fewer
// round trips than calls, and no pipeline larger than WithBatch.
func TestBatching(t *testing.T) {
	s := redistest.Start(t)
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) { testBatching(t, kind.make(t, s)) })
	}
}

func testBatching(t *testing.T, c *redis.Client) {
	h := &roundTrips{}
	c.AddHook(h)
	r := newRepo(t, c, limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 100, Rate: limiters.PerSecond(100)}, WithBatch(16))
	const calls = 64 * 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 64 {
		wg.Go(func() {
			<-start
			for i := range 20 {
				if _, err := r.TryAcquire(context.Background(), "k"+string(rune('a'+(g+i)%8)), 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	trips := h.single.Load() + h.pipes.Load()
	t.Logf("%d calls in %d round trips (%d pipelines of %.1f commands on average)",
		calls, trips, h.pipes.Load(), float64(h.piped.Load())/float64(max(h.pipes.Load(), 1)))
	if trips > calls/4 {
		t.Fatalf("%d calls took %d round trips: concurrent calls are not batched", calls, trips)
	}
	if h.pipes.Load() > 0 && h.piped.Load() > h.pipes.Load()*16 {
		t.Fatal("a pipeline exceeded WithBatch(16)")
	}
	// One caller alone is sent at once, without waiting for company (a
	// round trip: well under a second, even on a loaded machine).
	begin := time.Now()
	if _, err := r.TryAcquire(context.Background(), "alone", 1); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(begin); el > time.Second {
		t.Fatalf("a lone call took %v", el)
	}
}

// TestNoScriptReload: a Redis that forgot the scripts (SCRIPT FLUSH, a
// restart) gets them again, for single calls and pipelines alike.
func TestNoScriptReload(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	r := newRepo(t, c, limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 1000, Window: time.Hour})
	for round := range 2 {
		if err := c.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if _, err := r.TryAcquire(context.Background(), "k", 1); err != nil {
					t.Errorf("round %d after SCRIPT FLUSH: %v", round, err)
				}
			})
		}
		wg.Wait()
	}
	if d, _ := r.Peek(context.Background(), "k"); d.Remaining != 1000-32 {
		t.Fatalf("after 32 grants: %+v", d)
	}
}

// TestMergedBatch: calls sent together become one script call that decides
// each of them (the fast script's for GCRA, the main one's for the fixed
// window), with one key's foreign value failing that call only; on a
// Cluster the calls are grouped by hash tag.
func TestMergedBatch(t *testing.T) {
	s := redistest.Start(t)
	for _, alg := range []string{limiters.AlgGCRA, limiters.AlgFixedWindow} {
		t.Run(alg, func(t *testing.T) {
			c := newClient(t, s)
			h := &roundTrips{}
			c.AddHook(h)
			r := newRepo(t, c, specs(3, time.Hour)[alg], WithPrefix(alg+":"))
			if (r.fast != nil) != (alg == limiters.AlgGCRA) {
				t.Fatalf("fast script: %v", r.fast)
			}
			ctx := ctxT(t)
			if err := c.Set(ctx, r.keys("bad")[0], "not ours", 0).Err(); err != nil {
				t.Fatal(err)
			}
			script := r.script
			if r.fast != nil {
				script = r.fast.script
			}
			if err := script.Load(ctx, c).Err(); err != nil {
				t.Fatal(err)
			}
			var batch []*call
			for _, k := range []string{"a", "a", "b", "bad", "a", "a"} {
				f, keys, args := r.request(k, "try", 1, -1, "", nil)
				batch = append(batch, &call{script: r.script, fast: f, keys: keys, args: args, done: make(chan struct{})})
			}
			before := h.single.Load()
			r.b.exec(ctx, batch)
			if n := h.single.Load() - before; n != 1 {
				t.Fatalf("%d commands for one batch, want 1", n)
			}
			for i, want := range []int64{1, 1, 1, -1, 1, 0} {
				c := batch[i]
				if want < 0 {
					if !ours(c.err) {
						t.Errorf("call %d: %v, want the foreign value's error", i, c.err)
					}
					continue
				}
				v, _, err := ints(c.res)
				if err != nil || c.err != nil || v[0] != want {
					t.Errorf("call %d: %v %v, want allowed=%d", i, c.res, c.err, want)
				}
			}
			r.b.cluster = true
			if gs := r.b.groups(batch); len(gs) != 3 || len(gs[0].calls) != 4 || len(gs[1].calls) != 1 || len(gs[2].calls) != 1 {
				t.Errorf("on a Cluster: %d groups, want a, b and bad apart", len(gs))
			}
		})
	}
}

// TestBatchEqualsSingles: a batch decides each of its calls as the same
// calls sent one by one decide them, every Decision field alike, for every
// algorithm (the fast scripts' batches and the main script's), tries and
// peeks of several keys mixed, at one clock.
func TestBatchEqualsSingles(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	ctx := ctxT(t)
	now := time.Now().UnixMicro()
	rng := rand.New(rand.NewPCG(1, 2))
	for alg, spec := range specs(5, time.Minute) {
		t.Run(alg, func(t *testing.T) {
			batched := newRepo(t, c, spec, WithPrefix("batched:"))
			single := newRepo(t, c, spec, WithPrefix("single:"))
			for _, r := range []*Repository{batched, single} {
				r.SetClock(func() int64 { return now })
			}
			var calls []*call
			var want []any
			for range 40 {
				key, op, n := "k"+strconv.Itoa(rng.IntN(3)), "try", 1+rng.IntN(2)
				if rng.IntN(4) == 0 {
					op, n = "peek", 0
				}
				id := ""
				if alg == limiters.AlgConcurrency && op == "try" {
					id = batched.newID()
				}
				f, keys, args := batched.request(key, op, n, -1, id, nil)
				calls = append(calls, &call{script: batched.script, fast: f, keys: keys, args: args, done: make(chan struct{})})
				res, err := single.call(ctx, key, op, n, -1, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, res)
			}
			batched.b.exec(ctx, calls)
			for i, c := range calls {
				if c.err != nil || fmt.Sprint(c.res) != fmt.Sprint(want[i]) {
					t.Fatalf("call %d: batched %v %v, one by one %v", i, c.res, c.err, want[i])
				}
			}
		})
	}
}
