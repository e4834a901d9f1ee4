package throttle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttlekit/throttle/feedbackstore"
)

// TestMemoryFeedbackStoreLateJoiner: a subscriber that joins during a
// pause hears of it at once; one that joins after its end, or after a
// Resume, hears nothing.
func TestMemoryFeedbackStoreLateJoiner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryFeedbackStore()
		until := time.Now().Add(2 * time.Second)
		if err := s.Pause(ctx, "a", "x", until); err != nil {
			t.Fatal(err)
		}
		if err := s.Pause(ctx, "b", "x", time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.Resume(ctx, "b", "x"); err != nil {
			t.Fatal(err)
		}
		var heard []feedbackstore.Notice
		stop := s.Subscribe(func(n feedbackstore.Notice) { heard = append(heard, n) })
		stop()
		if len(heard) != 1 || heard[0].Key != "a" || !heard[0].Until.Equal(until) {
			t.Fatalf("a late subscriber heard %+v, want the pause of a until %v", heard, until)
		}
		time.Sleep(3 * time.Second)
		heard = nil
		stop = s.Subscribe(func(n feedbackstore.Notice) { heard = append(heard, n) })
		stop()
		if len(heard) != 0 {
			t.Fatalf("after the pause ended a subscriber heard %+v", heard)
		}
	})
}
