package repository

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

func gcraFactory(string) limiters.Limiter { return limiters.NewGCRA(limiters.PerSecond(1e9), 1e9) }

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "key-" + strconv.Itoa(i)
	}
	return ks
}

func benchOptions(b *testing.B, f func(b *testing.B, opts ...Option)) {
	b.Run("plain", func(b *testing.B) { f(b) })
	b.Run("idle+bound", func(b *testing.B) { f(b, WithIdleTimeout(time.Hour), WithMaxKeys(1<<20)) })
}

// existing is the fixture of the existing-key benchmarks: a Memory holding
// 1024 keys, and the keys.
func existing(b *testing.B, opts ...Option) (*Memory, []string) {
	m := NewMemory(gcraFactory, opts...)
	b.Cleanup(func() { m.Close() })
	ks := keys(1024)
	for _, k := range ks {
		m.Get(k)
	}
	if m.Len() != len(ks) {
		b.Fatalf("Len = %d, want %d", m.Len(), len(ks))
	}
	return m, ks
}

func BenchmarkTryAcquireExisting(b *testing.B) {
	benchOptions(b, func(b *testing.B, opts ...Option) {
		m, ks := existing(b, opts...)
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := m.TryAcquire(ctx, ks[i&1023], 1); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkTryAcquireExistingParallel(b *testing.B) {
	benchOptions(b, func(b *testing.B, opts ...Option) {
		m, ks := existing(b, opts...)
		ctx := context.Background()
		var worker atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(worker.Add(1)) * 97
			for pb.Next() {
				if _, err := m.TryAcquire(ctx, ks[i&1023], 1); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}

func BenchmarkNewKey(b *testing.B) {
	benchOptions(b, func(b *testing.B, opts ...Option) {
		m := NewMemory(gcraFactory, opts...)
		defer m.Close()
		ks := keys(b.N)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := m.TryAcquire(ctx, ks[i], 1); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if m.Len() != b.N && m.Len() != 1<<20 {
			b.Fatalf("Len = %d, want %d", m.Len(), b.N)
		}
	})
}

func BenchmarkNewKeyParallel(b *testing.B) {
	benchOptions(b, func(b *testing.B, opts ...Option) {
		m := NewMemory(gcraFactory, opts...)
		defer m.Close()
		ks := keys(b.N + 1)
		var next atomic.Int64
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := m.TryAcquire(ctx, ks[next.Add(1)], 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkNewKeyAtBound is a flood of unique keys at the WithMaxKeys bound:
// every new key evicts one.
func BenchmarkNewKeyAtBound(b *testing.B) {
	const bound = 10_000
	m := NewMemory(func(string) limiters.Limiter { return limiters.NewFixedWindow(10, time.Hour) }, WithMaxKeys(bound))
	defer m.Close()
	ks := keys(b.N + bound)
	ctx := context.Background()
	for _, k := range ks[:bound] {
		if _, err := m.TryAcquire(ctx, k, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := m.TryAcquire(ctx, ks[bound+i], 1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if m.Len() != bound {
		b.Fatalf("Len = %d, want %d", m.Len(), bound)
	}
}

// BenchmarkRetainedHeapPerKey measures the heap one idle key retains, at a
// million keys: a GCRA key used once (kept as a state: compact.go), one
// whose limiter Get asked for (a GCRA of its own), and the repository's own
// cost with a limiter it cannot keep as a state (every key sharing one
// fixed window).
func BenchmarkRetainedHeapPerKey(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	measure := func(b *testing.B, factory func(string) limiters.Limiter, get bool) {
		for b.Loop() {
			before := heap()
			m := NewMemory(factory, WithIdleTimeout(time.Hour), WithMaxKeys(2*n))
			var buf []byte
			for i := range n {
				buf = strconv.AppendInt(append(buf[:0], "key-"...), int64(i), 10)
				if get {
					m.Get(string(buf))
				} else if _, err := m.TryAcquire(ctx, string(buf), 1); err != nil {
					b.Fatal(err)
				}
			}
			if m.Len() != n {
				b.Fatalf("Len = %d, want %d", m.Len(), n)
			}
			after := heap()
			b.ReportMetric(float64(after-before)/n, "B/key")
			runtime.KeepAlive(m)
		}
	}
	b.Run("GCRA", func(b *testing.B) { measure(b, gcraFactory, false) })
	b.Run("GCRA-get", func(b *testing.B) { measure(b, gcraFactory, true) })
	shared := limiters.NewFixedWindow(1e9, time.Second)
	b.Run("repository-only", func(b *testing.B) { measure(b, func(string) limiters.Limiter { return shared }, false) })
	b.Run("limiter-only", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			ls := make([]limiters.Limiter, n)
			for i := range ls {
				ls[i] = gcraFactory("")
			}
			after := heap()
			b.ReportMetric(float64(after-before)/n, "B/key")
			runtime.KeepAlive(ls)
		}
	})
}

func heap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkLimiterTryAcquire is the baseline: the limiter alone, without a
// repository in front of it.
func BenchmarkLimiterTryAcquire(b *testing.B) {
	l := gcraFactory("")
	b.ReportAllocs()
	for b.Loop() {
		l.TryAcquire(1)
	}
}
