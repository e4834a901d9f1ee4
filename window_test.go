package throttle

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// requestWindow is a fixed window that starts at the first request after
// the last one ended (as ExampleNewTransport's server), and writes its
// reset as X-RateLimit-Reset-After in seconds to the millisecond, rounded
// to the nearest as strconv does (Discord's form): up to half a
// millisecond short.
type requestWindow struct {
	mu          sync.Mutex
	limit, used int
	length      time.Duration
	end         time.Time
	ok, refused int
}

func (s *requestWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !now.Before(s.end) {
		s.used, s.end = 0, now.Add(s.length)
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(s.end.Sub(now).Seconds(), 'f', 3, 64))
	if s.used == s.limit {
		s.refused++
		h.Set("X-RateLimit-Remaining", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.used++
	s.ok++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.limit-s.used))
}

// TestResetAfterRoundedToTheMillisecond: a reset written to the
// millisecond may be rounded half a millisecond short of the window's
// real end. With answers that take no time to come back, a client that
// took it at its word would send its next window's first request while
// the server's window is still full: the gate allows a millisecond, the
// field's resolution (the cause of ExampleNewTransport's rare 429 over
// loopback, where a round trip can take less than that).
func TestResetAfterRoundedToTheMillisecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Off the whole second (a bubble starts on one), where a reset
		// could be taken for one written in whole seconds.
		time.Sleep(123456789 * time.Nanosecond)
		// 1.0004 s: every reset it writes is 0.4 ms short.
		s := &requestWindow{limit: 5, length: time.Second + 400*time.Microsecond}
		tr := NewTransport(&apisim.Transport{Handler: s})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					resp, err := client.Get("http://api.test/")
					if !assert.NoError(t, err) {
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 20, s.ok+s.refused)
		assert.Zero(t, s.refused, "refusals")
	})
}

// TestReorderedAnswersNeverRaiseTheCount: within a window the server's
// remaining only falls, so answers that arrive in the reverse of the order
// the server wrote them (9, 8, 7, 6, 5 left, arriving 5 first) leave the
// gate's count at 5, the least it heard, not at the 9 it heard last. (The
// gate tells a stale answer by the answers it had learned from when its
// request was sent, not by its arrival: this holds the model to it.) An
// answer to a request sent after those were learned is fresher and is
// believed, and a later reset is a new window.
func TestReorderedAnswersNeverRaiseTheCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(123456789 * time.Nanosecond) // off the whole second
		g := &gate{key: "api.test", maxPause: time.Minute}
		defer g.close()
		answer := func(tk ticket, remaining int, resetAfter string) {
			h := http.Header{}
			h.Set("X-RateLimit-Limit", "100")
			h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
			h.Set("X-RateLimit-Reset-After", resetAfter)
			g.done(&tk, answerOf(&http.Response{StatusCode: http.StatusOK, Header: h}), time.Now())
		}
		avail := func() int64 {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.quotas[0].avail(time.Now(), g.onWire())
		}
		send := func() ticket {
			var tk ticket
			w, err := g.enter(context.Background(), time.Time{}, nil, &tk)
			require.NoError(t, err)
			require.Nil(t, w, "a request goes at once")
			return tk
		}
		var sent [5]ticket
		for i := range sent {
			sent[i] = send()
		}
		for i := len(sent) - 1; i >= 0; i-- { // the server counted them in order
			answer(sent[i], 99-i, "10")
			// Those still on the wire may be missing from its count.
			assert.EqualValues(t, 95-i, avail(), "after the answer that said %d left", 99-i)
		}
		tk := send()
		time.Sleep(10 * time.Millisecond)
		answer(tk, 94, "9.99")
		assert.EqualValues(t, 94, avail(), "a fresh answer is believed")
		time.Sleep(10 * time.Second)
		tk = send() // the probe of the next window
		answer(tk, 99, "10")
		assert.EqualValues(t, 99, avail(), "a new window")
	})
}

// TestWindowsFromARequestOffTheWholeSecond: windows that start at the
// first request after the last one ended (ulule), their resets written in
// epoch seconds rounded down, with the client starting at various points
// of a second. Where the first window's end falls late in its second, the
// probe that finds it open goes a second after the reset; the window it
// opens ends where that probe fell in its second, not 999 ms after the
// next whole second (which made every later window wait a second too
// long: 1.5-1.8× the ideal time). 1.02-1.20× today, varying with the
// order the goroutines run in, hence the bound of 1.25×.
func TestWindowsFromARequestOffTheWholeSecond(t *testing.T) {
	const ideal = 9 * time.Second // 200 requests, 20 a window, the first at once
	for _, off := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(off.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(off)
				a := githubAPI(20, time.Second, true)
				tr := NewTransport(handlerTransport{h: a, latency: 5 * time.Millisecond})
				defer tr.Close()
				elapsed := drive(t, tr, 10, 200)
				ok, limited := a.counts()
				assert.Equal(t, 200, ok)
				assert.LessOrEqual(t, limited, 3, "429s")
				assert.LessOrEqual(t, elapsed.Seconds()/ideal.Seconds(), 1.25, "elapsed %v", elapsed)
			})
		})
	}
}

// TestWindowsAtEveryPhase runs the Transport against windows whose resets
// are written in whole seconds, rounded down, starting every 20 ms of a
// second, over links of 0.2, 1 and 5 ms: a fixed window from the first
// request (ulule), one on the clock, and a sliding window aligned to its
// creation (httprate). Two bugs lived at particular phases and nowhere
// else (CI caught them against the real ulule and httprate, 45 and 16
// 429s, when a run happened to start late in its second):
//
//   - Probing after a whole-second reset steps our guess of the reset
//     forward (50 ms, 100 ms, 200 ms, …); a step of more than half a second
//     was taken for a new window that had opened nearly spent, so a fixed
//     window was paced as a sliding one, a 429 every 40 ms.
//   - A probe that a Retry-After held back more than a second after the
//     reset taught a phase of 999 ms: every later window waited a second
//     too long (1.8× the ideal).
//
// Each bound holds at every phase (the worst case is printed
// by -v).
func TestWindowsAtEveryPhase(t *testing.T) {
	type server struct {
		name   string
		n      int           // requests to send
		ideal  time.Duration // the least time they take
		max429 int
		ratio  float64 // bound on elapsed/ideal
		start  func() (http.Handler, func() int)
	}
	fixed := func(fromFirst bool) func() (http.Handler, func() int) {
		return func() (http.Handler, func() int) {
			a := githubAPI(20, time.Second, fromFirst)
			return a, func() int { _, l := a.counts(); return l }
		}
	}
	servers := []server{
		{name: "from-first-request", n: 200, ideal: 9 * time.Second, max429: 3, ratio: 1.25, start: fixed(true)},
		{name: "on-the-clock", n: 200, ideal: 9 * time.Second, max429: 2, ratio: 1.2, start: fixed(false)},
		// (1.405× at the worst phase since guessed resets — a reset that
		// passed while units remained, a probe time — take the later
		// again: sethvargo's windows, whose written reset is a second
		// early, were probed and refused twice a window without it.)
		{name: "sliding", n: 120, ideal: 6 * time.Second, max429: 3, ratio: 1.45, start: func() (http.Handler, func() int) {
			srv := apisim.NewSlidingWindow(20, time.Second)
			srv.Origin = time.Now()
			return srv, func() int { return int(srv.Snapshot().Refused) }
		}},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			var worst429 int
			var worstRatio float64
			for _, lat := range []time.Duration{200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
				for off := time.Duration(0); off < time.Second; off += 20 * time.Millisecond {
					synctest.Test(t, func(t *testing.T) {
						time.Sleep(off)
						h, refused := s.start()
						tr := NewTransport(handlerTransport{h: h, latency: lat})
						defer tr.Close()
						ratio := drive(t, tr, 10, s.n).Seconds() / s.ideal.Seconds()
						n := refused()
						worst429, worstRatio = max(worst429, n), max(worstRatio, ratio)
						assert.LessOrEqual(t, n, s.max429, "429s at phase %v, link %v", off, lat)
						assert.LessOrEqual(t, ratio, s.ratio, "elapsed/ideal at phase %v, link %v", off, lat)
					})
				}
			}
			t.Logf("worst: %d×429, %.2f× the ideal", worst429, worstRatio)
		})
	}
}

// TestSilentHostStartsTalking: a host whose answers say nothing of rate
// limits is served without reading the clock (gate.doneQuiet); the first
// answer that does say something is still learned in full. Here the
// window's fields appear only after the first 30 requests, the window has
// 20 a second: from then on the Transport keeps within it, as it would had
// the fields been there from the start.
func TestSilentHostStartsTalking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw := &fixedWindow{limit: 20, window: time.Second}
		var served int
		a := &api{decide: func(now time.Time, h http.Header) bool {
			served++
			ok, rem, end := fw.hit(now)
			if served > 30 {
				h.Set("X-RateLimit-Limit", "20")
				h.Set("X-RateLimit-Remaining", strconv.Itoa(rem))
				h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(end.Sub(now).Seconds(), 'f', 3, 64))
			}
			return ok
		}}
		tr := NewTransport(handlerTransport{h: a, latency: 5 * time.Millisecond})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		for range 30 { // one at a time, well inside the window's limit: all silent
			resp, err := client.Get("http://api.test/items")
			require.NoError(t, err)
			resp.Body.Close()
			time.Sleep(100 * time.Millisecond)
		}
		_, limited := a.counts()
		require.Zero(t, limited)
		drive(t, tr, 10, 100)
		ok, limited := a.counts()
		assert.Equal(t, 130, ok)
		assert.LessOrEqual(t, limited, 1, "the fields, once they came, were followed")
	})
}

// TestWindowOpenerAnsweredLate: against express-rate-limit's legacy
// headers (a window from the client's first request, its reset in epoch
// seconds rounded up), answers that come back out of order (up to 30 ms
// more on the way back) may bring the answer that emptied a window before
// the one that opened it. The opener's answer still tells when the window
// opened (span.opened), and brings forward the pause the empty quota
// began (gate.shorten): each window is waited out to its end, not to the
// rounded-up reset, a second later (1.21× in 7 of 8 seeds before).
func TestWindowOpenerAnsweredLate(t *testing.T) {
	b := modelBehaviourOf(t, "b/")
	for seed := uint64(1); seed <= 8; seed++ {
		for _, phase := range []time.Duration{0, 500 * time.Millisecond} {
			run := modelRun{rate: 10, workers: 10, total: 80, phase: phase, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond,
				back: 30 * time.Millisecond, method: http.MethodGet, seed: seed}
			t.Run(fmt.Sprintf("seed %d/phase %v", seed, phase), func(t *testing.T) {
				r := runModel(t, b, run)
				assert.True(t, r.finished)
				assert.Zero(t, r.counts.refused, "refusals")
				assert.Zero(t, r.counts.inPause, "sent during a pause")
				assert.LessOrEqual(t, r.ratio(), 1.10, "elapsed %v, ideal %v", r.elapsed, r.ideal)
			})
		}
	}
}

// TestWindowStartedByAMillisecondClock: express-rate-limit's windows start
// at a client's request, read from a clock in milliseconds (Date.now()),
// and its legacy reset is that start plus the window, in epoch seconds
// rounded up. A window its clock began in the millisecond our request left
// in, a little before our reading, ends a fraction of a millisecond less
// than a second after the request left; read exactly, that bound left span
// no whole-second length to guess, and from the window whose end crossed a
// whole second on, every window was waited out to its rounded-up reset: a
// second late, 1.29–1.88× (the real server, with a loaded machine's
// answers a few milliseconds apart: 1.42× and 1.67×). Fake time: a clock
// that starts 980–998 ms into a second, answers a quarter of a millisecond
// away, 250 units.
func TestWindowStartedByAMillisecondClock(t *testing.T) {
	b := modelBehaviourOf(t, "b/")
	for ph := 980 * time.Millisecond; ph < time.Second; ph += 6 * time.Millisecond {
		t.Run(fmt.Sprintf("phase %v", ph), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: 10, workers: 10, total: 250, phase: ph, latency: 250 * time.Microsecond,
				jitter: 125 * time.Microsecond, method: http.MethodGet, seed: 3})
			assert.True(t, r.finished)
			assert.Zero(t, r.counts.refused, "refusals")
			assert.LessOrEqual(t, r.ratio(), 1.05, "elapsed %v, ideal %v", r.elapsed, r.ideal)
		})
	}
}

// TestWindowLongerThanGuessed: a window of 5 s that starts at a
// client's first request, 60 a window, 6 goroutines 168 ms away. Early in
// the window span guesses its length at the shortest whole second its
// bounds allow; when that guess passed, the next answer — fewer remaining,
// the same reset — was taken for a new window, span's upper bound fell to
// a second and a half for good, and every window waited for its reset
// rounded up plus a phase that grew each window (1.39–1.41×). An answer
// that says fewer remain with the same reset is the same window
// (quota.apply's same): the guess grows to 5 s (1.35×). A reset in
// whole seconds bounds the length from below as well as above (the window
// ends less than a second before it: span.floorBy): 5 s from the first
// window's answers, no probe refused at 1, 2, 3 and 4 s (1.18×; the rest
// is the goroutines' own pace: six a round trip of 420 ms send a window's
// sixty in over 4 s, the last window's too, which the ideal counts as
// none).
func TestWindowLongerThanGuessed(t *testing.T) {
	b := modelBehaviourOf(t, "b/")
	for _, ph := range []time.Duration{0, 1500 * time.Millisecond, 4395 * time.Millisecond} {
		t.Run(fmt.Sprintf("phase %v", ph), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: 60, window: 5 * time.Second, workers: 6, total: 360, phase: ph,
				latency: 168 * time.Millisecond, jitter: 84 * time.Millisecond, method: http.MethodGet})
			assert.True(t, r.finished)
			assert.Zero(t, r.counts.refused, "refusals")
			assert.LessOrEqual(t, r.ratio(), 1.22, "elapsed %v, ideal %v", r.elapsed, r.ideal)
		})
	}
}

// TestOwnBucketsFarAway: this project's server.New with a bucket (GCRA,
// token, leaky) at 34 a second, burst 17, 25 goroutines 162 ms away.
// Read as a window of its capacity, whole again at its "full" time, a
// bucket was sent in bursts a round trip apart (1.66× and 1.67× the
// ideal); found to refill (quota.bucket), it is sent as its units come
// back: 1.09–1.10×.
func TestOwnBucketsFarAway(t *testing.T) {
	for _, mb := range modelBehaviours() {
		switch mb.name {
		case "f/own gcra", "f/own token_bucket", "f/own leaky_bucket":
		default:
			continue
		}
		t.Run(mb.name, func(t *testing.T) {
			run := modelRun{rate: 34, workers: 25, total: 204, latency: 162 * time.Millisecond, jitter: 81 * time.Millisecond, method: http.MethodGet}
			r := runModel(t, mb, run)
			assert.True(t, r.finished)
			assert.LessOrEqual(t, r.counts.refused, 10, "refusals")
			assert.LessOrEqual(t, r.ratio(), 1.15, "elapsed %v, ideal %v", r.elapsed, r.ideal)
		})
	}
}
