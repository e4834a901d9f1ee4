package limiters

import (
	"testing"
	"time"
)

// TestHotPathsDoNotAllocate: an allowed TryAcquire, a peek, a denied
// TryAcquire with nobody waiting, and an Acquire that does not wait.
func TestHotPathsDoNotAllocate(t *testing.T) {
	for _, l := range []Limiter{
		NewTokenBucket(PerSecond(1e9), 1e9),
		NewGCRA(PerSecond(1e9), 1e9),
		NewFixedWindow(1e9, time.Hour),
		NewSlidingWindow(1e9, time.Hour),
		NewConcurrency(1e9),
	} {
		ctx := t.Context()
		if a := testing.AllocsPerRun(100, func() { l.TryAcquire(1) }); a != 0 {
			t.Errorf("%T TryAcquire(1): %v allocs", l, a)
		}
		if a := testing.AllocsPerRun(100, func() { l.TryAcquire(0) }); a != 0 {
			t.Errorf("%T TryAcquire(0): %v allocs", l, a)
		}
		if a := testing.AllocsPerRun(100, func() { _ = l.Acquire(ctx, 1) }); a != 0 {
			t.Errorf("%T Acquire: %v allocs", l, a)
		}
		l.Close()
	}
	empty := NewTokenBucket(Every(time.Hour), 1)
	empty.TryAcquire(1)
	if a := testing.AllocsPerRun(100, func() { empty.TryAcquire(1) }); a != 0 {
		t.Errorf("denied TryAcquire: %v allocs", a)
	}
}

func TestSpecJSONRejectsUnknownFields(t *testing.T) {
	var s Spec
	err := s.UnmarshalJSON([]byte(`{"algorithm":"concurrency","limit":1,"queue_limt":5}`))
	if err == nil {
		t.Fatal("a misspelt field was accepted")
	}
}
