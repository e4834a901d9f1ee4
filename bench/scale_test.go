package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle/limiters"
)

// --- 8. Scaling: cost by the size of what is held (issue 21) ------------
//
// BenchmarkDeepQueue: with W requests already waiting, what a denied
// try and an acquire whose deadline comes before its turn cost:
//
//	gcra, fixed_window  ours: W goroutines blocked in Acquire; try is a
//	                    denied TryAcquire (its RetryAfter counts the W
//	                    ahead), deadline an Acquire refused at once with a
//	                    *RejectedError
//	xrate               x/time/rate: W outstanding reservations (its
//	                    "queue" is token debt); try is a denied Allow,
//	                    deadline a Wait refused at once ("would exceed
//	                    context deadline")
//	semaphore           x/sync/semaphore: W goroutines blocked in Acquire;
//	                    try is a denied TryAcquire (it has no deadline
//	                    check: an Acquire would wait out its deadline)
//
// BenchmarkStoreScale: a check of an existing key in a store holding K keys.

func BenchmarkDeepQueue(b *testing.B) {
	for _, w := range []int{1, 100, 10_000} {
		for _, impl := range []string{"xrate", "semaphore", "gcra", "fixed_window"} {
			b.Run(fmt.Sprintf("W=%d/impl=%s", w, impl), func(b *testing.B) { benchDeepQueue(b, impl, w) })
		}
	}
}

func benchDeepQueue(b *testing.B, impl string, w int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var try func() bool
	var deadline func(context.Context) error
	done := make(chan struct{}, w)
	defer func() {
		cancel()
		if impl != "xrate" {
			for range w {
				<-done
			}
		}
	}()
	switch impl {
	case "xrate":
		l := rate.NewLimiter(rate.Every(time.Hour), 1)
		l.Allow()
		now := time.Now()
		for range w {
			if !l.ReserveN(now, 1).OK() {
				b.Fatal("fixture: a reservation was refused")
			}
		}
		if tk := l.TokensAt(now); tk > -float64(w)+0.5 {
			b.Fatalf("fixture: %v tokens, want %d in debt", tk, w)
		}
		try = l.Allow
		deadline = func(ctx context.Context) error { return l.Wait(ctx) }
	case "semaphore":
		s := semaphore.NewWeighted(1)
		s.TryAcquire(1)
		before := runtime.NumGoroutine()
		for range w {
			go func() { _ = s.Acquire(ctx, 1); done <- struct{}{} }()
		}
		for runtime.NumGoroutine() < before+w {
			runtime.Gosched()
		}
		// The semaphore cannot say how many wait: give the last ones
		// time to reach its queue.
		time.Sleep(100 * time.Millisecond)
		try = func() bool { return s.TryAcquire(1) }
	default:
		var l limiters.Limiter
		if impl == "gcra" {
			l = limiters.NewGCRA(limiters.Every(time.Hour), 1)
		} else {
			l = limiters.NewFixedWindow(1, time.Hour)
		}
		defer l.Close()
		l.TryAcquire(1)
		for range w {
			go func() { _ = l.Acquire(ctx, 1); done <- struct{}{} }()
		}
		for l.Stats().Queued < w {
			runtime.Gosched()
		}
		try = func() bool { return l.TryAcquire(1).Allowed }
		deadline = func(ctx context.Context) error { return l.Acquire(ctx, 1) }
	}
	b.Run("op=try", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if try() {
				b.Fatal("allowed past the queue")
			}
		}
	})
	if deadline == nil {
		return
	}
	// Every turn is at least an hour away (an hourly permit, or a window
	// of an hour, for each waiter ahead and the newcomer itself).
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer dcancel()
	b.Run("op=deadline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := deadline(dctx); err == nil || errors.Is(err, context.DeadlineExceeded) && dctx.Err() != nil {
				b.Fatal("the deadline was not refused at once:", err)
			}
		}
	})
}

func BenchmarkStoreScale(b *testing.B) {
	for _, k := range []int{1 << 10, 1 << 17, 1 << 20} {
		for _, im := range storeImpls {
			b.Run(fmt.Sprintf("keys=%d/impl=%s", k, im.name), func(b *testing.B) { benchStoreScale(b, im, k) })
		}
	}
}

func benchStoreScale(b *testing.B, im storeImpl, keys int) {
	s := im.make(b, huge, time.Second)
	defer s.close()
	ks := ipKeys(keys, 0)
	for _, k := range ks {
		if ok, _ := s.check(k); !ok {
			b.Fatal("fixture: a first check was denied")
		}
	}
	if n := s.size(); n >= 0 && !s.forgets && n != keys {
		b.Fatalf("fixture: the store holds %d keys, want %d", n, keys)
	}
	mask := keys - 1
	runtime.GC()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if ok, _ := s.check(ks[i&mask]); !ok {
			b.Fatal("denied")
		}
		i += 7919 // a prime stride: every key, in an order the caches do not follow
	}
}
