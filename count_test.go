package throttle

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
)

// TestCountMatchesApply: learnQuotas' short way for an answer that only
// counts a far window down (quota.counts, count) leaves every gate in the
// state the long way (resetFor, within, apply) leaves it in. Two gates
// learn the same answers, one with the short way and one without; the
// answers are GitHub's and their neighbours': windows of two hours, one, 16 and 9
// minutes and 90 s long, counts that fall, jump and start over, resets
// in whole seconds and finer, answers that come back out of order, a
// second quota beside the first, refusals, and horizons (maxPause) of a
// minute, 15 minutes and two hours.
func TestCountMatchesApply(t *testing.T) {
	short := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 18))
		maxPause := []time.Duration{time.Minute, DefaultMaxPause, 2 * time.Hour}[rng.IntN(3)]
		fast, ref := &gate{key: "a", maxPause: maxPause}, &gate{key: "a", maxPause: maxPause}
		ref.mark(longWay)
		window := []time.Duration{time.Hour, 2 * time.Hour, 16 * time.Minute, 9 * time.Minute, 90 * time.Second}[rng.IntN(5)]
		limit := []int64{5000, 100, 60, 1e9}[rng.IntN(4)]
		now := t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		end := t0.Add(window)
		left := limit - 1
		fine := rng.IntN(4) == 0
		for step := range 200 {
			switch r := rng.IntN(100); {
			case r < 60:
				now = now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
			case r < 95:
				now = now.Add(time.Duration(rng.IntN(30)) * time.Second)
			default:
				now = now.Add(time.Duration(rng.IntN(20)) * time.Minute)
			}
			for !now.Before(end) {
				end, left = end.Add(window), limit-1
			}
			switch r := rng.IntN(100); {
			case r < 80:
				left = max(left-int64(rng.IntN(4)), 0)
			case r < 90:
				left = min(left+int64(rng.IntN(3)), limit) // an answer to an earlier request
			default:
				left = max(left-limit/3, 0)
			}
			reset := end
			if fine {
				reset = reset.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
			}
			status := 200
			if left == 0 && rng.IntN(2) == 0 {
				status = 429
			}
			qs := []headers.Quota{{Name: "core", Limit: limit, Remaining: left, Reset: reset}}
			if rng.IntN(5) == 0 {
				qs = append(qs, headers.Quota{Name: "search", Limit: 30, Remaining: int64(rng.IntN(30)), Reset: now.Add(time.Duration(1+rng.IntN(60)) * time.Second).Truncate(time.Second)})
			}
			sent := now.Add(-time.Duration(rng.IntN(300)) * time.Millisecond)
			if rng.IntN(10) == 0 {
				sent = time.Time{} // let through by a quiet gate
			}
			back, seen, probe := int64(rng.IntN(3)), int64(rng.IntN(3)), rng.IntN(10) == 0
			for _, g := range []*gate{fast, ref} {
				tk := ticket{ver: max(g.ver-back, 0), pause: g.pz.count, seen: seen, at: sent, probe: probe}
				if q := g.slot("core"); g == fast && q.counts(&qs[0], false, now.Unix()+max(spanFar, int64(g.maxPause/time.Second)+1), now) {
					short++
				}
				a := &answer{status: status, info: headers.Info{Quotas: append([]headers.Quota(nil), qs...)}}
				g.mu.Lock()
				g.learn(&tk, a, now)
				g.mu.Unlock()
			}
			msg := fmt.Sprintf("seed %d, step %d", seed, step)
			require.Equal(t, ref.quotas, fast.quotas, msg)
			require.Equal(t, ref.model.ver, fast.model.ver, msg)
			require.Equal(t, ref.pz, fast.pz, msg)
		}
	}
	t.Logf("%d answers took the short way", short)
	require.Greater(t, short, 1000, "the short way was taken")
}
