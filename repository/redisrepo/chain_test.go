package redisrepo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// TestChainDifferential: a chain decides as limiters.Chain of the same
// specs decides, all or nothing, on random traces.
func TestChainDifferential(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	chains := [][]limiters.Spec{
		{
			{Algorithm: limiters.AlgGCRA, Limit: 4, Rate: limiters.Rate{N: 5, Per: time.Second}},
			{Algorithm: limiters.AlgFixedWindow, Limit: 9, Window: 3 * time.Second},
		},
		{
			{Algorithm: limiters.AlgSlidingLog, Limit: 5, Window: time.Second},
			{Algorithm: limiters.AlgSlidingWindow, Limit: 20, Window: 5 * time.Second},
			{Algorithm: limiters.AlgTokenBucket, Limit: 3, Rate: limiters.Rate{N: 4, Per: time.Second}},
		},
	}
	for i, specs := range chains {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			trace := make([]step, 300)
			for j := range trace {
				trace[j] = step{dt: time.Duration(rng.Int64N(int64(300*time.Millisecond))) / time.Microsecond * time.Microsecond, n: rng.IntN(3)}
			}
			r, err := NewChain(c, specs, WithPrefix(fmt.Sprintf("chain%d:", i)), WithTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var now time.Duration
			r.SetClock(func() int64 { return bubbleEpoch.Add(now).UnixMicro() })
			got := make([]limiters.Decision, len(trace))
			for j, st := range trace {
				now += st.dt
				if got[j], err = r.TryAcquire(ctxT(t), "k", st.n); err != nil {
					t.Fatal(err)
				}
			}
			mustExercise(t, trace, got)
			synctest.Test(t, func(t *testing.T) {
				lim := chain(specs)
				defer lim.Close()
				for j, st := range trace {
					time.Sleep(st.dt)
					d := lim.TryAcquire(st.n)
					d.ResetAfter, d.RetryAfter = ceilUS(d.ResetAfter), ceilUS(d.RetryAfter)
					if got[j] != d {
						t.Fatalf("step %d (%+v): redis %+v, local chain %+v", j, st, got[j], d)
					}
				}
			})
		})
	}
}

// TestQueueFull: the bucket algorithms queue at most QueueLimit reserved
// permits (the leaky bucket: its capacity by default); more is ErrQueueFull
// at once.
func TestQueueFull(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	// One permit every 5 s: a waiter that takes a while to reserve (a
	// loaded machine has taken over 0.5 s) still finds its reservation
	// more than half an interval beyond the one before. The waiters are
	// cancelled, never waited for.
	const iv = 5 * time.Second
	for _, spec := range []limiters.Spec{
		{Algorithm: limiters.AlgLeakyBucket, Limit: 3, Rate: limiters.Every(iv)},
		{Algorithm: limiters.AlgGCRA, Limit: 1, Rate: limiters.Every(iv), QueueLimit: 3},
		{Algorithm: limiters.AlgTokenBucket, Limit: 1, Rate: limiters.Every(iv), QueueLimit: 3},
	} {
		t.Run(spec.Algorithm, func(t *testing.T) {
			r := newRepo(t, c, spec, WithPrefix("q-"+spec.Algorithm+":"))
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			if err := r.Acquire(ctx, "k", 1); err != nil { // granted now
				t.Fatal(err)
			}
			done := make(chan error, 3)
			for i := range 3 {
				go func() { done <- r.Acquire(ctx, "k", 1) }() // queued: 1, 2, 3 intervals away
				deadline := time.Now().Add(2 * iv)
				for { // wait until it has reserved: the wait grows to about i+2 intervals
					d, _ := r.Peek(ctx, "k")
					if d.RetryAfter > time.Duration(i+1)*iv+iv/2 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("waiter %d never reserved: %+v", i, d)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if err := r.Acquire(ctx, "k", 1); !errors.Is(err, limiters.ErrQueueFull) {
				t.Fatalf("a fourth waiter: %v, want ErrQueueFull", err)
			}
			cancel()
			for range 3 {
				<-done
			}
		})
	}
}

// TestProductionClock: outside tests the scripts read Redis's TIME: the
// clock argument is empty, so replicas with skewed clocks agree.
func TestProductionClock(t *testing.T) {
	s := redistest.Start(t)
	r := newRepo(t, newClient(t, s), limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1, Rate: limiters.PerSecond(1)})
	if clock := r.args("try", 1, -1, "", nil)[2]; clock != "" {
		t.Fatalf("clock argument %q, want empty (TIME)", clock)
	}
}
