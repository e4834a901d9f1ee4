package ideal

import (
	"testing"
	"time"
)

func TestLogs(t *testing.T) {
	for _, c := range []struct {
		name  string
		total int
		logs  []Log
		want  time.Duration
	}{
		// One log: a window's worth at once, the next a window on.
		{"one log", 80, []Log{{10, time.Second}}, 7 * time.Second},
		{"one window's worth", 10, []Log{{10, time.Second}}, 0},
		// @nestjs/throttler's short and long: 10 a second, 30 per 5 s.
		// Bursts at 0, 1 and 2 s fill the long log; its first ten leave
		// at 5 s, and so on: 0 1 2, 5 6 7, 10 11.
		{"short and long", 80, []Log{{10, time.Second}, {30, 5 * time.Second}}, 11 * time.Second},
		// The order of the logs does not matter, nor a log never reached.
		{"long first", 80, []Log{{30, 5 * time.Second}, {10, time.Second}, {1000, time.Hour}}, 11 * time.Second},
	} {
		if got := Logs(c.total, c.logs...); got != c.want {
			t.Errorf("%s: Logs(%d) = %v, want %v", c.name, c.total, got, c.want)
		}
	}
}
