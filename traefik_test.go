package throttle

import (
	"testing"
	"time"
)

// TestTraefikBucket: Traefik's rateLimit middleware (traefikBucket, from
// its source) says nothing on the answers it lets through and, on a
// refusal, how long until the next token exactly (X-Retry-In). Its rate is
// found from those waits: the first refusal's measured from when the
// refused request left, and a later refusal's from what the server took
// since the last pause.
func TestTraefikBucket(t *testing.T) {
	for _, tc := range []struct {
		name     string
		behave   string
		run      modelRun
		refusals int // at most; the first wave's are the server's to give
		ratio    float64
	}{
		// One request at a time: the first refusal (58 ms to the next
		// token) came from a request a quiet gate let through without
		// the time; dated from the answer it read as 141 ms between
		// tokens, not 100, and the run took 1.43× (gate.sentAt).
		{"one goroutine", "k/traefik rateLimit, burst 1", modelRun{rate: 10, workers: 1, total: 100}, 2, 1.05},
		// A burst of 5, 2 tokens a second: the first wave's burst reads
		// as a rate far too fast (5 in the half second before a token),
		// and the refusals after it, one success each, show the rate.
		// Tokens every half second make some of those spans a whole
		// second, which read as a fixed window of one a second had
		// halved the rate (1.98×; gate.finePace).
		{"slow bucket", "k/traefik rateLimit, burst n/2", modelRun{rate: 10, window: 5 * time.Second, workers: 10, total: 60}, 10, 1.10},
		// Ten goroutines against its default burst of 1: one of the
		// first wave got through, and the first refusal's wait, read
		// from its answer, spanned the ways there and back as well —
		// 7 a second, which the creep dwells short of for half a
		// minute: 1.42× for every seed of the wire's jitter but the
		// one the matrix runs (where the success came back last).
		// Less the round trip (gate.advance, owedWave): 1.01×.
		{"ten goroutines, jitter 1", "k/traefik rateLimit, burst 1", modelRun{rate: 10, workers: 10, total: 250, seed: 1}, 10, 1.05},
		{"ten goroutines, jitter 2", "k/traefik rateLimit, burst 1", modelRun{rate: 10, workers: 10, total: 250, seed: 2}, 10, 1.05},
		{"fifty goroutines", "k/traefik rateLimit, burst 1", modelRun{rate: 10, workers: 50, total: 250}, 50, 1.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := modelBehaviourOf(t, tc.behave)
			tc.run.latency, tc.run.jitter, tc.run.method = 20*time.Millisecond, 10*time.Millisecond, b.method
			r := runModel(t, b, tc.run)
			r.holds(t, tc.refusals, tc.ratio)
		})
	}
}
