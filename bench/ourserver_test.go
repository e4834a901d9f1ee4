package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/server"
)

// --- Our Transport against our server ----------------------------------------
//
// Issue 19: the server half must advertise what a client can act on. Here
// server.New(nil, WithPolicy(...)).Middleware runs on loopback with one rule
// per case: each rate algorithm at 20 per second (token bucket and GCRA of
// burst 20, a leaky bucket shaping to 20/s, fixed, sliding-window and
// sliding-log windows of 20 per 1 s), alone and chained with a second,
// looser limit (a fixed window of 1000 per hour, the day-window situation of
// the issue). 10 goroutines drive 120 units of work through
// throttle.NewTransport with nothing but the server's word to pace them; a
// unit refused with 429 is retried at once. The same workload runs through
// go-retryablehttp (its default backoff, which honours Retry-After).
//
// The ideal is the least time the rule allows one client for 120 successes
// from the moment of the first request: the same limiters, driven greedily
// in fake time (testing/synctest) from the same phase of the second (the
// windows are aligned to the Unix epoch).
//
// The bounds are the issue's: at most 5 refusals and at most 1.10× the
// ideal (plus one window, 1 s, of slack for real time on a loaded
// loopback, as in the interop test above: 1.01–1.18× measured for the
// buckets), except where a case's slack (ourSlack) says why not yet.
// go-retryablehttp must finish the work. The leaky bucket is a queue the
// server holds requests in (server/shape.go): its capacity of 10 holds
// the first burst of 10 goroutines, and both clients keep to its rate.
// The cases run side by side; the whole test takes about 20 s.

const (
	ourWorkers = 10
	ourTotal   = 120
	ourRate    = 20
)

// ourCase is one rule.
type ourCase struct {
	name  string
	specs []limiters.Spec
	// refusals and ratio, when set, replace the bounds (5, 1.10)
	// for a case the Transport does not yet keep within them.
	refusals int64
	ratio    float64
}

// ourSlack is where the Transport misses the bounds against our
// own server: refusals, elapsed/ideal, by algorithm. None does now; every
// algorithm is held to the 5 refusals and 1.10× (measured: 0–1
// refusals, 1.00–1.04×). The leaky bucket had {14, 1.10} while the
// server refused every request that came before its slot: 9 refusals
// from a cold start of 10 goroutines against a shaper that admitted one.
var ourSlack = map[string]struct {
	refusals int64
	ratio    float64
}{}

func ourCases() []ourCase {
	per := limiters.PerSecond(ourRate)
	algs := []limiters.Spec{
		{Algorithm: limiters.AlgTokenBucket, Rate: per, Limit: ourRate},
		{Algorithm: limiters.AlgGCRA, Rate: per, Limit: ourRate},
		{Algorithm: limiters.AlgLeakyBucket, Rate: per, Limit: ourWorkers},
		{Algorithm: limiters.AlgFixedWindow, Limit: ourRate, Window: time.Second},
		{Algorithm: limiters.AlgSlidingWindow, Limit: ourRate, Window: time.Second},
		{Algorithm: limiters.AlgSlidingLog, Limit: ourRate, Window: time.Second},
	}
	hour := limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 1000, Window: time.Hour}
	var cs []ourCase
	for _, s := range algs {
		sl := ourSlack[s.Algorithm]
		cs = append(cs, ourCase{s.Algorithm, []limiters.Spec{s}, sl.refusals, sl.ratio})
		cs = append(cs, ourCase{s.Algorithm + "+fixed_window_1000/1h", []limiters.Spec{s, hour}, sl.refusals, sl.ratio})
	}
	return cs
}

// ourIdeal is the least time c's limits allow one client for ourTotal
// successes, when the first request goes at phase into a second: the
// limiters themselves, acquired greedily in fake time.
func ourIdeal(t *testing.T, c ourCase, phase time.Duration) time.Duration {
	var ideal time.Duration
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts on a whole second of the epoch.
		time.Sleep(phase)
		ls := make([]limiters.Limiter, len(c.specs))
		for i, s := range c.specs {
			l, err := s.New()
			if err != nil {
				t.Fatal(err)
			}
			ls[i] = l
		}
		l := ls[0]
		if len(ls) > 1 {
			l = limiters.Chain(ls...)
		}
		defer l.Close()
		start := time.Now()
		for range ourTotal {
			if err := l.Acquire(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
		}
		ideal = time.Since(start)
	})
	return ideal
}

// ourRun is one client's drive against one case's server.
type ourRun struct {
	sent, refused atomic.Int64
	ok            int64
	first         time.Time
	elapsed       time.Duration
	err           error
	refusedHeader http.Header
	mu            sync.Mutex
}

// counting counts what reaches the wire.
type counting struct {
	base http.RoundTripper
	r    *ourRun
}

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.r.sent.Add(1)
	resp, err := c.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.r.refused.Add(1)
		c.r.mu.Lock()
		if c.r.refusedHeader == nil {
			c.r.refusedHeader = resp.Header.Clone()
		}
		c.r.mu.Unlock()
	}
	return resp, err
}

func (c counting) CloseIdleConnections() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// ourServer serves c's rule on loopback.
func ourServer(t *testing.T, c ourCase) (*httptest.Server, func()) {
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"only": {
		Default: &server.Rule{Limits: c.specs},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(okHandler)))
	return srv, func() { srv.Close(); p.Close() }
}

// ourDrive runs ourTotal units over ourWorkers goroutines with do, which
// returns the response's status; a unit refused is tried again at once.
func ourDrive(run *ourRun, do func() (int, error)) {
	var (
		next, ok atomic.Int64
		once     sync.Once
		wg       sync.WaitGroup
	)
	run.first = time.Now()
	for range ourWorkers {
		wg.Go(func() {
			for next.Add(1) <= ourTotal {
				for {
					code, err := do()
					if err != nil {
						once.Do(func() { run.err = err })
						return
					}
					if code == http.StatusOK {
						ok.Add(1)
						break
					}
					if code != http.StatusTooManyRequests {
						once.Do(func() { run.err = fmt.Errorf("status %d", code) })
						return
					}
				}
			}
		})
	}
	wg.Wait()
	run.ok, run.elapsed = ok.Load(), time.Since(run.first)
}

// get sends one GET through client and drains the answer.
func get(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ourResult is one case's two runs.
type ourResult struct {
	thr, rh        *ourRun
	idealT, idealR time.Duration
}

func runOurCase(t *testing.T, c ourCase) *ourResult {
	res := &ourResult{thr: &ourRun{}, rh: &ourRun{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Our Transport.
	srv, stop := ourServer(t, c)
	tr := throttle.NewTransport(counting{newBase(), res.thr})
	client := &http.Client{Transport: tr}
	ourDrive(res.thr, func() (int, error) { return get(ctx, client, srv.URL) })
	tr.CloseIdleConnections()
	tr.Close()
	stop()

	// go-retryablehttp, its defaults but for enough retries never to give
	// up, and no logging.
	srv, stop = ourServer(t, c)
	defer stop()
	ctx, cancel = context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	base := newBase()
	defer base.CloseIdleConnections()
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: counting{base, res.rh}}
	rc.Logger = nil
	rc.RetryMax = 1000
	res.rh.first = time.Now()
	ourDrive(res.rh, func() (int, error) {
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return 0, err
		}
		resp, err := rc.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	})
	return res
}

func phaseOf(t time.Time) time.Duration { return time.Duration(t.UnixNano() % int64(time.Second)) }

// TestTransportAgainstOurServer: see the comment at the top of this part.
func TestTransportAgainstOurServer(t *testing.T) {
	goroutinesSettle(t)
	cases := ourCases()
	results := make([]*ourResult, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { results[i] = runOurCase(t, c) })
	}
	wg.Wait()
	var table []string
	for i, c := range cases {
		res := results[i]
		res.idealT = ourIdeal(t, c, phaseOf(res.thr.first))
		res.idealR = ourIdeal(t, c, phaseOf(res.rh.first))
		table = append(table, fmt.Sprintf("%-36s Transport %3d units %3d×429 %6.2fs ratio %.2f | retryablehttp %3d units %3d×429 %6.2fs ratio %.2f | ideal %.2fs",
			c.name, res.thr.ok, res.thr.refused.Load(), res.thr.elapsed.Seconds(), res.thr.elapsed.Seconds()/res.idealT.Seconds(),
			res.rh.ok, res.rh.refused.Load(), res.rh.elapsed.Seconds(), res.rh.elapsed.Seconds()/res.idealR.Seconds(), res.idealT.Seconds()))
	}
	t.Logf("our Transport and go-retryablehttp against our server, %d units over %d goroutines:\n%s", ourTotal, ourWorkers, strings.Join(table, "\n"))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := results[i]
			if res.thr.refusedHeader != nil {
				logHeader(t, "first refusal seen by the Transport", res.thr.refusedHeader)
			}
			for _, r := range []*ourRun{res.thr, res.rh} {
				if r.err != nil {
					t.Fatalf("after %d of %d units: %v", r.ok, ourTotal, r.err)
				}
				if r.ok != ourTotal {
					t.Fatalf("%d of %d units done", r.ok, ourTotal)
				}
			}
			refusals, ratio := int64(5), 1.10
			if c.ratio > 0 {
				refusals, ratio = c.refusals, c.ratio
			}
			if n := res.thr.refused.Load(); n > refusals {
				t.Errorf("Transport: %d×429; want ≤ %d", n, refusals)
			}
			if bound := time.Duration(ratio*float64(res.idealT)) + time.Second; res.thr.elapsed > bound {
				t.Errorf("Transport: elapsed %v; want ≤ %v (%.2f× the ideal %v)", res.thr.elapsed.Round(time.Millisecond), bound.Round(time.Millisecond), ratio, res.idealT.Round(time.Millisecond))
			}
		})
	}
}

// TestTransportFinalRefusal: a request no wait can admit (5,000 tokens
// against a cap of 1,000 per hour) is refused for good, and our Transport
// takes it so: it hands the 429 back at once, sends it once, and neither
// pauses the partition nor slows the requests that fit.
func TestTransportFinalRefusal(t *testing.T) {
	goroutinesSettle(t)
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"only": {
		Endpoints: map[string]server.Rule{"POST /api/ask": {
			Limits:   []limiters.Spec{{Algorithm: limiters.AlgGCRA, Rate: limiters.PerSecond(ourRate), Limit: ourRate}},
			CostCaps: []limiters.Spec{{Algorithm: limiters.AlgFixedWindow, Limit: 1000, Window: time.Hour}},
		}},
	}}}, server.WithCapCost(func(r keyextract.Request) int {
		n, _ := strconv.Atoi(r.Header("X-Tokens"))
		return n
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := httptest.NewServer(server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(okHandler)))
	defer srv.Close()
	var paused atomic.Int64
	run := &ourRun{}
	tr := throttle.NewTransport(counting{newBase(), run}, throttle.WithObserver(func(e throttle.Event) {
		if e.Kind == throttle.EventPaused {
			paused.Add(1)
		}
	}))
	defer tr.Close()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var final atomic.Bool
	ask := func(tokens int) (int, http.Header, time.Duration) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/ask", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Tokens", strconv.Itoa(tokens))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if tokens > 1000 {
			final.Store(throttle.Classify(resp).Signal.Final())
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header, time.Since(start)
	}
	code, h, _ := ask(5000)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "" {
		t.Fatalf("status %d, Retry-After %q; want 429 with none", code, h.Get("Retry-After"))
	}
	if !final.Load() {
		t.Error("throttle.Classify does not read the refusal as final")
	}
	if n := run.sent.Load(); n != 1 {
		t.Errorf("the final refusal went out %d times; want once", n)
	}
	for i := range 5 {
		code, _, took := ask(100)
		if code != http.StatusOK {
			t.Fatalf("request %d that fits: status %d", i, code)
		}
		if took > time.Second {
			t.Errorf("request %d that fits took %v: the partition was held back", i, took)
		}
	}
	if n := paused.Load(); n != 0 {
		t.Errorf("the Transport paused %d times", n)
	}
}
