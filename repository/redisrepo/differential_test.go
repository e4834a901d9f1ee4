package redisrepo

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// step is one call of a trace: after dt, TryAcquire(n), or Release(rel)
// when rel > 0.
type step struct {
	dt  time.Duration
	n   int
	rel int
}

// bubbleEpoch is when a synctest bubble's clock starts: 2000-01-01 UTC.
var bubbleEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ceilUS rounds d up to whole microseconds: Redis's clock resolution.
func ceilUS(d time.Duration) time.Duration {
	return (d + time.Microsecond - 1) / time.Microsecond * time.Microsecond
}

// mustExercise fails t unless the trace's calls (n > 0) were both granted
// and denied: a differential test that never denies proves little.
func mustExercise(t *testing.T, trace []step, got []limiters.Decision) {
	t.Helper()
	allowed, denied := 0, 0
	for j, d := range got {
		switch {
		case trace[j].rel > 0 || trace[j].n == 0:
		case d.Allowed:
			allowed++
		default:
			denied++
		}
	}
	if allowed == 0 || denied == 0 {
		t.Fatalf("the trace has %d grants and %d denials; it must exercise both", allowed, denied)
	}
}

// maxStep is the longest pause between two calls of a trace of spec (of
// limit, a bucket's saturated burst): short enough that the limit is often
// reached, long enough that it often comes back.
func maxStep(spec limiters.Spec, limit int) time.Duration {
	switch {
	case spec.Window > 0:
		return spec.Window / 3
	case spec.Rate.N > 0:
		return time.Duration(float64(spec.Rate.Per) / float64(spec.Rate.N) * float64(limit) / 2)
	}
	return 400 * time.Millisecond
}

// TestDifferential runs random traces through the script (its clock driven
// by the test) and through the local limiter of the same spec (in a
// synctest bubble), and requires identical decisions: Allowed, Limit,
// Remaining exactly, ResetAfter and RetryAfter up to the microsecond.
func TestDifferential(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	cases := []limiters.Spec{
		{Algorithm: limiters.AlgGCRA, Limit: 7, Rate: limiters.Rate{N: 5, Per: time.Second}},
		{Algorithm: limiters.AlgGCRA, Limit: 1, Rate: limiters.Rate{N: 7, Per: 7 * time.Millisecond}},
		{Algorithm: limiters.AlgTokenBucket, Limit: 7, Rate: limiters.Rate{N: 5, Per: time.Second}},
		{Algorithm: limiters.AlgTokenBucket, Limit: 3, Rate: limiters.Rate{N: 10, Per: 3 * time.Millisecond}},
		{Algorithm: limiters.AlgLeakyBucket, Limit: 5, Rate: limiters.Rate{N: 4, Per: time.Second}},
		{Algorithm: limiters.AlgFixedWindow, Limit: 5, Window: time.Second},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 5, Window: time.Second},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 13, Window: 700 * time.Millisecond},
		{Algorithm: limiters.AlgSlidingLog, Limit: 5, Window: time.Second},
		{Algorithm: limiters.AlgConcurrency, Limit: 4},
	}
	for i, spec := range cases {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d/seed%d", spec.Algorithm, i, seed), func(t *testing.T) {
				differential(t, c, spec, fmt.Sprintf("diff%d.%d:", i, seed), rand.New(rand.NewPCG(seed, uint64(i))), false, 1)
			})
		}
	}
}

// TestDifferentialLarge: day and hour quotas of ordinary (and large)
// sizes, up to 10^9 over 31 days, work on Redis and decide exactly as the
// local limiter on random traces, through the main script and the fast
// one.
func TestDifferentialLarge(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	const day = 24 * time.Hour
	cases := []limiters.Spec{
		{Algorithm: limiters.AlgFixedWindow, Limit: 1_000_000, Window: time.Hour},
		{Algorithm: limiters.AlgFixedWindow, Limit: 100_000, Window: day},
		{Algorithm: limiters.AlgFixedWindow, Limit: 1_000_000_000, Window: 31 * day},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 1_000_000, Window: time.Hour},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 100_000, Window: day},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 1_000_000_000, Window: 31 * day},
		{Algorithm: limiters.AlgSlidingWindow, Limit: 999_999_937, Window: 31*day - 7*time.Microsecond},
		{Algorithm: limiters.AlgSlidingLog, Limit: 100_000, Window: day},
		{Algorithm: limiters.AlgGCRA, Limit: 100_000, Rate: limiters.Rate{N: 100_000, Per: day}},
		{Algorithm: limiters.AlgTokenBucket, Limit: 1_000_000, Rate: limiters.Rate{N: 1_000_000, Per: time.Hour}},
		{Algorithm: limiters.AlgGCRA, Limit: 1_000_000_000, Rate: limiters.Rate{N: 1_000_000, Per: time.Second}},
		{Algorithm: limiters.AlgGCRA, Limit: 10, Rate: limiters.Rate{N: 1, Per: 31 * day}},
		// bursts that take the local limiter's horizon (2^60 ns) to refill
		// saturate there, on Redis too: 430 at one per 31 days
		{Algorithm: limiters.AlgGCRA, Limit: 1_000_000_000, Rate: limiters.Rate{N: 1, Per: 31 * day}},
		{Algorithm: limiters.AlgTokenBucket, Limit: 1_000_000_000, Rate: limiters.Rate{N: 1, Per: 31 * day}},
		{Algorithm: limiters.AlgLeakyBucket, Limit: 1_000_000_000, Rate: limiters.Rate{N: 1, Per: 31 * day}},
		// rounded intervals (newBucket): within the bound of the spec's
		// rate, exactly the local limiter of the rounded one
		{Algorithm: limiters.AlgGCRA, Limit: 1_000_000_000, Rate: limiters.Rate{N: 7, Per: 31 * day}},
		{Algorithm: limiters.AlgGCRA, Limit: 1_000_000, Rate: limiters.Rate{N: 999_999, Per: day}},
		{Algorithm: limiters.AlgTokenBucket, Limit: 1_000_000, Rate: limiters.Rate{N: 999_999, Per: day}},
		{Algorithm: limiters.AlgGCRA, Limit: 1_000_000_000, Rate: limiters.Rate{N: 999_999_937, Per: 31 * day}},
		{Algorithm: limiters.AlgLeakyBucket, Limit: 100_000_000, Rate: limiters.Rate{N: 999_999_937, Per: 31 * day}},
		// a period that is not a whole number of microseconds
		{Algorithm: limiters.AlgGCRA, Limit: 10, Rate: limiters.Rate{N: 2, Per: 3001 * time.Nanosecond}},
	}
	for i, spec := range cases {
		for _, main := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%d/%v/main=%v", spec.Algorithm, spec.Limit, spec.Window+spec.Rate.Per, main), func(t *testing.T) {
				differential(t, c, spec, fmt.Sprintf("large%d.%v:", i, main), rand.New(rand.NewPCG(uint64(i), 7)), main, 5)
			})
		}
	}
}

// differential runs a random trace of spec through the script (the main
// one, not the fast one, if main) and the local limiter, and requires
// identical decisions; steps last up to maxStep(spec)/div.
func differential(t *testing.T, c *redis.Client, spec limiters.Spec, prefix string, rng *rand.Rand, main bool, div int64) {
	local, limit := spec, spec.Limit
	var b bucket
	switch spec.Algorithm {
	case limiters.AlgGCRA, limiters.AlgTokenBucket, limiters.AlgLeakyBucket:
		var err error
		if b, err = newBucket(spec.Rate, spec.Limit); err != nil {
			t.Fatal(err)
		}
		limit = int(b.burst) // saturated, as the local limiter's
		if !b.exact {
			// the scripts decide exactly as the local limiter of the
			// rounded rate, and within the bound of the spec's own
			var ok bool
			if local.Rate, ok = b.rate(); !ok {
				t.Fatalf("%+v: no local rate", b)
			}
			local.Limit = limit
		}
	}
	if maxStep(spec, limit) > 10*365*24*time.Hour {
		div = max(div, 100) // a saturated burst refills in 36 years: shorter steps
	}
	trace := make([]step, 250)
	held := 0
	// permits per call: up to 3, or, for a large limit, up to a third of it
	maxN := min(limit, 3)
	if limit > 100 {
		maxN = limit / 3
	}
	for j := range trace {
		st := step{dt: time.Duration(rng.Int64N(int64(maxStep(spec, limit))/div)) / time.Microsecond * time.Microsecond}
		if spec.Algorithm == limiters.AlgConcurrency && held > 0 && rng.IntN(3) == 0 {
			st.rel = 1 + rng.IntN(held)
			held -= st.rel
		} else {
			st.n = rng.IntN(maxN + 1)
		}
		trace[j] = st
	}
	// The trace spans about 50s of script time: leases must outlive it.
	r := newRepo(t, c, spec, WithPrefix(prefix), WithPermitLease(time.Hour))
	if main {
		r.fast = nil
	}
	var now time.Duration
	r.SetClock(func() int64 { return bubbleEpoch.Add(now).UnixMicro() })
	got := make([]limiters.Decision, len(trace))
	for j, st := range trace {
		now += st.dt
		if st.rel > 0 {
			if err := r.Release(ctxT(t), "k", st.rel); err != nil {
				t.Fatal(err)
			}
			continue
		}
		d, err := r.TryAcquire(ctxT(t), "k", st.n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed && spec.Algorithm == limiters.AlgConcurrency {
			held += st.n
		}
		got[j] = d
	}
	mustExercise(t, trace, got)
	want := localDecisions(t, local, trace)
	for j := range trace {
		if got[j] != want[j] {
			t.Fatalf("step %d (%+v): redis %+v, local %+v", j, trace[j], got[j], want[j])
		}
	}
	if b.burst == 0 || b.exact {
		return
	}
	// Against the spec's own rate, until the first decision at the edge
	// (from there on the two hold different states): each permit taken
	// moves the state by over more than at the spec's rate, so a wait or
	// reset differs by at most over per permit granted so far (and the
	// burst and n of the call), and Remaining by that in intervals.
	over := new(big.Rat).Sub(b.interval(), trueInterval(spec.Rate))
	iv, _ := trueInterval(spec.Rate).Float64()
	want = localDecisions(t, spec, trace)
	granted := int64(0)
	for j, st := range trace {
		slack := new(big.Rat).Mul(over, new(big.Rat).SetInt64(b.burst+int64(st.n)+granted))
		us, _ := slack.Float64()
		bound := time.Duration(math.Ceil(us)+1) * time.Microsecond
		rem := int(math.Ceil(us/iv)) + 1
		g, w := got[j], want[j]
		if g.Allowed != w.Allowed {
			// only at the edge: the refused one's wait is within the bound
			if max(g.RetryAfter, w.RetryAfter) > bound {
				t.Fatalf("step %d (%+v): redis %+v, the spec's own rate %+v (bound %v)", j, st, g, w, bound)
			}
			t.Logf("step %d of %d: at the edge (redis %+v, the spec's own rate %+v)", j, len(trace), g, w)
			break
		}
		if g.Limit != w.Limit || g.Remaining < w.Remaining-rem || g.Remaining > w.Remaining ||
			(g.RetryAfter-w.RetryAfter).Abs() > bound || (g.ResetAfter-w.ResetAfter).Abs() > bound {
			t.Fatalf("step %d (%+v): redis %+v, the spec's own rate %+v (bounds %v, %d)", j, st, g, w, bound, rem)
		}
		if g.Allowed {
			granted += int64(st.n)
		}
	}
	t.Logf("the interval rounded up by %s µs", over.FloatString(9))
}

// localDecisions runs trace through the local limiter of spec in a
// synctest bubble, its durations rounded up to the microsecond.
func localDecisions(t *testing.T, spec limiters.Spec, trace []step) []limiters.Decision {
	var want []limiters.Decision
	synctest.Test(t, func(t *testing.T) {
		lim, err := spec.New()
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		want = make([]limiters.Decision, len(trace))
		for j, st := range trace {
			time.Sleep(st.dt)
			if st.rel > 0 {
				lim.Release(st.rel)
				continue
			}
			d := lim.TryAcquire(st.n)
			d.ResetAfter, d.RetryAfter = ceilUS(d.ResetAfter), ceilUS(d.RetryAfter)
			want[j] = d
		}
	})
	return want
}

// TestReserveDifferential: the script's reservations (what Acquire waits
// for) are those of limiters.GCRAParams.Reserve on the same random traces:
// the same waits, and the same refusals past the maximum wait.
func TestReserveDifferential(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 4, Rate: limiters.Rate{N: 5, Per: time.Second}}
	type res struct {
		wait     time.Duration
		rejected bool
	}
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 99))
		type rstep struct {
			dt      time.Duration
			n       int
			maxWait time.Duration // < 0: none
		}
		trace := make([]rstep, 200)
		for j := range trace {
			trace[j] = rstep{dt: time.Duration(rng.Int64N(int64(300*time.Millisecond))) / time.Microsecond * time.Microsecond,
				n: 1 + rng.IntN(spec.Limit), maxWait: time.Duration(rng.Int64N(int64(3*time.Second)))/time.Microsecond*time.Microsecond - 500*time.Millisecond}
		}
		r := newRepo(t, c, spec, WithPrefix(fmt.Sprintf("rdiff%d:", seed)))
		var now time.Duration
		r.SetClock(func() int64 { return bubbleEpoch.Add(now).UnixMicro() })
		got := make([]res, len(trace))
		for j, st := range trace {
			now += st.dt
			mw := int64(-1)
			if st.maxWait >= 0 {
				mw = st.maxWait.Microseconds()
			}
			out, err := r.call(ctxT(t), "k", "reserve", st.n, mw, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			v, _, _ := ints(out)
			got[j] = res{wait: us(v[1]), rejected: v[0] == 0}
		}
		waited, refused := 0, 0
		for _, g := range got {
			if g.rejected {
				refused++
			} else if g.wait > 0 {
				waited++
			}
		}
		if waited == 0 || refused == 0 {
			t.Fatalf("seed %d: the trace has %d waits and %d refusals; it must exercise both", seed, waited, refused)
		}
		synctest.Test(t, func(t *testing.T) {
			p := limiters.NewGCRAParams(spec.Rate, spec.Limit)
			var st limiters.GCRAState
			for j, step := range trace {
				time.Sleep(step.dt)
				mw := step.maxWait
				if mw < 0 {
					mw = -1
				}
				d, err := p.Reserve(&st, step.n, mw)
				want := res{wait: ceilUS(d)}
				var rej *limiters.RejectedError
				if errors.As(err, &rej) {
					want = res{wait: ceilUS(rej.RetryAfter), rejected: true}
				}
				if got[j] != want {
					t.Fatalf("seed %d step %d (%+v): redis %+v, GCRAParams %+v", seed, j, step, got[j], want)
				}
			}
		})
	}
}
