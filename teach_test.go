package throttle

import (
	"testing"
	"time"
)

// TestWholeWindows: the span between the ends of two waits is read as
// whole windows only within windowDoubt of a whole number of seconds.
func TestWholeWindows(t *testing.T) {
	for _, tc := range []struct {
		span time.Duration
		want bool
	}{
		{0, false},
		{200 * time.Millisecond, false},
		{949 * time.Millisecond, false},
		{950 * time.Millisecond, true},
		{time.Second, true},
		{1050 * time.Millisecond, true},
		{1051 * time.Millisecond, false},
		{1500 * time.Millisecond, false},
		{1980 * time.Millisecond, true},
		{60*time.Second + 20*time.Millisecond, true},
		{-time.Second, false},
	} {
		if got := wholeWindows(tc.span); got != tc.want {
			t.Errorf("wholeWindows(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
}
