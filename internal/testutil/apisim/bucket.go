package apisim

import (
	"math"
	"time"
)

// bucket is a token bucket that refills continuously: capacity units over
// window, so an empty bucket is full again after window and a bucket missing
// k units is full again after k·window/capacity. It starts full. It is not
// safe for concurrent use: each simulator guards its buckets with its mutex.
type bucket struct {
	capacity int64
	window   time.Duration
	level    float64 // units available at last
	last     time.Time
}

func newBucket(capacity int64, window time.Duration) *bucket {
	return &bucket{capacity: capacity, window: window, level: float64(capacity)}
}

// advance brings the level up to date at now.
func (b *bucket) advance(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		refill := float64(now.Sub(b.last)) * float64(b.capacity) / float64(b.window)
		b.level = math.Min(float64(b.capacity), b.level+refill)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}

// remaining is the whole number of units available (advance first).
func (b *bucket) remaining() int64 {
	// The epsilon absorbs float error: 0.1+0.2 units of refill make 0.3.
	return int64(math.Floor(b.level + 1e-9))
}

// wait is how long until n units are available (advance first).
func (b *bucket) wait(n int64) time.Duration {
	missing := float64(n) - b.level
	if missing <= 1e-9 {
		return 0
	}
	return time.Duration(math.Ceil(missing * float64(b.window) / float64(b.capacity)))
}

// untilFull is how long until the bucket is full again (advance first).
func (b *bucket) untilFull() time.Duration {
	return b.wait(b.capacity)
}

// take removes n units; callers check remaining first.
func (b *bucket) take(n int64) { b.level -= float64(n) }

// spend removes up to n units without going below zero.
func (b *bucket) spend(n int64) { b.level = math.Max(0, b.level-float64(n)) }
