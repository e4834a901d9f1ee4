package limiters_test

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

func ExampleNewTokenBucket() {
	// Bursts of up to 3, refilled at 1 an hour: the fourth request is refused.
	lim := limiters.NewTokenBucket(limiters.PerHour(1), 3)
	defer lim.Close()
	for i := range 4 {
		d := lim.TryAcquire(1)
		fmt.Printf("request %d: allowed=%v remaining=%d/%d\n", i+1, d.Allowed, d.Remaining, d.Limit)
	}
	s := lim.Stats()
	fmt.Printf("acquired=%d rejected=%d\n", s.Acquired, s.Rejected)
	// Output:
	// request 1: allowed=true remaining=2/3
	// request 2: allowed=true remaining=1/3
	// request 3: allowed=true remaining=0/3
	// request 4: allowed=false remaining=0/3
	// acquired=3 rejected=1
}

func ExampleChain() {
	// 100 an hour, and at most 2 in flight: both must admit.
	lim := limiters.Chain(
		limiters.NewTokenBucket(limiters.PerHour(100), 100),
		limiters.NewConcurrency(2),
	)
	defer lim.Close()
	for range 3 {
		d := lim.TryAcquire(1)
		fmt.Printf("allowed=%v remaining=%d/%d\n", d.Allowed, d.Remaining, d.Limit)
	}
	lim.Release(1) // one request finished
	d := lim.TryAcquire(1)
	fmt.Printf("after Release: allowed=%v\n", d.Allowed)
	// Output:
	// allowed=true remaining=1/2
	// allowed=true remaining=0/2
	// allowed=false remaining=0/2
	// after Release: allowed=true
}

func ExampleNewConcurrency() {
	sem := limiters.NewConcurrency(2)
	defer sem.Close()
	ctx := context.Background()
	if err := sem.Acquire(ctx, 2); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("in flight:", 2-sem.Stats().Available)
	fmt.Println("third allowed:", sem.TryAcquire(1).Allowed)
	sem.Release(2)
	fmt.Println("in flight after Release:", 2-sem.Stats().Available)
	fmt.Println(sem.Acquire(ctx, 3))
	// Output:
	// in flight: 2
	// third allowed: false
	// in flight after Release: 0
	// limiters: request exceeds limit
}

func ExampleParseRate() {
	for _, s := range []string{"10/s", "600/m", "100/30s", "5000/d", "ten a second"} {
		r, err := limiters.ParseRate(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("%s: %d per %v, one every %v\n", r, r.N, r.Per, r.Interval())
	}
	// Output:
	// 10/s: 10 per 1s, one every 100ms
	// 600/m: 600 per 1m0s, one every 100ms
	// 100/30s: 100 per 30s, one every 300ms
	// 5000/d: 5000 per 24h0m0s, one every 17.28s
	// error: limiters: invalid rate "ten a second": want N/unit, e.g. "10/s"
}

// A limit changed at run time: the window keeps its count.
func ExampleReconfigurable() {
	spec := limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 3, Window: time.Hour}
	lim, err := spec.New()
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	lim.TryAcquire(2)
	fmt.Println("before:", lim.TryAcquire(0).Remaining, "of", lim.TryAcquire(0).Limit)

	spec.Limit = 10 // a plan upgrade
	if err := lim.(limiters.Reconfigurable).Reconfigure(spec); err != nil {
		panic(err)
	}
	fmt.Println("after:", lim.TryAcquire(0).Remaining, "of", lim.TryAcquire(0).Limit)

	spec.Algorithm = limiters.AlgSlidingLog
	fmt.Println(lim.(limiters.Reconfigurable).Reconfigure(spec))
	// Output:
	// before: 1 of 3
	// after: 8 of 10
	// limiters: spec algorithm: a fixed_window limiter cannot become "sliding_log"; build a new one
}

// A waiter of higher priority goes first.
func ExampleWithPriority() {
	lim := limiters.NewConcurrency(1)
	defer lim.Close()
	lim.TryAcquire(1) // the one permit is held

	granted := make(chan string, 2)
	wait := func(ctx context.Context, name string, queued int) {
		go func() {
			if lim.Acquire(ctx, 1) == nil {
				granted <- name
			}
		}()
		for lim.Stats().Queued < queued { // until it waits
			runtime.Gosched()
		}
	}
	wait(context.Background(), "batch job", 1)
	wait(limiters.WithPriority(context.Background(), 10), "user request", 2)

	lim.Release(1)
	fmt.Println("first:", <-granted)
	lim.Release(1)
	fmt.Println("then:", <-granted)
	// Output:
	// first: user request
	// then: batch job
}
