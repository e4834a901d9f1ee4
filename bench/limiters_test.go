package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/throttlekit/throttle/limiters"
	"go.uber.org/ratelimit"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// Every benchmark is "ours vs theirs": BenchmarkX/mode=seq|par/impl=NAME,
// the peer first, so that `benchstat -col /impl` lines them up with the peer
// as the base column. The loops call the concrete methods directly (no
// closure per operation), so neither side pays an indirect call the other
// does not.

// huge is a rate and burst so large that no benchmark loop can empty the
// bucket: one permit per nanosecond, a billion in the bucket.
const huge = 1_000_000_000

var hugeRate = limiters.Rate{N: huge, Per: time.Second}

// check fails b when the loop saw an outcome other than the one its fixture
// promises (an allowed call denied, or the reverse).
func check(b *testing.B, misses int64, want string) {
	b.Helper()
	if misses != 0 {
		b.Fatalf("%d of %d calls were not %s", misses, b.N, want)
	}
}

// cpuMeter reports, as cpu-ns/op, the CPU time the process spent per
// operation. ns/op is wall time and grows when other processes take the
// machine's cores; cpu-ns/op mostly does not, so on a busy machine it is the
// steadier of the two for sequential runs. Under RunParallel it counts the
// CPU of every goroutine, so it is about GOMAXPROCS times the wall ns/op.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := cpuTime()
	return cpuMeter{t, ok}
}

func (m cpuMeter) report(b *testing.B) {
	t, ok := cpuTime()
	if m.ok && ok && b.N > 0 {
		b.ReportMetric(float64(t-m.start)/float64(b.N), "cpu-ns/op")
	}
}

// modes runs f once sequentially and once under b.RunParallel, as the
// sub-benchmarks mode=seq and mode=par.
func modes(b *testing.B, f func(b *testing.B, parallel bool)) {
	b.Run("mode=seq", func(b *testing.B) { f(b, false) })
	b.Run("mode=par", func(b *testing.B) { f(b, true) })
}

// --- 1. TryAcquire(1) that is allowed vs rate.Limiter.Allow() ------------

func BenchmarkTryAcquireAllowed(b *testing.B) {
	modes(b, func(b *testing.B, parallel bool) {
		b.Run("impl=xrate", func(b *testing.B) {
			l := rate.NewLimiter(huge, huge)
			benchAllow(b, parallel, l, true)
		})
		b.Run("impl=tokenbucket", func(b *testing.B) {
			l := limiters.NewTokenBucket(hugeRate, huge)
			benchTry(b, parallel, l, true)
		})
		b.Run("impl=gcra", func(b *testing.B) {
			l := limiters.NewGCRA(hugeRate, huge)
			benchTry(b, parallel, l, true)
		})
		// For reference: x/time/rate's shortcut for an infinite rate, which
		// skips the token arithmetic altogether.
		b.Run("impl=xrate-inf", func(b *testing.B) {
			l := rate.NewLimiter(rate.Inf, 1)
			benchAllow(b, parallel, l, true)
		})
	})
}

// --- 2. TryAcquire(1) that is denied vs a denied rate.Limiter.Allow() ----

func BenchmarkTryAcquireDenied(b *testing.B) {
	modes(b, func(b *testing.B, parallel bool) {
		b.Run("impl=xrate", func(b *testing.B) {
			l := rate.NewLimiter(rate.Every(time.Hour), 1)
			if !l.Allow() {
				b.Fatal("fixture: the first Allow must empty the bucket")
			}
			benchAllow(b, parallel, l, false)
		})
		b.Run("impl=tokenbucket", func(b *testing.B) {
			l := limiters.NewTokenBucket(limiters.Every(time.Hour), 1)
			if !l.TryAcquire(1).Allowed {
				b.Fatal("fixture: the first TryAcquire must empty the bucket")
			}
			benchTry(b, parallel, l, false)
		})
		b.Run("impl=gcra", func(b *testing.B) {
			l := limiters.NewGCRA(limiters.Every(time.Hour), 1)
			if !l.TryAcquire(1).Allowed {
				b.Fatal("fixture: the first TryAcquire must empty the bucket")
			}
			benchTry(b, parallel, l, false)
		})
	})
}

func benchAllow(b *testing.B, parallel bool, l *rate.Limiter, want bool) {
	b.ReportAllocs()
	var misses atomic.Int64
	cpu := startCPU()
	if !parallel {
		for b.Loop() {
			if l.Allow() != want {
				misses.Add(1)
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			var m int64
			for pb.Next() {
				if l.Allow() != want {
					m++
				}
			}
			misses.Add(m)
		})
	}
	cpu.report(b)
	check(b, misses.Load(), outcome(want))
}

// tryAcquirer is only the fixture's type: benchTry is instantiated for each
// concrete limiter so the call in the loop is a direct one.
type tryAcquirer interface {
	*limiters.TokenBucket | *limiters.GCRA
	TryAcquire(n int) limiters.Decision
}

func benchTry[L tryAcquirer](b *testing.B, parallel bool, l L, want bool) {
	b.ReportAllocs()
	var misses atomic.Int64
	cpu := startCPU()
	if !parallel {
		for b.Loop() {
			if l.TryAcquire(1).Allowed != want {
				misses.Add(1)
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			var m int64
			for pb.Next() {
				if l.TryAcquire(1).Allowed != want {
					m++
				}
			}
			misses.Add(m)
		})
	}
	cpu.report(b)
	check(b, misses.Load(), outcome(want))
}

func outcome(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// --- 3. Acquire(ctx, 1) that does not wait vs rate.Limiter.Wait(ctx) -----

func BenchmarkAcquireNoWait(b *testing.B) {
	// A cancellable context, as a request's would be; nothing cancels it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	modes(b, func(b *testing.B, parallel bool) {
		b.Run("impl=xrate", func(b *testing.B) {
			l := rate.NewLimiter(huge, huge)
			benchErr(b, parallel, func() error { return l.Wait(ctx) })
		})
		b.Run("impl=tokenbucket", func(b *testing.B) {
			l := limiters.NewTokenBucket(hugeRate, huge)
			benchErr(b, parallel, func() error { return l.Acquire(ctx, 1) })
		})
		b.Run("impl=gcra", func(b *testing.B) {
			l := limiters.NewGCRA(hugeRate, huge)
			benchErr(b, parallel, func() error { return l.Acquire(ctx, 1) })
		})
		// For reference: uber's Take has no context and cannot fail; at a
		// billion per second it never sleeps.
		b.Run("impl=uber", func(b *testing.B) {
			l := ratelimit.New(huge)
			benchErr(b, parallel, func() error { l.Take(); return nil })
		})
	})
}

// benchErr runs op, which must not fail. The call through a func value
// costs the same on every side (about a nanosecond); the wait paths being
// compared cost tens.
func benchErr(b *testing.B, parallel bool, op func() error) {
	b.ReportAllocs()
	var misses atomic.Int64
	cpu := startCPU()
	if !parallel {
		for b.Loop() {
			if op() != nil {
				misses.Add(1)
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			var m int64
			for pb.Next() {
				if op() != nil {
					m++
				}
			}
			misses.Add(m)
		})
	}
	cpu.report(b)
	check(b, misses.Load(), "granted without error")
}

// --- 4. Concurrency vs semaphore.Weighted --------------------------------

// slots is more permits than the goroutines of a benchmark ever hold, so
// nothing waits: these are the uncontended paths.
const slots = 1 << 20

func BenchmarkConcurrencyTryAcquireRelease(b *testing.B) {
	modes(b, func(b *testing.B, parallel bool) {
		b.Run("impl=semaphore", func(b *testing.B) {
			s := semaphore.NewWeighted(slots)
			benchOK(b, parallel, func() bool {
				if !s.TryAcquire(1) {
					return false
				}
				s.Release(1)
				return true
			})
		})
		b.Run("impl=concurrency", func(b *testing.B) {
			c := limiters.NewConcurrency(slots)
			benchOK(b, parallel, func() bool {
				if !c.TryAcquire(1).Allowed {
					return false
				}
				c.Release(1)
				return true
			})
			if got := c.Stats().Available; got != slots {
				b.Fatalf("%d permits available after the run, want %d", got, slots)
			}
		})
	})
}

func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	modes(b, func(b *testing.B, parallel bool) {
		b.Run("impl=semaphore", func(b *testing.B) {
			s := semaphore.NewWeighted(slots)
			benchOK(b, parallel, func() bool {
				if s.Acquire(ctx, 1) != nil {
					return false
				}
				s.Release(1)
				return true
			})
		})
		b.Run("impl=concurrency", func(b *testing.B) {
			c := limiters.NewConcurrency(slots)
			benchOK(b, parallel, func() bool {
				if c.Acquire(ctx, 1) != nil {
					return false
				}
				c.Release(1)
				return true
			})
			if got := c.Stats().Available; got != slots {
				b.Fatalf("%d permits available after the run, want %d", got, slots)
			}
		})
	})
}

func benchOK(b *testing.B, parallel bool, op func() bool) {
	b.ReportAllocs()
	var misses atomic.Int64
	cpu := startCPU()
	if !parallel {
		for b.Loop() {
			if !op() {
				misses.Add(1)
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			var m int64
			for pb.Next() {
				if !op() {
					m++
				}
			}
			misses.Add(m)
		})
	}
	cpu.report(b)
	check(b, misses.Load(), "acquired")
}

// --- Reference: the clock reads the two sides pay on every call ----------

var sinkNS int64

// BenchmarkClock measures the clock read each side makes per call: ours
// reads only the monotonic clock (time.Since of a fixed origin); x/time/rate
// calls time.Now, which reads the wall clock as well. On a VM the clock is a
// large share of a limiter call, so this is the floor under both.
func BenchmarkClock(b *testing.B) {
	origin := time.Now()
	b.Run("impl=time.Now", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			sinkNS += time.Now().UnixNano()
		}
		cpu.report(b)
	})
	b.Run("impl=time.Since", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			sinkNS += int64(time.Since(origin))
		}
		cpu.report(b)
	})
}

// --- 5. Fairness ----------------------------------------------------------

var fairness = flag.Bool("fairness", false, "run TestFairness: 3 s of real time per limiter")

const (
	fairWorkers = 20
	fairRate    = 100 // per second, burst 1
	fairFor     = 3 * time.Second
)

// fairImpls are the blocking acquires compared for fairness. Each makes a
// fresh limiter of fairRate per second with a burst of 1.
var fairImpls = []struct {
	name string
	make func() (acquire func(ctx context.Context) error, close func())
}{
	{"xrate", func() (func(context.Context) error, func()) {
		l := rate.NewLimiter(fairRate, 1)
		return l.Wait, func() {}
	}},
	{"tokenbucket", func() (func(context.Context) error, func()) {
		l := limiters.NewTokenBucket(limiters.PerSecond(fairRate), 1)
		return func(ctx context.Context) error { return l.Acquire(ctx, 1) }, func() { l.Close() }
	}},
}

// fairTrial starts fairWorkers goroutines at once, each calling acquire in
// a loop until it fails (the shared deadline, fairFor from the start), and
// returns how many grants each one got.
func fairTrial(acquire func(ctx context.Context) error) []int {
	counts := make([]int, fairWorkers)
	ctx, cancel := context.WithTimeout(context.Background(), fairFor)
	defer cancel()
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range counts {
		done.Go(func() {
			start.Wait()
			for acquire(ctx) == nil {
				counts[i]++
			}
		})
	}
	start.Done()
	done.Wait()
	return counts
}

// fairStats summarizes per-goroutine grant counts: the smallest, the
// largest, the total, and Jain's fairness index (Σx)²/(n·Σx²), which is 1
// when every goroutine got the same and 1/n when one got everything.
func fairStats(counts []int) (lo, hi, total int, jain float64) {
	var sum, sq float64
	for _, c := range counts {
		total += c
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq > 0 {
		jain = sum * sum / (float64(len(counts)) * sq)
	}
	return slices.Min(counts), slices.Max(counts), total, jain
}

// TestFairness runs only with -fairness (it takes 3 s of real time per
// limiter): go test -run=TestFairness -fairness -v .
func TestFairness(t *testing.T) {
	if !*fairness {
		t.Skip("takes real time; run with -fairness")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	// A perfect limiter grants its burst plus fairRate per second.
	ideal := 1 + int(fairRate*fairFor/time.Second)
	fmt.Fprintf(tw, "impl\tgoroutines\tgrants\tideal\tmin\tmax\tJain\t\n")
	for _, im := range fairImpls {
		acquire, closeFn := im.make()
		lo, hi, total, jain := fairStats(fairTrial(acquire))
		closeFn()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.4f\t\n", im.name, fairWorkers, total, ideal, lo, hi, jain)
		if jain < 0.99 {
			t.Errorf("%s: Jain's index %.4f, want ≥ 0.99", im.name, jain)
		}
	}
	tw.Flush()
}

// BenchmarkFairness reports the same trial as metrics, so benchstat can take
// medians over -count runs: one 3 s trial per run (b.Loop stops after one
// iteration, which already exceeds any sensible -benchtime). ns/op is
// suppressed: it would only be the trial's length.
func BenchmarkFairness(b *testing.B) {
	for _, im := range fairImpls {
		b.Run("impl="+im.name, func(b *testing.B) {
			acquire, closeFn := im.make()
			defer closeFn()
			var counts []int
			for b.Loop() {
				counts = fairTrial(acquire)
			}
			lo, hi, total, jain := fairStats(counts)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(jain, "jain")
			b.ReportMetric(float64(lo), "min-grants")
			b.ReportMetric(float64(hi), "max-grants")
			b.ReportMetric(float64(total), "grants")
		})
	}
}
