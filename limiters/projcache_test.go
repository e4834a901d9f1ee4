package limiters

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// freshProjection projects ahead from scratch, as before the cache.
func freshProjection(c *core, now int64, ahead waiters, n int) int64 {
	switch a := c.alg.(type) {
	case *fixedWindow:
		return projectCopy(*a, now, ahead, n)
	case *slidingWindow:
		return projectCopy(*a, now, ahead, n)
	case *slidingLog:
		if ahead.first == nil {
			return a.wait(now, n)
		}
		return projectCopy(cloneLog(*a), now, ahead, n)
	}
	panic("freshProjection: not a window")
}

// TestCachedProjectionsAreFresh: while waiters join, are granted, give up
// (before and after their grant) and the limit changes, the window
// algorithms' cached projection of the whole queue is what projecting it
// from scratch says, to the nanosecond, for a newcomer of every size.
func TestCachedProjectionsAreFresh(t *testing.T) {
	for _, mk := range []func() Limiter{
		func() Limiter { return NewFixedWindow(4, time.Second) },
		func() Limiter { return NewSlidingWindow(4, time.Second) },
		func() Limiter { return NewSlidingLog(4, time.Second) },
	} {
		synctest.Test(t, func(t *testing.T) {
			l := mk()
			c := coreOf(l)
			rng := rand.New(rand.NewPCG(1, 2))
			var wg sync.WaitGroup
			checks := 0
			for step := range 400 {
				switch rng.IntN(8) {
				case 0: // time passes
					time.Sleep(time.Duration(rng.IntN(700)) * time.Millisecond)
				case 1: // the limit changes
					if step%40 == 0 {
						l.(Reconfigurable).Reconfigure(Spec{Algorithm: c.alg.algorithm(), Limit: 3 + rng.IntN(3), Window: time.Second})
					}
				default: // a waiter joins, and may give up
					n := 1 + rng.IntN(3)
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Millisecond)
					wg.Go(func() {
						defer cancel()
						_ = l.Acquire(ctx, n)
					})
				}
				synctest.Wait()
				c.mu.Lock()
				now := c.clock(c.alg.now())
				for n := 1; n <= 3; n++ {
					ahead := c.ahead(0)
					if n > c.alg.limit() {
						continue
					}
					want := freshProjection(c, now, ahead, n)
					if got := c.alg.project(now, ahead, n); got != want {
						c.mu.Unlock()
						t.Fatalf("%s step %d, %d queued, n %d: cached %d, fresh %d", c.alg.algorithm(), step, ahead.count, n, got, want)
					}
					checks++
				}
				c.mu.Unlock()
			}
			l.Close()
			wg.Wait()
			if checks < 1000 {
				t.Fatalf("only %d checks", checks)
			}
		})
	}
}
