package throttle

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// snapshotter is what every apisim simulator can say of what it saw.
type snapshotter interface{ Snapshot() apisim.Stats }

// TestHeaderlessServers holds the Transport, against each header-less or
// misreporting simulator of internal/testutil/apisim at 10 requests a second, to the
// bound of issue 11: 10 goroutines, 200 successful requests, at most 10
// refusals in all and at most 1.15× the ideal time (fake time).
func TestHeaderlessServers(t *testing.T) {
	const (
		rate    = 10
		workers = 10
		total   = 200
	)
	// Each case's bound is issue 11's (10 refusals, 1.15×) unless its
	// comment says why it is not met; such a bound is what the Transport
	// achieves (the runs are deterministic), so that a regression still
	// fails.
	cases := []struct {
		name     string
		sim      func() (http.Handler, snapshotter)
		ideal    time.Duration
		refusals int64
		ratio    float64
	}{
		{"leaky bucket, burst 2", func() (http.Handler, snapshotter) {
			s := apisim.NewLeakyBucket(rate, 2)
			return s, s
		}, (total - 3) * time.Second / rate, 10, 1.15},
		{"penalty window", func() (http.Handler, snapshotter) {
			s := apisim.NewPenaltyWindow(rate, time.Second)
			return s, s
			// The window [0, 1 s) takes the first 10 requests. Their
			// answers all come back within the 5 ms jitter of each
			// other and say nothing of a limit: the next request goes
			// alone (gate.waveProbe) and is refused, the others wait
			// for its answer (10 refusals, the whole second wave,
			// before). Its overage of 1 starts the window [1 s, 2 s)
			// in debt, so the Transport holds the burst's window and
			// the debt's share of the next (burstHold), then draws no
			// refusal in the 18 s left: its creep stops just short of
			// the 10 a second the burst showed and dwells there
			// (aimdDwell) before it probes beyond.
		}, (total/rate - 1) * time.Second, 10, 1.15},
		{"reordered answers", func() (http.Handler, snapshotter) {
			s := apisim.NewPenaltyWindow(rate, time.Second)
			return &apisim.Reorder{Handler: s, Max: 80 * time.Millisecond, Seed: 7}, s
			// The penalty window, as above: the answers of the first
			// wave come back up to 80 ms apart, and the stragglers are
			// not waited for beyond waveWaitMin: the probe goes then.
		}, (total/rate - 1) * time.Second, 10, 1.15},
		{"sliding window misreporting its reset", func() (http.Handler, snapshotter) {
			s := apisim.NewSlidingWindow(rate, time.Second)
			return s, s
			// One refusal, while the Transport finds out that the window
			// slides; it carries a Retry-After of the whole window
			// (httprate's), which is kept: a wait a refusal asks for is
			// never cut short (1.12× when it was cut to a pace step).
		}, (total/rate - 1) * time.Second, 10, 1.18},
		{"capacity 503", func() (http.Handler, snapshotter) {
			s := apisim.NewCapacity(2, 200*time.Millisecond)
			return s, s
			// 8 refusals are unavoidable (10 sent at once before any
			// answer, 2 taken); the probe after them, and the first
			// upward probe of the guessed pace, make 10.
		}, total * 200 * time.Millisecond / 2, 10, 1.15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, s := tc.sim()
				tr := NewTransport(&apisim.Transport{Handler: h, Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1})
				defer tr.Close()
				elapsed := drive(t, tr, workers, total)
				st := s.Snapshot()
				ratio := elapsed.Seconds() / tc.ideal.Seconds()
				t.Logf("%d ok, %d refused, elapsed %v (ideal %v, ratio %.2f)", st.Admitted, st.Refused, elapsed, tc.ideal, ratio)
				assert.EqualValues(t, total, st.Admitted)
				assert.LessOrEqual(t, st.Refused, tc.refusals, "refusals")
				assert.LessOrEqual(t, ratio, tc.ratio, "elapsed %v", fmt.Sprint(elapsed))
			})
		})
	}
}

// TestSlidingWindowAlignedToItsCreation: the sliding window of httprate as
// a server runs it, its windows off the whole second: the Transport finds
// it out from the first window that opens nearly exhausted, learns its
// window from the resets it writes, and paces under its limit: 120
// requests of 10 goroutines at 20/s in at most 1.15 × 6 s, one 429.
func TestSlidingWindowAlignedToItsCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(406 * time.Millisecond) // off the whole second
		srv := apisim.NewSlidingWindow(20, time.Second)
		srv.Origin = time.Now()
		time.Sleep(460 * time.Millisecond)
		tr := NewTransport(handlerTransport{h: srv, latency: time.Millisecond})
		defer tr.Close()
		elapsed := drive(t, tr, 10, 120)
		st := srv.Snapshot()
		t.Logf("%d ok, %d refused, elapsed %v", st.Admitted, st.Refused, elapsed)
		assert.LessOrEqual(t, st.Refused, int64(1))
		assert.LessOrEqual(t, elapsed.Seconds(), 1.15*6)
	})
}

// TestSlidingCounterFoundIsPacedAtOnce: httprate's sliding window, its
// windows ending 5 ms after the whole second. The probe of the first
// window's end is refused (its reset, rounded down, allows it a few
// milliseconds early); later a window opens with nothing remaining, the
// answer that shows the window slides. The request after that answer
// waits a pace from the one it answers: sent at once, it was refused and
// its Retry-After cost a second (2 refusals, 1.34x before).
func TestSlidingCounterFoundIsPacedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(5 * time.Millisecond)
		srv := apisim.NewSlidingWindow(20, time.Second)
		srv.Origin = time.Now()
		time.Sleep(time.Millisecond)
		tr := NewTransport(handlerTransport{h: srv, latency: time.Millisecond})
		defer tr.Close()
		elapsed := drive(t, tr, 10, 120)
		st := srv.Snapshot()
		t.Logf("%d ok, %d refused, elapsed %v", st.Admitted, st.Refused, elapsed)
		assert.Equal(t, int64(1), st.Refused)
		assert.LessOrEqual(t, elapsed.Seconds(), 1.2*6)
	})
}

// TestBurstRefusalHoldsTwoWindows: a server that took a burst of 15 and
// then refused bare, counting the refusals against the next window
// (apisim.PenaltyWindow), sees nothing more from the Transport until that
// window has passed: its refusals come after the first wave of 10 got
// through (in the ramp of batches after it, gate.ramp), at most a wave,
// and none falls in the window in debt.
func TestBurstRefusalHoldsTwoWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start, st, elapsed := penaltyRun(t, 15, 60)
		assert.NotEmpty(t, st.Refusals)
		assert.LessOrEqual(t, len(st.Refusals), 10)
		for _, at := range st.Refusals {
			assert.Less(t, at.Sub(start), 100*time.Millisecond, "refused in the window in debt")
		}
		// 15 in the first window, none until its debt is paid, then 45
		// at just under 15 a second.
		assert.Less(t, elapsed, 5500*time.Millisecond)
	})
}

// TestSilentWaveProbes: a first wave as large as the server's limit all
// succeeds, and the server says nothing of its limit: the next request
// goes alone (gate.ramp), and its refusal is the only one, where the
// whole second wave was refused before (10).
func TestSilentWaveProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start, st, elapsed := penaltyRun(t, 10, 40)
		require.Len(t, st.Refusals, 1)
		assert.Less(t, st.Refusals[0].Sub(start), 100*time.Millisecond, "the probe follows the first wave")
		// 10 in the first window, 9 in the next (the probe's debt), then
		// 21 at just under 10 a second.
		assert.Less(t, elapsed, 5*time.Second)
	})
}

// penaltyRun drives total units with 10 goroutines through a Transport to
// an apisim.PenaltyWindow of limit a second, 10 ms ± 5 ms away, inside a
// synctest bubble; it returns when the run started, what the server saw
// and how long it took.
func penaltyRun(t *testing.T, limit, total int) (start time.Time, st apisim.Stats, elapsed time.Duration) {
	t.Helper()
	start = time.Now()
	s := apisim.NewPenaltyWindow(limit, time.Second)
	tr := NewTransport(&apisim.Transport{Handler: s, Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1})
	defer tr.Close()
	elapsed = drive(t, tr, 10, total)
	st = s.Snapshot()
	t.Logf("%d ok, %d refused, elapsed %v", st.Admitted, st.Refused, elapsed)
	return start, st, elapsed
}

// onWireLog is a silent server that records how many requests it is
// serving as each arrives, and serves each for hold (the eleventh, the
// first after a first wave of ten, for first), and when it last finished
// serving another.
type onWireLog struct {
	mu          sync.Mutex
	now, n      int
	seen        []int
	first, hold time.Duration
	last        time.Time
}

func (s *onWireLog) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.now++
	s.n++
	s.seen = append(s.seen, s.now)
	d, slow := s.hold, s.n == 11 && s.first > 0
	if slow {
		d = s.first
	}
	s.mu.Unlock()
	time.Sleep(d)
	s.mu.Lock()
	s.now--
	if !slow {
		s.last = time.Now()
	}
	s.mu.Unlock()
}

// TestSilentWaveRamps: after a silent first wave, the requests that
// waited for it go one, then two, then four, then eight, each batch once
// the last is answered, then all: a server with no limit pays four round
// trips once. A slow call in a batch holds the rest back at most twice as
// long as the first wave took (within waveWaitMin and waveWaitMax), and
// the ramp ends there.
func TestSilentWaveRamps(t *testing.T) {
	t.Run("batches", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &onWireLog{hold: 10 * time.Millisecond}
			tr := NewTransport(handlerTransport{h: s, latency: 10 * time.Millisecond})
			defer tr.Close()
			elapsed := drive(t, tr, 10, 100)
			// The wave of 10; then batches of 1, 2, 4 and 8, each alone
			// on the wire; then 10 at a time.
			most := 0
			for i, n := range s.seen {
				switch {
				case i < 10:
				case i < 11:
					assert.Equal(t, 1, n, "the ramp's first request goes alone")
				case i < 13:
					assert.LessOrEqual(t, n, 2, "request %d", i)
				case i < 17:
					assert.LessOrEqual(t, n, 4, "request %d", i)
				case i < 25:
					assert.LessOrEqual(t, n, 8, "request %d", i)
				default:
					most = max(most, n)
				}
			}
			assert.Equal(t, 10, most, "after the ramp, every goroutine's request is on the wire at once")
			// 100 requests of 30 ms, 10 at a time: 300 ms; the wave's
			// wait and four batches add about 150 ms.
			t.Logf("elapsed %v", elapsed)
			assert.Less(t, elapsed, 500*time.Millisecond)
		})
	})
	t.Run("slow call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			s := &onWireLog{hold: 10 * time.Millisecond, first: 10 * time.Second}
			tr := NewTransport(handlerTransport{h: s, latency: 10 * time.Millisecond})
			defer tr.Close()
			drive(t, tr, 10, 100)
			// The slow call held the others back for at most 500 ms
			// (waveWaitMax); the other 99 calls, 9 at a time, took
			// about 350 ms.
			t.Logf("the others done after %v", s.last.Sub(start))
			assert.Less(t, s.last.Sub(start), time.Second)
			assert.Equal(t, 100, s.n)
		})
	})
}

// TestBurstHoldCountsDebt: a server that weighs the last second into a
// sliding estimate of the rate and counts refusals in it (HAProxy's
// http_req_rate as bench/haproxy_test.go configures it, a bare 429) puts
// a burst's refusals in the next second's estimate only in part: the
// hold after the burst is the window it emptied and the refused
// requests' share of the next (burstHold), not two whole windows, and the
// pace is the burst's once all its answers are in (recount). 250
// requests of 10 goroutines on a wire a millisecond long: the second
// wave's 10 refusals and no more; before, a hold of 2 s made 20 a second
// 1.09× and 40 a second 1.17×, and the real haproxy (a pace measured
// before the burst's answers were all counted) 1.29× at 20 a second.
func TestBurstHoldCountsDebt(t *testing.T) {
	for _, rate := range []int{20, 40} {
		t.Run(fmt.Sprintf("%d per second", rate), func(t *testing.T) {
			b := modelBehaviour{name: "haproxy, bare 429", serve: func(q simQuota) (http.Handler, func()) {
				return &haproxyTable{limit: int64(q.n), period: q.window.Milliseconds(), bare: true}, nil
			}, ideal: idealSliding}
			r := runModel(t, b, modelRun{rate: rate, workers: 10, total: 250, latency: time.Millisecond, jitter: 500 * time.Microsecond, method: http.MethodGet})
			t.Logf("%d refused, %v (%.3f× the ideal %v)", r.counts.refused, r.elapsed, r.ratio(), r.ideal)
			assert.True(t, r.finished)
			assert.LessOrEqual(t, r.counts.refused, 10)
			assert.LessOrEqual(t, r.ratio(), 1.07) // measured 1.055 and 1.056
		})
	}
}

// TestDebtAfterReopeningIsPaced: HAProxy's documented example, 20 per
// 10 s with refusals counted and a bare 429, 10 goroutines 1 ms away. The
// burst taught 20 a second; after its window reopened (14 s on, its
// refused probes in debt too) the next requests at that pace were let
// through one at a time and refused, and the pace halved five times: 36
// refusals and 1.22x. A window that reopened and let few of its quota
// through is a rate in debt, paced from what the reopening bounded
// (aimd.reopened): 14-16 refusals (the first wave's 10 among them),
// 1.10-1.13x. (bench/haproxy_test.go, the real haproxy on loopback: 42
// and 1.34x -> 14 and 1.10x, three runs of three.) Not yet: with half a
// millisecond of jitter the backoff's probes after the burst go on past
// the debt, the window reopens whole, and the client bursts its quota
// each time the window turns (every 13 s or so): 22 refusals, 1.54x
// either way (a miss, listed in the note on issue 18).
//
// Goroutines released at one instant reach the server in any order, and
// some orders take another way (under -race, about one run in six: the
// burst mode above, or the halvings of before, 40 refusals and 1.42x):
// so six seeds, each held to finishing with no request sent during a
// pause and to what catches a storm (60 refusals, 1.8x: bench's bounds
// for the real haproxy), and their median to 16 refusals and 1.15x.
func TestDebtAfterReopeningIsPaced(t *testing.T) {
	b := modelBehaviourOf(t, "m/haproxy stick table, bare 429")
	var refused []int
	var ratios []float64
	for seed := range uint64(6) {
		r := runModel(t, b, modelRun{rate: 20, window: 10 * time.Second, workers: 10, total: 120, latency: time.Millisecond, method: http.MethodGet, seed: seed + 1})
		holdRun(t, r, 60, 1.8)
		refused, ratios = append(refused, r.counts.refused), append(ratios, r.ratio())
	}
	slices.Sort(refused)
	slices.Sort(ratios)
	assert.LessOrEqual(t, refused[2], 16, "median refusals of %v", refused)
	assert.LessOrEqual(t, ratios[2], 1.15, "median ratio of %v", ratios)
}

// TestBurstHoldLongerWindow: a bare 429 over windows of two seconds,
// on the clock: the probe after the burst's hold (a window of a second,
// as the hold guesses, and the refusals' share of the next) is refused,
// and the Transport then waits out the two windows of aimdHold from the
// burst rather than twice the hold (1.35× the ideal when it doubled; 1.15×
// now, as with the two-second hold it replaced).
func TestBurstHoldLongerWindow(t *testing.T) {
	b := modelBehaviourOf(t, "h/")
	r := runModel(t, b, modelRun{rate: 20, window: 2 * time.Second, workers: 10, total: 120, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet})
	holdRun(t, r, -1, 1.2)
}

// straggler delays the which-th request it carries by delay on its way:
// a connection set up last on a loaded machine.
type straggler struct {
	rt    http.RoundTripper
	n     atomic.Int64
	which int64
	delay time.Duration
}

func (s *straggler) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.n.Add(1) == s.which {
		time.Sleep(s.delay)
	}
	return s.rt.RoundTrip(r)
}

// TestFirstWaveStraggler: a request of the first wave that reaches a bare
// 429 server after the next requests (the first wave's answers were waited
// for 50 ms, and it took 52) is refused, and its refusal may be the first
// one heard. It was read as a first wave refused in part — a server whose
// burst is smaller than the wave — and the pace searched up from a guess,
// each refused probe doubling the wait: 47 refusals, 1.20× (express with no
// headers, real, once in six runs: 41 and 1.22×). Requests on the wire
// that are not of the first wave say it may have been overtaken
// (gate.afterAnswers): the burst it ended is held as any other.
func TestFirstWaveStraggler(t *testing.T) {
	for _, delay := range []time.Duration{51600 * time.Microsecond, 51800 * time.Microsecond, 52000 * time.Microsecond} {
		t.Run(delay.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wire := &simWire{h: &bareWindow{limit: 10, window: time.Second}, latency: time.Millisecond, jitter: 500 * time.Microsecond, seed: 18}
				tr := NewTransport(&straggler{rt: wire, which: 3, delay: delay})
				defer tr.Close()
				elapsed := drive(t, tr, 10, 250)
				c := wire.counts()
				t.Logf("%d refused, %v", c.refused, elapsed)
				assert.LessOrEqual(t, c.refused, 11) // the second wave's 9, the straggler, one probe
				assert.LessOrEqual(t, elapsed.Seconds(), 1.12*24)
			})
		})
	}
}

// TestHeaderlessFewWorkers: a client that sends one, two or four requests
// at a time to a server that refuses with a bare 429 (a leaky bucket of 10
// a second, no burst: nginx's limit_req as configured by default). The
// first refusal then rests on so few requests that the pace's guess (what
// the server took per second) is a tenth to a half of the server's rate;
// when the pace crept up from it by a fifth of the guess every 20
// successes, this took 7.9×, 3.9× and 2.0× the ideal time. Slow start
// doubles the rate after every two successes until a refusal, then
// searches between the last interval that got through and the refused
// one: 1.6×, 1.3× and 1.25× (most of it the first seconds at the guess),
// with a handful of refusals.
func TestHeaderlessFewWorkers(t *testing.T) {
	const total = 100
	ideal := (total - 1) * time.Second / 10
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := apisim.NewLeakyBucket(10, 0)
				tr := NewTransport(&apisim.Transport{Handler: s, Latency: time.Millisecond, Seed: 1})
				defer tr.Close()
				elapsed := drive(t, tr, workers, total)
				st := s.Snapshot()
				ratio := elapsed.Seconds() / ideal.Seconds()
				t.Logf("%d ok, %d refused, elapsed %v (ideal %v, ratio %.2f)", st.Admitted, st.Refused, elapsed, ideal, ratio)
				assert.LessOrEqual(t, st.Refused, int64(8), "refusals")
				assert.LessOrEqual(t, ratio, 1.7, "elapsed %v", elapsed)
			})
		})
	}
}

// TestHeaderlessAtManyRates: issue 11's bound is set at 10 requests a
// second, where the pace's first guess from 10 requests in flight (10 a
// second) happens to be right; a pace tuned to that one rate took 1.5× the
// ideal at 20 a second, 3× at 50 and 6× at 100, and at 2 a second drew 67
// refusals for 60 successes. Against leaky buckets (no burst, 2, 5) and a
// capacity limit at 2 to 100 a second, 10 goroutines: slow start and the
// search keep every case within 1.8× (1.6× from 5 a second up) and 20
// refusals. (Penalty windows and sliding windows at other rates are
// printed, not bounded: the two-second hold after a burst is a second's
// window by construction; see the closing note of issue 11.)
func TestHeaderlessAtManyRates(t *testing.T) {
	type server struct {
		name  string
		make  func(rate int) (http.Handler, snapshotter)
		burst int
		ideal func(rate, total int) time.Duration
	}
	leaky := func(b int) server {
		return server{fmt.Sprintf("leaky bucket, burst %d", b), func(rate int) (http.Handler, snapshotter) {
			s := apisim.NewLeakyBucket(rate, b)
			return s, s
		}, b, func(rate, total int) time.Duration {
			return time.Duration(total-1-b) * time.Second / time.Duration(rate)
		}}
	}
	servers := []server{leaky(0), leaky(2), leaky(5),
		{"capacity 2", func(rate int) (http.Handler, snapshotter) {
			s := apisim.NewCapacity(2, 2*time.Second/time.Duration(rate))
			return s, s
		}, 0, func(rate, total int) time.Duration { return time.Duration(total) * time.Second / time.Duration(rate) }},
	}
	for _, srv := range servers {
		for _, rate := range []int{2, 5, 20, 50, 100} {
			t.Run(fmt.Sprintf("%s/%d per second", srv.name, rate), func(t *testing.T) {
				total := 200
				if rate <= 5 {
					total = 60
				}
				synctest.Test(t, func(t *testing.T) {
					h, s := srv.make(rate)
					tr := NewTransport(&apisim.Transport{Handler: h, Latency: 2 * time.Millisecond, Jitter: time.Millisecond, Seed: 1})
					defer tr.Close()
					elapsed := drive(t, tr, 10, total)
					st := s.Snapshot()
					ratio := elapsed.Seconds() / srv.ideal(rate, total).Seconds()
					t.Logf("%d ok, %d refused, ratio %.2f", st.Admitted, st.Refused, ratio)
					bound := 1.6
					if rate < 5 {
						bound = 1.8
					}
					assert.LessOrEqual(t, st.Refused, int64(20), "refusals")
					assert.LessOrEqual(t, ratio, bound, "elapsed %v", elapsed)
				})
			})
		}
	}
}

// TestFirstWaveLargerThanTheBurst: 50 goroutines against a bare 429 that
// takes 10 a second (a window on the clock, or koa-ratelimit's from the
// first request with its headers disabled): the first wave of 50 is
// refused but for the 10 the server took, and the pace is searched from
// a guess of 50 a second. Slow start doubled the rate at every second
// answer, though they answered requests sent at the old pace, down to no
// pace at all, and let the queue of 50 go at once, window after window;
// and a rate halved crept back a percent a run. 112 refusals, 1.54× and
// 1.57×. A run proves a pace only with requests sent at it (aimd.since),
// and only past the burst the server showed (aimd.shown); a halved rate,
// when a refusal costs no wait, searches back up to the rate refused:
// 58 and 57 (40 of them the first wave's), 1.06× and 1.20×. Slow start
// from that guess still read runs spanning two windows as proof of
// twice the rate: 54 and 57, 1.14× and 1.17×, until the first success
// after the wave's refusal, a second of refused probes later, told a
// window the wave emptied from a bucket (aimd.turned): 44 (40 of them
// the first wave's), 1.06× both.
func TestFirstWaveLargerThanTheBurst(t *testing.T) {
	for _, name := range []string{"h/", "i/koa-ratelimit memory, disableHeader"} {
		t.Run(name, func(t *testing.T) {
			b := modelBehaviourOf(t, name)
			r := runModel(t, b, modelRun{rate: 10, workers: 50, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet})
			holdRun(t, r, 50, 1.10)
		})
	}
}

// TestManyGoroutinesAgainstABareWindow: 25 goroutines against a bare 429
// window of 20 a second. Slow start's runs of two fit in every window's
// burst of 20: it doubled to 190 a second at each window's start, the
// pace a run of 20 "proved" there was refused every window, and each
// window drew 10 to 16 refusals: 348 in 25 s (1.01×, the time of a client
// that bursts and waits). Runs that prove a pace must outlast the burst
// the server showed (aimd.shown), or half a second of the pace: 20 and
// 1.10×; the wave taken for a burst (aimd.turned), 9 and 1.06×.
func TestManyGoroutinesAgainstABareWindow(t *testing.T) {
	b := modelBehaviourOf(t, "h/")
	r := runModel(t, b, modelRun{rate: 20, workers: 25, total: 500, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet})
	holdRun(t, r, 15, 1.10)
}

// TestWaveWiderThanTheWindow: 20 goroutines against servers that say
// nothing but a bare 429 over windows of 10 a second. The first wave
// sends twice the quota; its refusals are the server's, not the pace's.
// Slow start read its runs across two windows as proof of twice the
// rate, and @nestjs/throttler (which blocks a refused client for a
// window) took 1.43x with 36 refusals, a bare window on the clock
// 1.14x with 24; now the wave's ten and the probes that find the window's
// turn, within 1.10x.
func TestWaveWiderThanTheWindow(t *testing.T) {
	for _, name := range []string{"n/nestjs throttler, no headers", "h/bare 429, epoch window", "j/flask-limiter headers disabled", "m/haproxy stick table, bare 429"} {
		t.Run(name, func(t *testing.T) {
			b := modelBehaviourOf(t, name)
			r := runModel(t, b, modelRun{rate: 10, window: time.Second, workers: 20, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: b.method})
			assert.Less(t, r.ratio(), 1.10)
			assert.LessOrEqual(t, r.counts.refused, 10+7, "the wave's ten, and the probes for the window's turn")
			assert.Zero(t, r.counts.inPause, "sent during a wait a refusal asked for")
		})
	}
}

// TestWholeSecondRetryAfterPace: a server that says nothing on its
// successes and answers a refusal with a Retry-After in whole seconds
// (HAProxy with `hdr Retry-After 1`, a sliding log): one goroutine sends
// its first ten in a quarter of a second, and the eleventh is told "1".
// The pace the first refusal teaches is what the server took over the
// time from the first request to the wait's end, 1.25 s with a wait
// rounded up; windows are whole seconds long, and a wait told in whole
// seconds ended up to a second before it said, so the window is the
// whole second in that span, not 1.25 s (a pace a fifth too slow, held
// for the half minute its dwell lasts: 1.49× and 1.55× the ideal).
func TestWholeSecondRetryAfterPace(t *testing.T) {
	for _, name := range []string{"e/", "d/sliding log"} {
		t.Run(name, func(t *testing.T) {
			b := modelBehaviourOf(t, name)
			r := runModel(t, b, modelRun{rate: 10, workers: 1, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet})
			holdRun(t, r, 3, 1.12)
		})
	}
}

// TestPaceLeavesRoomForJitter: ten goroutines against a fixed window of
// ten a second that says nothing on its successes (koa-ratelimit with its
// headers disabled), 10 ms of jitter on the way there. The pace the burst
// teaches sits half a percent under the rate; a request that arrives late
// opens a window the eleventh, early, still falls in: at the plateau, one
// refusal a run, beyond the ten of the first burst's second wave. The
// interval leaves room for the jitter the round trips show (one percent
// here): the ten only.
func TestPaceLeavesRoomForJitter(t *testing.T) {
	for _, name := range []string{"i/koa-ratelimit memory, disableHeader", "c/nothing on 200s"} {
		t.Run(name, func(t *testing.T) {
			b := modelBehaviourOf(t, name)
			r := runModel(t, b, modelRun{rate: 10, workers: 10, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet})
			holdRun(t, r, 10, 1.10)
		})
	}
}

// TestHalvedPaceSearchedBack: a sliding counter of 10 per 5 s that
// answers every refusal with "Retry-After: 1", whatever the wait. Its
// first refusal's span (a second) says nothing of its five-second
// window; the pace it starts at is refused, halved, and searched back up
// towards the rate refused, as after a bare refusal: the wait a refusal
// asks for sets the pause, never the pace. (Without the search, a creep
// of a percent a run from half: 1.42× the ideal.)
func TestHalvedPaceSearchedBack(t *testing.T) {
	b := modelBehaviourOf(t, "d/sliding counter")
	r := runModel(t, b, modelRun{rate: 10, window: 5 * time.Second, workers: 10, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet})
	holdRun(t, r, -1, 1.15)
}

// holdRun logs r and holds it to finishing with no request sent during a
// wait a refusal asked for, at most refused refusals (none held when
// refused is negative) and at most ratio times the ideal time.
func holdRun(t *testing.T, r modelResult, refused int, ratio float64) {
	t.Helper()
	t.Logf("%d refused, %v (%.3f× the ideal %v)", r.counts.refused, r.elapsed, r.ratio(), r.ideal)
	assert.True(t, r.finished)
	assert.Zero(t, r.counts.inPause)
	if refused >= 0 {
		assert.LessOrEqual(t, r.counts.refused, refused)
	}
	assert.LessOrEqual(t, r.ratio(), ratio)
}

// TestElasticWindowFollowsTheLastRequest: a window that every request,
// refused or not, pushes a window on (Flask-Limiter's elastic window)
// ends a window after the last request, not the first. Once a refusal
// pushed its reset on while every answer fit such a window (stretch),
// the Transport ends each window a window after the last request reached
// the server, opens the next without a probe, and sends nothing into a
// window meanwhile (each request would push it on). Its ideal is no
// fixed window's: a window opens only a window after the last request of
// the one before, which the goroutines send one round trip after the
// other. (4.07× and 23 refusals over 250 at 10 a second before, 2.5–4.2×
// in the variations; the refused probe that shows it, and the wait its
// reset asks, cost a second or two once.)
func TestElasticWindowFollowsTheLastRequest(t *testing.T) {
	b := modelBehaviour{name: "elastic", serve: func(q simQuota) (http.Handler, func()) {
		return &flaskLimiter{limit: q.n, window: q.window, elastic: true}, nil
	}, ideal: idealWindowed}
	for _, c := range []struct {
		rate    int
		window  time.Duration
		workers int
		latency time.Duration
		refused int // the first wave's beyond the limit, and one
		ratio   float64
	}{
		{10, time.Second, 10, 20 * time.Millisecond, 1, 1.15},
		{5, time.Second, 10, 20 * time.Millisecond, 6, 1.2},
		{10, time.Second, 1, 20 * time.Millisecond, 1, 1.15},
		{10, time.Second, 50, 20 * time.Millisecond, 41, 1.2},
		{50, time.Second, 10, 20 * time.Millisecond, 1, 1.15},
		{10, time.Second, 10, 100 * time.Millisecond, 1, 1.3},
		{5, 2 * time.Second, 10, 20 * time.Millisecond, 6, 1.12},
		{10, 5 * time.Second, 10, 20 * time.Millisecond, 1, 1.1},
	} {
		total := 25 * c.rate // 25 windows
		run := modelRun{rate: c.rate, window: c.window, workers: c.workers, total: total, latency: c.latency, jitter: c.latency / 2, method: http.MethodGet, seed: 18}
		t.Run(run.String(), func(t *testing.T) {
			r := runModel(t, b, run)
			rtt := 2 * c.latency
			sends := time.Duration(simCeilDiv(int64(c.rate), int64(c.workers))-1) * rtt
			ideal := 24*(c.window+sends) + sends + rtt
			ratio := r.elapsed.Seconds() / ideal.Seconds()
			t.Logf("%d refused, %v (%.2f× the ideal %v)", r.counts.refused, r.elapsed, ratio, ideal)
			assert.True(t, r.finished)
			assert.LessOrEqual(t, r.counts.refused, c.refused)
			assert.Zero(t, r.counts.inPause)
			assert.Less(t, ratio, c.ratio)
		})
	}
}

// TestRetryAfterOnSuccessIsNoPause: Flask-Limiter writes a Retry-After on
// every answer, a success too ("1" while a window of a second lasts). A
// wait is what a refusal asks for: on a 200 it pauses nothing, and a
// server that says it on every answer is as fast as one that does not.
func TestRetryAfterOnSuccessIsNoPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			n.Add(1)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusOK)
		})
		tr := NewTransport(handlerTransport{h: h, latency: 10 * time.Millisecond})
		defer tr.Close()
		elapsed := drive(t, tr, 10, 100)
		t.Logf("100 in %v", elapsed)
		// Ten at a time, 20 ms each, and the first wave's ramp (a few
		// round trips): nothing near a second's pause.
		assert.Less(t, elapsed, 500*time.Millisecond)
		assert.Equal(t, int64(100), n.Load())
	})
}

// sharedLog is a Flask-Limiter moving window that another client uses
// too: before every fourth of our requests, it takes one of its own.
type sharedLog struct {
	flaskLimiter
	n atomic.Int64
}

func (s *sharedLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.n.Add(1)%4 == 0 {
		s.flaskLimiter.ServeHTTP(httptest.NewRecorder(), r)
	}
	s.flaskLimiter.ServeHTTP(w, r)
}

// TestExactLogTimedBySends: a sliding log whose answers' counts fit an
// exact log of the client's own requests (Flask-Limiter's moving window)
// is timed by the send log — the next request goes a window after the
// limit-th newest — not paced under its limit; one that another client
// shares is paced again after the first request the log timed is
// refused (gate.logTimes). A log another client shares costs 62 refusals
// and 2.68× of our ideal with the log's timing and without it (the other
// client takes a fifth of the log, so 1.25× is the best there): a
// weakness of the model, held here where it stands.
func TestExactLogTimedBySends(t *testing.T) {
	run := modelRun{rate: 10, window: time.Second, workers: 10, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: http.MethodGet, seed: 18}
	alone := modelBehaviour{name: "moving", serve: func(q simQuota) (http.Handler, func()) {
		return &flaskLimiter{limit: q.n, window: q.window, moving: true}, nil
	}, ideal: idealWindowed}
	r := runModel(t, alone, run)
	t.Logf("alone: %d refused, %v (%.3f×)", r.counts.refused, r.elapsed, r.ratio())
	assert.Zero(t, r.counts.refused)
	assert.Zero(t, r.counts.inPause)
	assert.Less(t, r.ratio(), 1.05, "1.08× paced under its limit")

	shared := modelBehaviour{name: "moving, shared", serve: func(q simQuota) (http.Handler, func()) {
		return &sharedLog{flaskLimiter: flaskLimiter{limit: q.n, window: q.window, moving: true}}, nil
	}, ideal: idealWindowed}
	r = runModel(t, shared, run)
	t.Logf("shared: %d refused, %v (%.3f×)", r.counts.refused, r.elapsed, r.ratio())
	assert.True(t, r.finished)
	assert.Zero(t, r.counts.inPause)
	assert.LessOrEqual(t, r.counts.refused, 70)
	assert.Less(t, r.ratio(), 3.0)
}

// TestExactWaitWiderWave: a window from the client's first request that
// says nothing on its successes and tells its refusals the exact wait
// ("Retry-After: 0.99"), 20 goroutines 40 ms away. The first refusal
// measures the pace over the span from the first request to the wait's
// end: 1.08 s for a window of a second, a way there and a way back too
// long, and the creep dwells short of that rate for half a minute (the
// wait is its penalty): 8 % under the rate for the whole run, 1.15x.
// Whole seconds less the first round trip are the window: 1.07x.
func TestExactWaitWiderWave(t *testing.T) {
	b := modelBehaviourOf(t, "c/nothing on 200s")
	for _, workers := range []int{20, 43} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: 10, workers: workers, total: 250, latency: 40 * time.Millisecond, jitter: 20 * time.Millisecond, method: http.MethodGet})
			holdRun(t, r, workers, 1.10)
		})
	}
}

// lateServer is a server that, in the span [from, to) after its first
// request, takes each request late before its handler counts it: a
// loaded machine, an event loop busy with something else.
type lateServer struct {
	h        http.Handler
	from, to time.Duration
	late     time.Duration

	mu    sync.Mutex
	start time.Time
}

func (s *lateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.mu.Lock()
	if s.start.IsZero() {
		s.start = now
	}
	at := now.Sub(s.start)
	s.mu.Unlock()
	if at >= s.from && at < s.to {
		time.Sleep(s.late)
	}
	s.h.ServeHTTP(w, r)
}

// TestLogWaitsForLateAnswers: @nestjs/throttler's log, 10 a second, 10
// goroutines, its third window's requests taken 80 ms late (a loaded
// machine: the real server, in one CI run). The next request was timed
// by the send log when the last of the window went, from the sends; the
// answers, come back 80 ms late, said the log held them that much longer,
// but the time was not moved, and the probe a window after the sends was
// refused, and the client blocked for a window (1.10×, 1 refusal, at
// every phase at which such a window starts). Timed again by an answer
// far later than the others (counted): none refused.
func TestLogWaitsForLateAnswers(t *testing.T) {
	b := modelBehaviourOf(t, "n/nestjs throttler")
	for _, from := range []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			late := b
			late.serve = func(q simQuota) (http.Handler, func()) {
				h, closeServer := b.serve(q)
				return &lateServer{h: h, from: from, to: from + 60*time.Millisecond, late: 80 * time.Millisecond}, closeServer
			}
			r := runModel(t, late, modelRun{rate: 10, workers: 10, total: 120, latency: 200 * time.Microsecond, method: http.MethodGet})
			holdRun(t, r, 0, 1.05)
		})
	}
}

// TestSlidingLogKeepsTheLeastOfOutOfOrderAnswers: Flask-Limiter's moving
// window at 20 a second, 10 goroutines, answers coming back out of the
// order they were sent in (a loaded machine). Nine requests sent at once
// are told 18 down to 10 remaining, in whatever order their answers
// arrive; a sliding window's model took the last answer read for the
// count (16, say), let ten go where ten remained, and the eleventh was
// refused (7 of 8 runs over seeds and latencies). As a bucket's, it keeps
// the freshest word, or an older one that says less than it projects.
func TestSlidingLogKeepsTheLeastOfOutOfOrderAnswers(t *testing.T) {
	b := modelBehaviourOf(t, "j/flask-limiter moving window")
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed+1), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: 20, workers: 10, total: 160, latency: time.Millisecond, back: 2 * time.Millisecond, method: http.MethodGet, seed: seed + 1})
			holdRun(t, r, 0, 1.25)
		})
	}
}

// TestMovingWindowTimedFromTheFirstWave: Flask-Limiter's moving window at
// 20 a second, 10 goroutines, 1 ms away. Its resets (when its log will be
// empty, in epoch seconds, plus one) reach almost two seconds ahead, and
// the send log that finds its window began only at the probe of the
// second window, so the second window was held as a log of two seconds
// until the third: 1.17x, every run (and 1.19-1.22x against the real
// server). Begun at the first answer, with the first wave in it, and its
// counts read against when each request went and came back, the probe's
// count finds the window a second long at once.
func TestMovingWindowTimedFromTheFirstWave(t *testing.T) {
	b := modelBehaviourOf(t, "j/flask-limiter moving window")
	for _, back := range []time.Duration{0, 2 * time.Millisecond} {
		t.Run(fmt.Sprint(back), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: 20, workers: 10, total: 160, latency: time.Millisecond, back: back, method: http.MethodGet, seed: 1})
			holdRun(t, r, 0, 1.05)
		})
	}
}

// TestFirstWaveIsCapped: fifty goroutines against ten a second send at
// most waveMax before the first answer comes back; the rest wait for
// the wave's answers and go as they allow. With express-rate-limit's
// draft-8 fields, what remains: no refusal (40 before, when all fifty
// went at once). With a bare 429, the ramp after the silent wave: the
// one refusal that finds the limit (44 before), and the pace its burst
// showed, ten a second, not the forty waiting read as on the wire
// (aimd.refused: twenty a second, 1.11x and 11 refusals).
func TestFirstWaveIsCapped(t *testing.T) {
	for _, tc := range []struct {
		behaviour string
		refusals  int
		ratio     float64
	}{
		{"a/express draft-8", 0, 1.05},
		{"h/bare 429, epoch window", 1, 1.10},
		{"o/rate-limiter-flexible memory, bare", 1, 1.10},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			b := modelBehaviourOf(t, tc.behaviour)
			r := runModel(t, b, modelRun{rate: 10, workers: 50, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond})
			require.True(t, r.finished, "unfinished: %d in %v", r.done, r.elapsed)
			t.Logf("%d refused, %.3fx", r.counts.refused, r.ratio())
			assert.Zero(t, r.counts.inPause, "requests sent during a pause")
			assert.LessOrEqual(t, r.counts.refused, tc.refusals)
			assert.LessOrEqual(t, r.ratio(), tc.ratio)
		})
	}
}

// TestSlowFirstWaveHoldsTheRestOnce: thirty goroutines whose first ten
// calls are slow (a language model's completions, 3 s each): the other
// twenty wait for the first wave's answers at most waveWaitMax after the
// first request went, once, and then go.
func TestSlowFirstWaveHoldsTheRestOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var arrived []time.Duration
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			arrived = append(arrived, time.Since(start))
			n := len(arrived)
			mu.Unlock()
			if n <= waveMax {
				time.Sleep(3 * time.Second)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		})
		tr := NewTransport(handlerTransport{h: h, latency: 10 * time.Millisecond})
		defer tr.Close()
		drive(t, tr, 30, 60)
		require.Len(t, arrived, 60)
		for i, at := range arrived[:waveMax] {
			assert.Less(t, at, 50*time.Millisecond, "request %d of the first wave", i)
		}
		// The eleventh reached the server half a second after the
		// first request left (waveWaitMax), a way there later.
		assert.GreaterOrEqual(t, arrived[waveMax], waveWaitMax)
		assert.Less(t, arrived[waveMax], waveWaitMax+50*time.Millisecond)
		// And the twenty with it, at once: the wait is paid once.
		assert.Less(t, arrived[3*waveMax-1], waveWaitMax+50*time.Millisecond)
	})
}

// TestFirstWaveWaitKeepsMaxWait: the wait for a slow first wave's
// answers is the gate's caution, not the server's word: a request that
// may not wait that long (WithMaxWait of 100 ms) goes instead of failing
// for it (twenty of thirty failed).
func TestFirstWaveWaitKeepsMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if n.Add(1) <= waveMax {
				time.Sleep(3 * time.Second)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		})
		tr := NewTransport(handlerTransport{h: h, latency: 10 * time.Millisecond}, WithMaxWait(100*time.Millisecond))
		defer tr.Close()
		client := &http.Client{Transport: tr}
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Int64
		var fast atomic.Int64 // done within 100 ms of a way there and back
		for range 3 * waveMax {
			wg.Go(func() {
				resp, err := client.Get("http://api.test/x")
				if err != nil {
					failed.Add(1)
					return
				}
				resp.Body.Close()
				if time.Since(start) < 200*time.Millisecond {
					fast.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Zero(t, failed.Load())
		assert.Equal(t, int64(2*waveMax), fast.Load())
	})
}

// TestRampWaitsForItsLastBatch: goroutines that start one after another
// (a loaded machine) make a small first wave, and the ramp after it
// (gate.ramp) ends with a batch as large as that wave. Its answers come
// back together, in any order: a success read before a sibling's refusal
// ended the ramp and released every waiting request into the window that
// refusal reports (10 refusals in the first window here). The
// ramp ends once its last batch is all answered, and the refusal pauses
// the partition first (the later ones are the pace's search).
func TestRampWaitsForItsLastBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowRefusals{limit: 4, slow: 5 * time.Millisecond}
		tr := NewTransport(handlerTransport{h: s, latency: 10 * time.Millisecond})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		var next atomic.Int64
		var wg sync.WaitGroup
		// Two goroutines make the first wave; eight more start once its
		// answers are in, and wait for the ramp: a batch of one, then of
		// two, which meets the limit.
		for i := range 10 {
			wg.Go(func() {
				if i >= 2 {
					time.Sleep(25 * time.Millisecond)
				}
				for next.Add(1) <= 20 {
					for {
						resp, err := client.Get("http://api.test/items")
						if !assert.NoError(t, err) {
							return
						}
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d refused in the first window, %d in all", s.first, s.refused)
		assert.Equal(t, 1, s.first)
	})
}

// slowRefusals is a silent fixed window of limit requests a second from
// the first, whose bare refusals take slow longer to answer than its
// successes. It counts its refusals, and those of its first window.
type slowRefusals struct {
	limit          int
	slow           time.Duration
	mu             sync.Mutex
	start          time.Time
	n, windows     int
	refused, first int
}

func (s *slowRefusals) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	if now := time.Now(); s.start.IsZero() || now.Sub(s.start) >= time.Second {
		s.start, s.n = now, 0
		s.windows++
	}
	s.n++
	ok := s.n <= s.limit
	if !ok {
		s.refused++
		if s.windows == 1 {
			s.first++
		}
	}
	s.mu.Unlock()
	if !ok {
		time.Sleep(s.slow)
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// TestWaveStragglersAreWaitedFor: a loaded server answers a first wave
// over many times its first round trip — real koa-ratelimit beside the
// race-enabled tests took 32 to 252 ms over a wave of ten, its last
// connections set up last — and the ramp, begun when waveWaitMin had
// passed since the first answer, sent its batches on the connections the
// first answers freed. They reached the server before the stragglers and
// spent the window they were counted in: 3–10 refusals in the first
// window where the wave itself was within the limit. While the wave's
// answers keep coming, the rest of them are waited for.
func TestWaveStragglersAreWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowRefusals{limit: 10}
		// The wave's k-th request takes 25k ms more to reach the server
		// (its connection set up late); the rest, 10 ms each way.
		tr := NewTransport(&lateWave{h: s, latency: 10 * time.Millisecond, step: 25 * time.Millisecond, n: 10})
		defer tr.Close()
		drive(t, tr, 10, 40)
		t.Logf("%d refused in the first window, %d in all", s.first, s.refused)
		assert.LessOrEqual(t, s.first, 1)
	})
}

// lateWave is a RoundTripper to h, latency each way, whose first n
// requests take step, 2·step... more on the way there.
type lateWave struct {
	h       http.Handler
	latency time.Duration
	step    time.Duration
	n       int
	mu      sync.Mutex
	sent    int
}

func (l *lateWave) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	k := l.sent
	l.sent++
	l.mu.Unlock()
	way := l.latency
	if k < l.n {
		way += time.Duration(k) * l.step
	}
	time.Sleep(way)
	rec := httptest.NewRecorder()
	l.h.ServeHTTP(rec, req)
	time.Sleep(l.latency)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
