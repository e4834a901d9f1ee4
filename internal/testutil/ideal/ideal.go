// Package ideal computes the least time a client can take through a
// server's limits: the yardstick the model tests (the root package's
// modelsim tests) and the benchmark module's real-server runs divide
// their elapsed times by.
package ideal

import (
	"math"
	"time"
)

// Log is a sliding log of a client's requests: at most N in any Window
// (a request is in it for a Window after it came).
type Log struct {
	N      int
	Window time.Duration
}

// Logs is the least time total successes take through several logs of
// a client's requests at once (@nestjs/throttler's several throttlers),
// counted from the first request to the last: as many as all of them
// admit at the start, then, each time a log frees a place, as many as
// all admit then. Every log must admit at least one (N ≥ 1).
func Logs(total int, logs ...Log) time.Duration {
	var sent []time.Duration
	var t time.Duration
	for {
		k := total - len(sent)
		for _, l := range logs {
			in := 0
			for _, s := range sent {
				if s+l.Window > t {
					in++
				}
			}
			k = min(k, l.N-in)
		}
		for range k {
			sent = append(sent, t)
		}
		if len(sent) >= total {
			return t
		}
		next := time.Duration(math.MaxInt64)
		for _, l := range logs {
			for _, s := range sent {
				if e := s + l.Window; e > t && e < next {
					next = e
				}
			}
		}
		t = next
	}
}
