package limiters

import (
	"testing"
	"time"
)

// TestWindowsNeverRollBack: a grant dated in the past (a late waker grants
// at the due time) must not take a window back and forget its count.
func TestWindowsNeverRollBack(t *testing.T) {
	win := int64(time.Second)
	f := fixedWindow{window: window{lim: 2, win: win}}
	f.take(10*win+1, 2) // window 10 is full
	f.take(9*win+5, 0)  // dated in window 9
	if f.start != 10*win || f.count != 2 {
		t.Fatalf("fixed window rolled back: start %d count %d", f.start, f.count)
	}
	if f.wait(10*win+2, 1) == 0 {
		t.Fatal("fixed window admits past its limit")
	}

	s := slidingWindow{window: window{lim: 2, win: win}}
	s.take(10*win+1, 2)
	s.take(9*win+5, 0)
	if s.start != 10*win || s.curr != 2 {
		t.Fatalf("sliding window rolled back: start %d curr %d", s.start, s.curr)
	}

	l := slidingLog{window: window{lim: 3, win: win}}
	l.take(10*win, 1)
	l.take(9*win, 1) // dated before the newest entry: logged at the newest time
	if a, b := l.at(0).at, l.at(l.count-1).at; l.count != 1 || a != b || l.total != 2 {
		t.Fatalf("sliding log out of order: %d entries, first %d last %d, total %d", l.count, a, b, l.total)
	}
}
