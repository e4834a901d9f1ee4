package limiters

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/waitq"
)

// coreOf is the core of one of this package's limiters.
func coreOf(l Limiter) *core {
	switch l := l.(type) {
	case *TokenBucket:
		return &l.core
	case *GCRA:
		return &l.core
	case *LeakyBucket:
		return &l.core
	case *FixedWindow:
		return &l.core
	case *SlidingWindow:
		return &l.core
	case *SlidingLog:
		return &l.core
	case *Concurrency:
		return &l.core
	case *rateLimiter:
		return &l.core
	}
	panic(fmt.Sprintf("coreOf: %T", l))
}

// deepLimiters are the algorithms, each with every permit taken, so that
// whoever comes next waits for an hour or more.
func deepLimiters() []struct {
	name string
	new  func() Limiter
} {
	return []struct {
		name string
		new  func() Limiter
	}{
		{"gcra", func() Limiter { return NewGCRA(PerHour(1), 1) }},
		{"token_bucket", func() Limiter { return NewTokenBucket(PerHour(1), 1) }},
		{"leaky_bucket", func() Limiter { return NewLeakyBucket(PerHour(1), 1<<30) }},
		{"fixed_window", func() Limiter { return NewFixedWindow(1, time.Hour) }},
		{"sliding_window", func() Limiter { return NewSlidingWindow(1, time.Hour) }},
		{"sliding_log", func() Limiter { return NewSlidingLog(1, time.Hour) }},
		{"concurrency", func() Limiter { return NewConcurrency(1) }},
	}
}

// queueDeep takes l's permits and queues w waiters of one permit at
// priority 0 (without goroutines: they never wait, they only stand in the
// queue), and checks that they are there.
func queueDeep(tb testing.TB, l Limiter, w int) {
	tb.Helper()
	if !l.TryAcquire(1).Allowed {
		tb.Fatal("the first permit was refused")
	}
	c := coreOf(l)
	c.mu.Lock()
	if c.q == nil {
		c.q = new(queue)
	}
	for range w {
		c.q.Push(waitq.NewWaiter(1, 0))
	}
	c.mu.Unlock()
	if got := l.Stats().Queued; got != w {
		tb.Fatalf("queued %d waiters, want %d", got, w)
	}
	// Waiters that queue one by one are projected one by one (an Acquire
	// with a deadline projects the queue it joins); these were pushed
	// behind the limiter's back, so a first call projects them all.
	l.TryAcquire(1)
}

// BenchmarkDeepQueue: what a denied TryAcquire, an Acquire whose deadline
// comes before its turn, and a higher-priority arrival (also refused for
// its deadline, after its place is found) cost with W waiters queued.
// Issue 21: at W = 100,000 at most 3× their cost at W = 1.
func BenchmarkDeepQueue(b *testing.B) {
	for _, a := range deepLimiters() {
		for _, w := range []int{1, 1000, 100000} {
			l := a.new()
			queueDeep(b, l, w)
			b.Run(fmt.Sprintf("%s/try/W=%d", a.name, w), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if l.TryAcquire(1).Allowed {
						b.Fatal("allowed past the queue")
					}
				}
			})
			if a.name == "concurrency" { // its turn is unknown: it would wait
				l.Close()
				continue
			}
			// Every turn here is more than half an hour away (a window of
			// an hour, or an hour for an hourly permit, per waiter ahead, and
			// the newcomer's own).
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			hi := WithPriority(ctx, 10)
			b.Run(fmt.Sprintf("%s/deadline/W=%d", a.name, w), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := l.Acquire(ctx, 1); !errors.Is(err, ErrRateLimited) {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/priority/W=%d", a.name, w), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := l.Acquire(hi, 1); !errors.Is(err, ErrRateLimited) {
						b.Fatal(err)
					}
				}
			})
			cancel()
			l.Close()
		}
	}
}
