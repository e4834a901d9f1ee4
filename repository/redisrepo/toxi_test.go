package redisrepo

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// The fault suite puts a real Toxiproxy between the library and a real
// redis-server, with the client built as the package documentation builds
// it (redis.NewClient(&redis.Options{Addr: …}), go-redis's defaults: its
// reads ignore contexts), and checks under each fault that no call outlives
// its timeout by more than 250 ms, that FailClosed never admits past the
// limit, that lease mode stays within its bound, that the breaker opens
// and closes, that the FeedbackStore's Transports never hang, and that
// everything recovers by itself once the fault is gone (goleak, in
// TestMain, checks that no goroutine is left).

// fault is one way the network between us and Redis goes wrong.
type fault struct {
	name  string
	hard  bool // nothing gets through: the breaker must open
	apply func(t *testing.T, p *redistest.Proxy)
	heal  func(t *testing.T, p *redistest.Proxy)
}

func toxic(typ, stream string, attrs map[string]any) fault {
	name := typ + "_" + stream
	return fault{
		apply: func(t *testing.T, p *redistest.Proxy) {
			p.Add(t, redistest.Toxic{Name: name, Type: typ, Stream: stream, Attributes: attrs})
		},
		heal: func(t *testing.T, p *redistest.Proxy) { p.Remove(t, name) },
	}
}

func faults() []fault {
	with := func(f fault, name string, hard bool) fault { f.name, f.hard = name, hard; return f }
	return []fault{
		// every reply 300 ms ± 200 ms late: most miss a 200 ms timeout
		with(toxic("latency", "downstream", map[string]any{"latency": 300, "jitter": 200}), "latency", false),
		// a black hole: the bytes go in, nothing comes back
		with(toxic("timeout", "upstream", map[string]any{"timeout": 0}), "blackhole", true),
		// every connection reset as soon as it sends
		with(toxic("reset_peer", "upstream", map[string]any{"timeout": 0}), "reset", true),
		// replies in 1-byte pieces, 5 ms apart
		with(toxic("slicer", "downstream", map[string]any{"average_size": 1, "size_variation": 0, "delay": 5000}), "slicer", false),
		// replies at 1 KB/s
		with(toxic("bandwidth", "downstream", map[string]any{"rate": 1}), "bandwidth", false),
		{name: "down", hard: true,
			apply: func(t *testing.T, p *redistest.Proxy) { p.Disable(t) },
			heal:  func(t *testing.T, p *redistest.Proxy) { p.Enable(t) }},
	}
}

const (
	toxiTimeout = 200 * time.Millisecond
	toxiSlack   = 250 * time.Millisecond
	toxiFault   = 1500 * time.Millisecond // how long each fault lasts
)

// docClient is the client as the package documentation builds it.
func docClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

var toxiSeq atomic.Int64

func toxiProxy(t *testing.T, tp *redistest.Toxiproxy, s *redistest.Server) *redistest.Proxy {
	return tp.Proxy(t, "redis"+strconv.FormatInt(toxiSeq.Add(1), 10), s.Addr)
}

// TestToxiproxy runs each fail mode, lease mode and the FeedbackStore
// through each fault, the sub-tests in parallel (each on its own proxy and
// keys).
func TestToxiproxy(t *testing.T) {
	s := redistest.Start(t)
	tp := redistest.StartToxiproxy(t)
	for _, f := range faults() {
		t.Run(f.name, func(t *testing.T) {
			for _, mode := range []FailMode{FailClosed, FailOpen, FailLocal} {
				t.Run(mode.String(), func(t *testing.T) {
					t.Parallel()
					toxiRepo(t, f, mode, toxiProxy(t, tp, s))
				})
			}
			t.Run("leases", func(t *testing.T) {
				t.Parallel()
				toxiLeases(t, f, toxiProxy(t, tp, s), s)
			})
			t.Run("feedback", func(t *testing.T) {
				t.Parallel()
				toxiFeedback(t, f, toxiProxy(t, tp, s), s)
			})
		})
	}
	t.Run("unreachable-at-start", func(t *testing.T) {
		p := toxiProxy(t, tp, s)
		p.Disable(t)
		events := &eventLog{}
		r := newRepo(t, docClient(t, p.Addr), faultSpec, faultOpts(FailClosed, events)...)
		begin := time.Now()
		_, err := r.TryAcquire(context.Background(), "k", 1)
		if !errors.Is(err, ErrUnavailable) || time.Since(begin) > toxiTimeout+toxiSlack {
			t.Fatalf("FailClosed with Redis unreachable: %v after %v", err, time.Since(begin))
		}
		if !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("Redis unreachable reported as %q, want it to say connection refused", err)
		}
		st := throttle.NewTransport(okServer(t), throttle.WithFeedbackStore(newToxiStore(t, p.Addr)))
		defer st.Close()
		p.Enable(t)
		waitUp(t, r, "k")
	})
}

// toxiRepo: a repository of one fail mode under f.
func toxiRepo(t *testing.T, f fault, mode FailMode, p *redistest.Proxy) {
	events := &eventLog{}
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 20, Rate: limiters.PerSecond(50)}
	opts := []Option{WithFailMode(mode), WithTimeout(toxiTimeout), WithBreaker(3, 300*time.Millisecond),
		WithReplicas(4), WithObserver(events.add), WithPrefix(p.Name + ":")}
	r := newRepo(t, docClient(t, p.Addr), spec, opts...)
	waitUpLimit(t, r, "k", spec.Limit)

	var granted, late atomic.Int64
	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	until(&wg, 4, stop, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		t0 := time.Now()
		d, err := r.TryAcquire(ctx, "k", 1)
		el := time.Since(t0)
		if el > toxiTimeout+toxiSlack {
			late.Add(1)
		}
		for {
			w := worst.Load()
			if int64(el) <= w || worst.CompareAndSwap(w, int64(el)) {
				break
			}
		}
		if err == nil && d.Allowed {
			granted.Add(1)
		}
		if mode == FailClosed && err != nil && !errors.Is(err, ErrUnavailable) {
			t.Errorf("FailClosed: %v, want ErrUnavailable", err)
		}
		time.Sleep(2 * time.Millisecond)
		return true
	})
	time.Sleep(100 * time.Millisecond)
	f.apply(t, p)
	time.Sleep(toxiFault)
	if f.hard && events.count(EventBreaker, "open") == 0 {
		t.Errorf("%s: the breaker never opened (now %s)", f.name, r.BreakerState())
	}
	f.heal(t, p)
	waitUpLimit(t, r, "k", spec.Limit)
	close(stop)
	wg.Wait()
	el := time.Since(begin)
	t.Logf("%s/%v: %d granted in %v, worst call %v, breaker opened %d times, closed %d",
		f.name, mode, granted.Load(), el.Round(time.Millisecond), time.Duration(worst.Load()).Round(time.Millisecond),
		events.count(EventBreaker, "open"), events.count(EventBreaker, "closed"))
	if n := late.Load(); n > 0 {
		t.Errorf("%d calls outlived the %v timeout by more than %v (worst %v)", n, toxiTimeout, toxiSlack, time.Duration(worst.Load()))
	}
	if mode == FailClosed {
		if bound := int64(spec.Limit) + int64(50*el.Seconds()) + 1; granted.Load() > bound {
			t.Errorf("FailClosed admitted %d in %v, past the limit's %d", granted.Load(), el, bound)
		}
	}
	if f.hard && events.count(EventBreaker, "closed") == 0 {
		t.Errorf("%s: the breaker never closed again (now %s)", f.name, r.BreakerState())
	}
}

// waitUpLimit waits until r decides through Redis (a Decision of limit
// lim, the breaker closed).
func waitUpLimit(t *testing.T, r *Repository, key string, lim int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		d, err := r.TryAcquire(ctx, key, 0)
		cancel()
		if err == nil && d.Limit == lim && r.BreakerState() == "closed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %+v, %v, breaker %s", d, err, r.BreakerState())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// toxiLeases: two processes share a rate in lease mode, one of them
// through the faulty proxy: together they stay within the documented
// bound, rate × T + burst + processes (plus the permits of one renewal's
// round trip when a share moves, which we allow as rate × 50 ms).
func toxiLeases(t *testing.T, f fault, p *redistest.Proxy, s *redistest.Server) {
	const rate, burst = 200, 10
	spec := limiters.Spec{Algorithm: limiters.AlgTokenBucket, Limit: burst, Rate: limiters.PerSecond(rate)}
	opts := []Option{WithLeases(100 * time.Millisecond), WithTimeout(toxiTimeout), WithBreaker(3, 300*time.Millisecond),
		WithPrefix(p.Name + ":")}
	far := newRepo(t, docClient(t, p.Addr), spec, opts...)
	near := newRepo(t, docClient(t, s.Addr), spec, opts...)
	var granted, late atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	for _, r := range []*Repository{far, near} {
		until(&wg, 2, stop, func() bool {
			t0 := time.Now()
			d, err := r.TryAcquire(context.Background(), "k", 1)
			if time.Since(t0) > toxiTimeout+toxiSlack {
				late.Add(1)
			}
			if err == nil && d.Allowed {
				granted.Add(1)
			}
			time.Sleep(500 * time.Microsecond)
			return true
		})
	}
	time.Sleep(300 * time.Millisecond)
	f.apply(t, p)
	time.Sleep(toxiFault)
	f.heal(t, p)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	el := time.Since(begin)
	bound := int64(rate*el.Seconds()) + burst + 2 + rate/20
	t.Logf("%s/leases: %d granted in %v (bound %d)", f.name, granted.Load(), el.Round(time.Millisecond), bound)
	if granted.Load() > bound {
		t.Errorf("lease mode admitted %d in %v, past its bound %d", granted.Load(), el, bound)
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d lease-mode calls outlived the timeout", n)
	}
}

// okServer is a server that answers 200 with a large window quota, so that
// every request claims and settles through the store.
func okServer(t *testing.T) http.RoundTripper {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "1000000")
		w.Header().Set("X-RateLimit-Remaining", "900000")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	return &hostRT{base: srv.Client().Transport, url: srv.URL}
}

// hostRT sends every request to url.
type hostRT struct {
	base http.RoundTripper
	url  string
}

func (h *hostRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := r.Clone(r.Context())
	u := *r2.URL
	u.Scheme, u.Host = "http", h.url[len("http://"):]
	r2.URL, r2.Host = &u, ""
	return h.base.RoundTrip(r2)
}

func (h *hostRT) CloseIdleConnections() {
	if c, ok := h.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func newToxiStore(t *testing.T, addr string) *FeedbackStore {
	st := NewFeedbackStore(docClient(t, addr), WithTimeout(toxiTimeout), WithPrefix("fb"+strconv.FormatInt(toxiSeq.Add(1), 10)+":"))
	t.Cleanup(func() { st.Close() })
	return st
}

// toxiFeedback: Transports sharing a FeedbackStore through the faulty
// proxy never hang on it (a request waits at most a store timeout per
// store call) and are back on the store once the fault is gone.
func toxiFeedback(t *testing.T, f fault, p *redistest.Proxy, s *redistest.Server) {
	st := newToxiStore(t, p.Addr)
	var unavailable, paused atomic.Int64
	tr := throttle.NewTransport(okServer(t), throttle.WithFeedbackStore(st), throttle.WithObserver(func(e throttle.Event) {
		switch e.Kind {
		case throttle.EventStoreUnavailable:
			unavailable.Add(1)
		case throttle.EventPaused:
			paused.Add(1)
		}
	}))
	defer tr.Close()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := c.Get("http://api.example/x")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = errors.New(resp.Status)
			}
		}
		return time.Since(t0), err
	}
	for range 3 { // the quota is known: from now on each request claims and settles
		if _, err := get(); err != nil {
			t.Fatal(err)
		}
	}
	var late, failed atomic.Int64
	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	until(&wg, 3, stop, func() bool {
		el, err := get()
		if err != nil {
			failed.Add(1)
		}
		// a claim and a settle, each within the store's timeout, and at
		// most blindFor held back by a claim whose answer was lost
		if el > 2*toxiTimeout+blindFor+toxiSlack {
			late.Add(1)
		}
		for {
			w := worst.Load()
			if int64(el) <= w || worst.CompareAndSwap(w, int64(el)) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		return true
	})
	time.Sleep(100 * time.Millisecond)
	f.apply(t, p)
	time.Sleep(toxiFault)
	f.heal(t, p)
	// recovered: the store answers again, and requests are quick
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := st.Claim(ctx, "probe-recovery")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store never recovered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	// and requests are quick again, by themselves, within a few seconds
	for quick := 0; quick < 5; {
		el, err := get()
		switch {
		case err == nil && el < toxiTimeout:
			quick++
		case time.Now().After(deadline):
			t.Fatalf("after recovery: a request took %v: %v", el, err)
		default:
			quick = 0
		}
	}
	// The subscription recovers too: a pause another process publishes
	// (through a store of its own, straight to Redis) reaches it.
	other := NewFeedbackStore(docClient(t, s.Addr), WithPrefix(st.prefix))
	defer other.Close()
	heal := time.Now()
	for paused.Load() == 0 {
		if time.Since(heal) > 10*time.Second {
			t.Fatal("no pause published after the fault reached the Transport")
		}
		if err := other.Pause(context.Background(), "api.example", "other", time.Now().Add(50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s/feedback: worst request %v, %d failed, %d store-unavailable events; Pub/Sub back %v after the fault",
		f.name, time.Duration(worst.Load()).Round(time.Millisecond), failed.Load(), unavailable.Load(), time.Since(heal).Round(time.Millisecond))
	if n := late.Load(); n > 0 {
		t.Errorf("%d requests hung past the store's timeout (worst %v)", n, time.Duration(worst.Load()))
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d requests failed while only the store was faulty", n)
	}
}
