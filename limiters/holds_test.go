package limiters

import (
	"context"
	"testing"
)

// releaseFree is a limiter of another package that does not say whether it
// holds permits.
type releaseFree struct{ Limiter }

func TestHoldsPermits(t *testing.T) {
	tests := []struct {
		name string
		l    Limiter
		want bool
	}{
		{"token bucket", NewTokenBucket(PerSecond(1), 1), false},
		{"gcra", NewGCRA(PerSecond(1), 1), false},
		{"leaky bucket", NewLeakyBucket(PerSecond(1), 1), false},
		{"fixed window", NewFixedWindow(1, 1e9), false},
		{"sliding window", NewSlidingWindow(1, 1e9), false},
		{"sliding log", NewSlidingLog(1, 1e9), false},
		{"concurrency", NewConcurrency(1), true},
		{"chain of rates", Chain(NewGCRA(PerSecond(1), 1), NewFixedWindow(1, 1e9)), false},
		{"chain with concurrency", Chain(NewGCRA(PerSecond(1), 1), NewConcurrency(2)), true},
		{"foreign limiter", releaseFree{NewGCRA(PerSecond(1), 1)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.l.Close()
			if got := HoldsPermits(tt.l); got != tt.want {
				t.Fatalf("HoldsPermits = %v, want %v", got, tt.want)
			}
			_ = tt.l.Acquire(context.Background(), 0)
		})
	}
}
