package redisrepo

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// TestClockSkew runs two replicas on one key whose local clocks disagree by
// about 26 years: one inside a synctest bubble, where time.Now is
// 2000-01-01, the other outside. Only Redis's clock counts, so together
// they grant exactly what one local limiter of the spec grants (the limit,
// but for the leaky bucket, which grants one at a time), and they report
// the same reset.
func TestClockSkew(t *testing.T) {
	s := redistest.Start(t)
	for alg, spec := range specs(skewLimit, dayWindow(t)) {
		t.Run(alg, func(t *testing.T) {
			granted, skewed, real := skew(t, s, alg, spec, false)
			local := chain([]limiters.Spec{spec})
			defer local.Close()
			want := 0
			for range 4 * skewCalls {
				if local.TryAcquire(1).Allowed {
					want++
				}
			}
			if granted != int64(want) {
				t.Fatalf("granted %d, want exactly %d", granted, want)
			}
			if d := skewed.ResetAfter - real.ResetAfter; d < -time.Second || d > time.Second {
				t.Errorf("resets disagree: skewed replica %v, the other %v", skewed.ResetAfter, real.ResetAfter)
			}
		})
	}
	// The control: were the scripts to take each replica's own clock, the
	// second replica would find the first one's window long past, and
	// admit the limit again.
	t.Run("control", func(t *testing.T) {
		spec := specs(skewLimit, dayWindow(t))[limiters.AlgFixedWindow]
		if granted, _, _ := skew(t, s, "control", spec, true); granted != 2*skewLimit {
			t.Fatalf("with local clocks: granted %d, want %d", granted, 2*skewLimit)
		}
	})
}

const skewLimit, skewCalls = 300, 200 // per replica, × 2 goroutines each: 800 calls

// skew runs two replicas of spec on one key, first one in a synctest bubble
// and then the other (so that the control is deterministic), each making
// 2 × skewCalls TryAcquire calls, and returns the
// permits granted and each replica's state at the end. With localClock the
// scripts take each replica's time.Now instead of TIME.
func skew(t *testing.T, s *redistest.Server, key string, spec limiters.Spec, localClock bool) (int64, limiters.Decision, limiters.Decision) {
	var granted atomic.Int64
	replica := func(t *testing.T) limiters.Decision {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		defer c.Close()
		r, err := New(c, spec, WithPrefix("skew:"), WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if localClock {
			r.SetClock(func() int64 { return time.Now().UnixMicro() })
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range skewCalls {
					if !try(t, r, key, nil, &granted) {
						return
					}
				}
			})
		}
		wg.Wait()
		d, err := r.Peek(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var skewed limiters.Decision
	synctest.Test(t, func(t *testing.T) {
		if y := time.Now().Year(); y != 2000 {
			t.Fatalf("the bubble's clock says %d", y)
		}
		skewed = replica(t)
	})
	other := replica(t)
	return granted.Load(), skewed, other
}
