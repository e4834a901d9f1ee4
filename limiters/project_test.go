package limiters

import (
	"math/rand/v2"
	"testing"

	"github.com/throttlekit/throttle/internal/waitq"
)

// run builds a run of waiters asking for ns.
func run(ns []int) waiters {
	var q waitq.Queue
	for _, n := range ns {
		q.Push(waitq.NewWaiter(n, 0))
	}
	n, permits, last := q.Ahead(0)
	if last == nil {
		return waiters{}
	}
	return waiters{q.Head(), last, n, permits, nil}
}

// TestClosedFormProjections: the bucket algorithms' projections from the
// permits ahead agree, to the nanosecond, with granting each waiter ahead
// in turn on a copy of the state (projectCopy, which the window algorithms
// still use).
func TestClosedFormProjections(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rates := []Rate{PerSecond(3), PerSecond(1000), Every(7), {N: 7, Per: 1000000007}, PerHour(1)}
	for i := range 20000 {
		r := rates[rng.IntN(len(rates))]
		burst := 1 + rng.IntN(10)
		iv := newInterval(r)
		now := rng.Int64N(1 << 40)
		// A state somewhere around now: idle, part full, or owing.
		tat := fine{ns: now + rng.Int64N(int64(iv.float())*int64(burst)*3+3) - int64(iv.float())*int64(burst)}
		if iv.den > 1 {
			tat.fr = rng.Int64N(iv.den)
		}
		ns := make([]int, rng.IntN(6))
		for j := range ns {
			ns[j] = 1 + rng.IntN(burst)
		}
		n := 1 + rng.IntN(burst)
		ahead := run(ns)

		g := gcra{bucket: newBucket(r, burst), tat: tat}
		if got, want := g.project(now, ahead, n), projectCopy(g, now, ahead, n); got != want {
			t.Fatalf("case %d: gcra %v burst %d tat %v now %d ahead %v n %d: closed form %d, stepped %d", i, r, burst, tat, now, ns, n, got, want)
		}
		l := leakyBucket{next: tat}
		l.set(iv, burst)
		if got, want := l.project(now, ahead, n), projectCopy(l, now, ahead, n); got != want {
			t.Fatalf("case %d: leaky %v tat %v now %d ahead %v n %d: closed form %d, stepped %d", i, r, tat, now, ns, n, got, want)
		}
	}
}

// TestFullBucketShortcut: what TryAcquire answers from a full bucket
// without the division is what the bucket's arithmetic says.
func TestFullBucketShortcut(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	rates := []Rate{PerSecond(3), PerSecond(1e9), Every(7), {N: 7, Per: 1000000007}, PerHour(1), {N: 1 << 40, Per: 3}}
	for range 20000 {
		r := rates[rng.IntN(len(rates))]
		burst := 1 + rng.IntN(1000)
		g := gcra{bucket: newBucket(r, burst)}
		now := rng.Int64N(1 << 50)
		g.tat = fine{ns: now - 1 - rng.Int64N(1<<20)}
		n := 1 + rng.IntN(g.burst)
		if g.wait(now, n) != 0 {
			t.Fatalf("%v burst %d: a full bucket refused %d", r, burst, n)
		}
		g.take(now, n)
		rem, reset := g.remaining(now)
		if span := g.iv.times(n); rem != g.burst-n || reset != span.ceil() {
			t.Fatalf("%v burst %d n %d: remaining %d reset %d, shortcut %d %d", r, g.burst, n, rem, reset, g.burst-n, span.ceil())
		}
	}
}
