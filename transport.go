package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/feedbackstore"
	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/internal/streamhook"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// DefaultMaxPause caps how long a server's answer may pause a partition:
// a hostile or broken Retry-After: 999999999 must not freeze a client.
const DefaultMaxPause = 15 * time.Minute

// DefaultPermitLease bounds how long a response body may hold a
// concurrency permit after the response headers arrived (WithPermitLease).
// It is DefaultMaxPause for the same reason: no single event — a server's
// pause or a caller's forgotten body — stalls a partition for longer. An
// API response is read in seconds; a body still open after 15 minutes is
// almost always one its caller forgot to close, and a stream that really
// lasts that long only lets one more request in early.
const DefaultPermitLease = 15 * time.Minute

// Transport is an http.RoundTripper that keeps its callers inside a rate
// limit: every request waits, in FIFO order, for a permit from its
// partition's limiter, and pauses and paces itself on what the servers it
// calls say in their rate-limit headers. See the package documentation.
//
// A Transport is safe for concurrent use. Close it when done.
type Transport struct {
	base     http.RoundTripper
	repo     repository.Repository // WithLimiter's limiter, as a keyless repository
	key      keyextract.Extractor
	maxWait  time.Duration
	feedback bool
	maxPause time.Duration
	lease    time.Duration
	observer func(Event)
	route    func(*http.Request) string // WithBucketRoute, or nil
	charge   string                     // WithLimiterCost's quota, or "" (each request takes 1)
	logger   *slog.Logger
	holds    bool // the repository's permits stay taken until the body is done

	sharing // WithFeedbackStore's store, or none (feedback.go)

	unknown unknownQuotas // the declared quota names already reported (cost.go)

	mu     sync.RWMutex
	parts  partitions // the partitions' gates (partitions.go)
	closed atomic.Bool
}

// Option configures a Transport.
//
// One rule holds for what NewTransport and its options are given: nothing
// nil is accepted only to crash a request later. A nil Option, and a nil
// limiter, repository, extractor or store given to an option (WithLimiter,
// WithRepository, WithKey, WithFeedbackStore), panic at once with a
// message naming the option. Where nil has a meaning the option says so:
// a nil base RoundTripper is http.DefaultTransport, and a nil function or
// logger (WithObserver, WithLogger, WithBucketRoute) means none, the
// default.
type Option func(*Transport)

// mustNotBeNil panics, naming the option, when v (an interface) is nil.
func mustNotBeNil(v any, option, what string) {
	if v == nil {
		panic("throttle: " + option + ": nil " + what)
	}
}

// WithLimiter makes every request, whatever its partition, take a permit
// from l. The Transport owns l: Close closes it. WithLimiter and
// WithRepository replace each other: the last one given wins. A nil l
// panics.
func WithLimiter(l limiters.Limiter) Option {
	mustNotBeNil(l, "WithLimiter", "limiter")
	return func(t *Transport) { t.repo = keyless{l} }
}

// WithRepository makes every request take a permit from its partition's
// limiter in r (the partition is the key WithKey extracts). The Transport
// owns r: Close closes it. A repository that implements
// limiters.PermitHolder says whether its permits stay taken until the
// response body is done; one that does not is assumed to hold them. A nil
// r panics.
func WithRepository(r repository.Repository) Option {
	mustNotBeNil(r, "WithRepository", "repository")
	return func(t *Transport) { t.repo = r }
}

// WithLimiterCost makes every request take from the WithLimiter limiter
// or the WithRepository repository as many permits as it declares, with
// WithCost, it will spend of the quota named quota (1 when it declares
// none): a local "tokens" bucket of 90,000 a minute keeps a client inside
// a quota it knows before the server ever answers. A request declaring
// more than the limiter's limit fails at once with
// limiters.ErrExceedsLimit.
func WithLimiterCost(quota string) Option { return func(t *Transport) { t.charge = quota } }

// WithKey sets how a request's partition is chosen; the default is
// keyextract.Host(): the request URL's host including its port. Requests for
// which the extractor reports no key share the partition "". A nil e
// panics.
func WithKey(e keyextract.Extractor) Option {
	mustNotBeNil(e, "WithKey", "extractor")
	return func(t *Transport) { t.key = e }
}

// WithMaxWait bounds how long a request may wait for its turn, on top of its
// context's deadline: a request waits until the earlier of the two. A
// request that would wait longer fails at once with a
// *limiters.RejectedError whose Reason names the bound. Zero (the default)
// means no bound but the context's.
func WithMaxWait(d time.Duration) Option { return func(t *Transport) { t.maxWait = d } }

// WithServerFeedback turns on or off (default on) listening to the servers'
// rate-limit headers: Retry-After, X-RateLimit-*, the IETF RateLimit fields
// and the other formats headers.Parse reads.
func WithServerFeedback(on bool) Option { return func(t *Transport) { t.feedback = on } }

// WithMaxPause caps how long one server answer may pause a partition
// (default DefaultMaxPause). A server that asks for a pause beyond what
// headers.Parse reads (more than 366 days) gets this pause.
func WithMaxPause(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.maxPause = d
		}
	}
}

// WithPermitLease bounds how long a response body may hold its
// concurrency permit after the response headers arrived (default
// DefaultPermitLease). When the lease runs out the permit goes back to the
// partition, exactly once (closing the body later gives nothing back
// twice), the body stays readable, and the observer receives
// EventLeaseExpired naming the partition: a body its caller forgot to close
// cannot stall a partition for the life of the process. Zero turns the
// lease off: a permit is then held until the body is closed or read to EOF,
// however long that takes. Only limiters that hold permits (Concurrency, a
// Chain with one) are affected.
func WithPermitLease(d time.Duration) Option {
	return func(t *Transport) { t.lease = max(d, 0) }
}

// WithObserver receives an Event for every permit acquired, every request
// refused, every pause and resumption, every permit lease that ran out,
// and a WithCost naming a quota the server did not report. It is called synchronously on the request's goroutine or a timer's,
// never with a lock held; keep it fast. A nil f means no observer.
func WithObserver(f func(Event)) Option { return func(t *Transport) { t.observer = f } }

// WithLogger logs what deserves a log line through l: a pause a server
// asked for (Info), a permit lease that ran out (Warn: a response body
// was not closed) and a WithCost naming a quota the server did not report
// (Warn: a misspelt name charges nothing). A client made by NewRetryableClient also gives l to
// go-retryablehttp, which logs every request and retry. The default, and
// a nil l, is silent.
func WithLogger(l *slog.Logger) Option { return func(t *Transport) { t.logger = l } }

// NewTransport returns a Transport sending through base
// (http.DefaultTransport if nil). A nil option panics (see Option).
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{
		base:     base,
		key:      keyextract.Host(),
		feedback: true,
		maxPause: DefaultMaxPause,
		lease:    DefaultPermitLease,
		parts:    partitions{m: make(map[string]*part), max: DefaultMaxPartitions},
	}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("throttle: NewTransport: option %d of %d is nil", i+1, len(opts)))
		}
		o(t)
	}
	if t.repo != nil {
		h, ok := t.repo.(limiters.PermitHolder)
		t.holds = !ok || h.HoldsPermits()
	}
	if t.logger != nil {
		t.observer = logTo(t.logger, t.observer)
	}
	if t.store != nil && t.feedback {
		t.id = newID()
		t.unsub = t.store.Subscribe(t.notice)
	}
	return t
}

// logTo returns an observer that logs the events worth a line to l, then
// passes every event to next (if any).
func logTo(l *slog.Logger, next func(Event)) func(Event) {
	return func(e Event) {
		switch e.Kind {
		case EventPaused:
			l.Info("throttle: the server paused a partition", "partition", e.Key, "status", e.Status, "until", e.Until)
		case EventLeaseExpired:
			l.Warn("throttle: a response body held its permit past the lease; the permit went back", "partition", e.Key)
		case EventUnknownQuota:
			l.Warn("throttle: WithCost names a quota the server did not report", "partition", e.Key, "quota", e.Quota, "err", e.Err)
		}
		if next != nil {
			next(e)
		}
	}
}

func (t *Transport) emit(e Event) {
	if t.observer != nil {
		t.observer(e)
	}
}

// gate returns the partition's gate, creating it.
func (t *Transport) gate(key string) *gate {
	t.mu.RLock()
	p := t.parts.m[key]
	t.mu.RUnlock()
	if p != nil {
		t.touch(p)
		return p.g
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p = t.parts.m[key]; p != nil {
		return p.g
	}
	g := &gate{key: key, maxPause: t.maxPause, emit: t.observer}
	t.parts.add(key, g)
	return g
}

// RoundTrip sends req once its partition's turn comes. It follows the
// http.RoundTripper contract: it does not modify req, it closes req.Body on
// its own errors, and a 429 from the server is a response, not an error. A
// request that would wait past WithMaxWait or its context's deadline fails
// at once with a *limiters.RejectedError; when the context's deadline was
// the bound, the error also matches context.DeadlineExceeded.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.closed.Load() {
		return nil, t.refuse(req, "", limiters.ErrClosed)
	}
	key, _ := t.key.Extract(keyextract.HTTP(req))
	var start time.Time
	if t.maxWait > 0 || t.observer != nil {
		start = time.Now()
	}
	b := newBound(req.Context(), start, t.maxWait)
	defer b.stop()

	c := costsOf(req.Context())
	if err := c.check(); err != nil {
		return nil, t.refuse(req, key, err)
	}
	var g, own *gate
	var r route
	routed := false // r is req's route
	var tk ticket
	var claim feedbackstore.Grant // a unit of the fleet's shared quota (feedback.go)
	if t.feedback {
		own = t.gate(key)
		g = own
		if own.routes.Load() != nil {
			// The host's answers named buckets: which is req's?
			r, routed = t.routeOf(req), true
			if b := own.gateFor(r); b != nil {
				g = b
			}
		}
		for {
			var w *gwaiter
			var err error
			w, err = g.enter(req.Context(), b.deadline, c, &tk)
			if err == nil && w != nil {
				err = g.wait(b.waitCtx(), w, &tk)
			}
			if err != nil {
				return nil, t.refuse(req, key, b.explain(err, key, "the server paused or paced the partition"))
			}
			if w != nil && own.routes.Load() != nil {
				// The host's answers named buckets while req waited
				// (for the first wave's, waveFull), or named its
				// route's: it goes as its bucket's gate allows.
				if !routed {
					r, routed = t.routeOf(req), true
				}
				b, _ := own.routed(r)
				if b == nil {
					b = own
				}
				if b != g {
					g.abort(&tk)
					g = b
					continue
				}
			}
			if t.store == nil || g != own {
				break
			}
			var ok bool
			if ok, claim = t.coordinate(req.Context(), own, &tk); ok {
				break
			}
		}
	}
	var spanned ticket
	var gtk *ticket // req's ticket at own too, past its bucket's gate: a limit of the whole host (spans)
	if g != own && own.is(spans) && !r.unspanned() {
		gtk = &spanned
		w, err := own.enter(req.Context(), b.deadline, c, gtk)
		if err == nil && w != nil {
			err = own.wait(b.waitCtx(), w, gtk)
		}
		if err != nil {
			g.abort(&tk)
			return nil, t.refuse(req, key, b.explain(err, key, "the server paused or paced the partition"))
		}
	}
	n := t.permits(c)
	if err := t.acquire(key, &b, n); err != nil {
		if g != nil {
			g.abort(&tk)
		}
		if gtk != nil {
			own.abort(gtk)
		}
		if claim.Seq > 0 {
			t.share(own, &ticket{}, claim, nil, time.Time{}) // never sent: the claim goes back
		}
		return nil, t.refuse(req, key, b.explain(err, key, ""))
	}
	if t.observer != nil {
		t.emit(Event{Kind: EventAcquired, Key: key, Wait: time.Since(start)})
	}

	resp, err := t.base.RoundTrip(req)
	if g != nil {
		t.learn(own, g, req, r, routed, &tk, gtk, claim, resp, c)
	}
	if err != nil {
		t.release(key, n)
		return nil, err
	}
	if g != nil {
		t.watch(g, &tk, resp) // an answer that comes later: stream.go
	}
	if t.holds {
		if resp.Body == nil || resp.Body == http.NoBody {
			t.release(key, n)
		} else {
			resp.Body = newReleaseBody(resp.Body, t, key, n)
		}
	}
	return resp, nil
}

// routeOf is req's route: WithBucketRoute's, or method and path.
func (t *Transport) routeOf(req *http.Request) route {
	if t.route != nil {
		return route{first: t.route(req)}
	}
	return routeOf(req)
}

// learn settles the request let through by g (a bucket's gate, or the
// partition's own gate own) and learns from its answer: in the gate of
// the bucket the answer names, if it names one (learning the route's
// bucket), else in g. r is req's route if routed; else it is worked out
// only if the answer names a bucket. claim is the request's unit of the
// fleet's shared quota (feedback.go), if any; c is what req declared.
// gtk, if not nil, is req's ticket at own too (spans).
func (t *Transport) learn(own, g *gate, req *http.Request, r route, routed bool, tk, gtk *ticket, claim feedbackstore.Grant, resp *http.Response, c *cost) {
	if gtk != nil {
		if t.learnSpan(own, g, tk, gtk, resp) {
			return
		}
	}
	late := false // the response's answer comes later (a gRPC stream's status: watch)
	if resp != nil {
		_, late = resp.Body.(streamhook.Late)
	}
	if resp != nil && resp.StatusCode < 400 && t.store == nil && !g.is(heard) && !late {
		// A partition whose answers have said nothing of rate limits:
		// most never will, and a success that says nothing needs no
		// clock. Parsed at the zero time, only whether it says anything
		// is used (a time counts only for the fields Parse finds; an
		// answer that has some is parsed again below, at now).
		if info := headers.Parse(resp.Header, time.Time{}); len(info.Quotas) == 0 && !info.HasRetryAfter && g.doneQuiet(tk) {
			return
		}
	}
	now := time.Now()
	if resp == nil {
		g.done(tk, nil, now)
		if t.store != nil && g == own {
			t.share(g, tk, claim, nil, time.Time{})
		}
		return
	}
	var a answer
	a.read(resp, headers.PeekBody(resp), now)
	defer a.free()
	if c != nil && t.observer != nil && len(a.info.Quotas) > 0 {
		t.checkNames(own.key, c, a.info.Quotas)
	}
	if !g.is(heard) && (a.status >= 400 || len(a.info.Quotas) > 0 || a.info.HasRetryAfter) {
		g.mark(heard)
	}
	if a.bucket != "" && !own.is(capped) && fromGitHub(resp.Header) {
		own.capWire()
	}
	lg := g
	name := bucketName(&a)
	if name != "" && name == a.bucket && resp.Header.Get("X-Ratelimit-Resource") == "" {
		// Discord's: counted for each top-level resource apart, and
		// beside a global limit (spans).
		if !own.is(spans) {
			own.span()
		}
		if !routed {
			r, routed = t.routeOf(req), true
		}
		if kind, id, _ := r.discordTop(); !isDiscordName(g.named(), name, kind, id) {
			name = discordName(name, kind, id)
		} else {
			name = g.named()
		}
	}
	if name != "" && name != g.named() {
		if !routed {
			r = t.routeOf(req)
		}
		lg = own.bucket(name, r)
	} else if g != own {
		// g may have been guessed for req's route (routeTable.guess):
		// an answer that names g's bucket teaches the route; one that
		// reports quotas of no bucket teaches that the route has none,
		// and so does any answer to a scout's request (scout).
		if _, learned := own.routed(r); !learned {
			switch {
			case name != "":
				own.bucket(name, r)
			case len(a.info.Quotas) > 0 || g.scouting():
				own.remember(r, own)
				lg = own
			}
		}
	}
	if lg == g {
		la := &a
		if late {
			// Not a success yet: a stream the server refuses is opened
			// as one that it admits. Its answer, when it comes, is
			// learned then (watch); counted now, a refused stream would
			// count as one the server took.
			la, tk.late = nil, true
		}
		paused := g.done(tk, la, now)
		if t.store != nil && g == own {
			t.share(g, tk, claim, &a, paused)
		}
		return
	}
	// The answer is learned in its bucket before the request leaves the
	// partition's wire: the other way round, a request let through by the
	// bucket in between would see the claim gone and the count not yet
	// lowered (TestInFlightRequestsCountAgainstRemaining, 7 runs in 200
	// under -race).
	lg.observe(&a, -1, now)
	g.done(tk, nil, now)
}

// refuse closes the request body, tells the observer, and returns err.
func (t *Transport) refuse(req *http.Request, key string, err error) error {
	if req.Body != nil {
		req.Body.Close()
	}
	t.emit(Event{Kind: EventRejected, Key: key, Err: err})
	return err
}

// permits is how many permits a request declaring c takes from the
// partition's limiter: its declared cost of WithLimiterCost's quota, or 1.
func (t *Transport) permits(c *cost) int {
	if t.charge != "" {
		if u, ok := c.of(t.charge); ok {
			return int(min(u, int64(maxPermits)))
		}
	}
	return 1
}

// maxPermits caps a declared cost taken from a limiter: far above any
// limit, so it still fails with limiters.ErrExceedsLimit.
const maxPermits = 1 << 30

// acquire takes n permits from the partition's limiter within b. Permits
// that are free now are taken without allocating.
func (t *Transport) acquire(key string, b *bound, n int) error {
	if t.repo == nil {
		return nil
	}
	if b.maxWait > 0 {
		// WithMaxWait is the bound: try without waiting first, so that a
		// request that need not wait costs no bounded context.
		if d, err := t.repo.TryAcquire(b.ctx, key, 0); err == nil && d.Allowed {
			if d, err = t.repo.TryAcquire(b.ctx, key, n); err == nil && d.Allowed {
				return nil
			}
		}
	}
	return t.repo.Acquire(b.waitCtx(), key, n)
}

// release gives the request's n permits back (only limiters that hold
// permits care).
func (t *Transport) release(key string, n int) {
	if t.holds {
		t.repo.Release(context.Background(), key, n)
	}
}

// CloseIdleConnections closes the base transport's idle connections, if it
// has a CloseIdleConnections method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Close fails every waiting request with limiters.ErrClosed, closes the
// limiter or repository the Transport was given, and makes later requests
// fail with limiters.ErrClosed. It is idempotent.
func (t *Transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	if t.unsub != nil {
		t.unsub()
	}
	t.mu.Lock()
	ring := t.parts.ring
	t.parts.m, t.parts.ring = make(map[string]*part), nil
	t.mu.Unlock()
	for _, p := range ring {
		p.g.close()
	}
	if t.repo != nil {
		return t.repo.Close()
	}
	return nil
}

// bound is one request's limit on waiting, computed once in RoundTrip and
// used by the gate and the limiter alike: the earlier of its context's
// deadline and WithMaxWait.
type bound struct {
	ctx      context.Context // the request's context
	deadline time.Time       // zero: no bound but cancellation
	maxWait  time.Duration   // non-zero when WithMaxWait is the bound
	wctx     context.Context // ctx ending at deadline, made by the first wait
	cancel   context.CancelFunc
}

func newBound(ctx context.Context, now time.Time, maxWait time.Duration) bound {
	b := bound{ctx: ctx}
	if maxWait > 0 {
		b.deadline, b.maxWait = now.Add(maxWait), maxWait
	}
	if dl, ok := ctx.Deadline(); ok && (b.deadline.IsZero() || !dl.After(b.deadline)) {
		b.deadline, b.maxWait = dl, 0
	}
	return b
}

// waitCtx is the context to wait under: ctx itself when its deadline is the
// bound, else a child of ctx that ends at the deadline (made once, on the
// first wait: a request that does not wait allocates nothing).
func (b *bound) waitCtx() context.Context {
	if b.maxWait == 0 {
		return b.ctx
	}
	if b.wctx == nil {
		b.wctx, b.cancel = context.WithDeadline(b.ctx, b.deadline)
	}
	return b.wctx
}

func (b *bound) stop() {
	if b.cancel != nil {
		b.cancel()
	}
}

// explain turns what a wait returned into the error the caller gets. A
// refusal names the partition key (after the limiter's own name) and, when
// it was about the bound, says which bound held: WithMaxWait, or the
// context's deadline (then Cause is context.DeadlineExceeded). why, if not
// empty, says what held the request back. Running out of WithMaxWait while
// waiting is such a refusal too. Other errors pass unchanged.
func (b *bound) explain(err error, key, why string) error {
	turn := "its turn would come after"
	var rej *limiters.RejectedError
	if !errors.As(err, &rej) {
		if b.maxWait == 0 || b.ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		rej, turn = &limiters.RejectedError{}, "its turn did not come within"
	}
	e := *rej
	e.Limiter = partition(e.Limiter, key)
	if why != "" {
		why += "; "
	}
	switch {
	case b.maxWait > 0:
		e.Reason = fmt.Sprintf("%s%s WithMaxWait (%v)", why, turn, b.maxWait)
		e.Cause = nil
	case !b.deadline.IsZero():
		e.Reason = why + turn + " the context deadline"
		e.Cause = context.DeadlineExceeded
	}
	return &e
}

// partition names a limiter and the partition it refused: `gcra (partition
// "api.example.com")`. A long key is cut short.
func partition(limiter, key string) string {
	const maxKey = 64
	if len(key) > maxKey {
		key = key[:maxKey] + "…"
	}
	if limiter == "" {
		return fmt.Sprintf("partition %q", key)
	}
	return fmt.Sprintf("%s (partition %q)", limiter, key)
}

// keyless is WithLimiter's limiter as a repository: one limiter for every
// key, so that the Transport has one acquire path.
type keyless struct{ l limiters.Limiter }

func (k keyless) TryAcquire(_ context.Context, _ string, n int) (limiters.Decision, error) {
	return k.l.TryAcquire(n), nil
}

func (k keyless) Acquire(ctx context.Context, _ string, n int) error { return k.l.Acquire(ctx, n) }

func (k keyless) Release(_ context.Context, _ string, n int) error {
	k.l.Release(n)
	return nil
}

func (k keyless) Close() error { return k.l.Close() }

// HoldsPermits reports whether the limiter's permits stay taken until
// Release.
func (k keyless) HoldsPermits() bool { return limiters.HoldsPermits(k.l) }

// releaseBody gives the request's permit back when the body is closed or
// read to EOF, or when its lease runs out, exactly once.
type releaseBody struct {
	rc    io.ReadCloser
	t     *Transport
	key   string
	n     int
	done  atomic.Bool
	lease *time.Timer // nil: no lease
}

// releaseRWBody keeps the io.Writer of a 101 Switching Protocols body.
type releaseRWBody struct{ *releaseBody }

func (b releaseRWBody) Write(p []byte) (int, error) { return b.rc.(io.Writer).Write(p) }

func newReleaseBody(rc io.ReadCloser, t *Transport, key string, n int) io.ReadCloser {
	b := &releaseBody{rc: rc, t: t, key: key, n: n}
	if t.lease > 0 {
		b.lease = time.AfterFunc(t.lease, b.expire)
	}
	if _, ok := rc.(io.Writer); ok {
		return releaseRWBody{b}
	}
	return b
}

func (b *releaseBody) finish() {
	if !b.done.Swap(true) {
		if b.lease != nil {
			b.lease.Stop()
		}
		b.t.release(b.key, b.n)
	}
}

// expire runs when the lease runs out before the body was done.
func (b *releaseBody) expire() {
	if !b.done.Swap(true) {
		// Reported first: what the observer does comes before what the
		// freed permit lets through.
		b.t.emit(Event{Kind: EventLeaseExpired, Key: b.key})
		b.t.release(b.key, b.n)
	}
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish()
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}
