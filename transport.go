package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// DefaultMaxPause caps how long a server's answer may pause a partition:
// a hostile or broken Retry-After: 999999999 must not freeze a client.
const DefaultMaxPause = 15 * time.Minute

// Transport is an http.RoundTripper that keeps its callers inside a rate
// limit: every request waits, in FIFO order, for a permit from its
// partition's limiter, and pauses and paces itself on what the servers it
// calls say in their rate-limit headers. See the package documentation.
//
// A Transport is safe for concurrent use. Close it when done.
type Transport struct {
	base     http.RoundTripper
	lim      limiters.Limiter
	repo     repository.Repository
	key      keyextract.Extractor
	maxWait  time.Duration
	feedback bool
	maxPause time.Duration
	observer func(Event)
	holds    bool // the limiter may hold permits until the body is done

	mu      sync.RWMutex
	gates   map[string]*gate
	sweepAt int // sweep the gates when there are this many
	closed  atomic.Bool
}

// Option configures a Transport.
type Option func(*Transport)

// WithLimiter makes every request, whatever its partition, take a permit
// from l. The Transport owns l: Close closes it.
func WithLimiter(l limiters.Limiter) Option { return func(t *Transport) { t.lim = l } }

// WithRepository makes every request take a permit from its partition's
// limiter in r (the partition is the key WithKey extracts). The Transport
// owns r: Close closes it.
func WithRepository(r repository.Repository) Option { return func(t *Transport) { t.repo = r } }

// WithKey sets how a request's partition is chosen; the default is
// keyextract.Host(): the request URL's host including its port. Requests for
// which the extractor reports no key share the partition "".
func WithKey(e keyextract.Extractor) Option { return func(t *Transport) { t.key = e } }

// WithMaxWait bounds how long a request may wait for its turn, on top of its
// context's deadline. A request that would wait longer fails at once with a
// *limiters.RejectedError. Zero (the default) means no bound but the
// context's.
func WithMaxWait(d time.Duration) Option { return func(t *Transport) { t.maxWait = d } }

// WithServerFeedback turns on or off (default on) listening to the servers'
// rate-limit headers: Retry-After, X-RateLimit-*, the IETF RateLimit fields
// and the other formats headers.Parse reads.
func WithServerFeedback(on bool) Option { return func(t *Transport) { t.feedback = on } }

// WithMaxPause caps how long one server answer may pause a partition
// (default DefaultMaxPause).
func WithMaxPause(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.maxPause = d
		}
	}
}

// WithObserver receives an Event for every permit acquired, every request
// refused, and every pause and resumption. It is called synchronously on
// the request's goroutine or a timer's, never with a lock held; keep it fast.
func WithObserver(f func(Event)) Option { return func(t *Transport) { t.observer = f } }

// EventKind says what an Event reports.
type EventKind int

const (
	// EventAcquired: a request got its permit after waiting Wait.
	EventAcquired EventKind = iota + 1
	// EventRejected: a request was refused before being sent; Err says why.
	EventRejected
	// EventPaused: a server's answer (Status) paused the partition until Until.
	EventPaused
	// EventResumed: a pause ended; the next request probes the server.
	EventResumed
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventRejected:
		return "rejected"
	case EventPaused:
		return "paused"
	case EventResumed:
		return "resumed"
	}
	return "unknown"
}

// Event is what an observer receives.
type Event struct {
	Kind   EventKind
	Key    string        // the partition
	Wait   time.Duration // EventAcquired: time spent waiting
	Until  time.Time     // EventPaused: the end of the pause
	Status int           // EventPaused: the response status that caused it
	Err    error         // EventRejected: the error returned to the caller
}

// NewTransport returns a Transport sending through base
// (http.DefaultTransport if nil).
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{
		base:     base,
		key:      keyextract.Host(),
		feedback: true,
		maxPause: DefaultMaxPause,
		gates:    make(map[string]*gate),
	}
	for _, o := range opts {
		o(t)
	}
	if t.repo != nil {
		t.holds = true
	} else if t.lim != nil {
		t.holds = limiters.HoldsPermits(t.lim)
	}
	return t
}

func (t *Transport) emit(e Event) {
	if t.observer != nil {
		t.observer(e)
	}
}

// gate returns the partition's gate, creating it.
func (t *Transport) gate(key string) *gate {
	t.mu.RLock()
	g := t.gates[key]
	t.mu.RUnlock()
	if g != nil {
		return g
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if g = t.gates[key]; g != nil {
		return g
	}
	if len(t.gates) >= max(t.sweepAt, maxIdleGates) {
		t.sweepLocked()
		// Amortized: what survives a sweep is not swept again until the
		// map has doubled.
		t.sweepAt = 2 * len(t.gates)
	}
	g = &gate{t: t, key: key}
	t.gates[key] = g
	return g
}

// maxIdleGates is the number of partitions past which the ones the servers
// said nothing about are forgotten.
const maxIdleGates = 1024

func (t *Transport) sweepLocked() {
	now := time.Now()
	for k, g := range t.gates {
		g.mu.Lock()
		if g.neutral(now) {
			delete(t.gates, k)
		}
		g.mu.Unlock()
	}
}

// RoundTrip sends req once its partition's turn comes. It follows the
// http.RoundTripper contract: it does not modify req, it closes req.Body on
// its own errors, and a 429 from the server is a response, not an error. A
// request that would wait past WithMaxWait or its context's deadline fails
// at once with a *limiters.RejectedError.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.closed.Load() {
		return nil, t.refuse(req, "", limiters.ErrClosed)
	}
	key, _ := t.key.Extract(keyextract.HTTP(req))
	ctx := req.Context()
	var deadline time.Time
	var start time.Time
	if t.maxWait > 0 || t.observer != nil {
		start = time.Now()
	}
	if t.maxWait > 0 {
		deadline = start.Add(t.maxWait)
	}
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}

	var g *gate
	var tk ticket
	if t.feedback {
		g = t.gate(key)
		var err error
		if tk, err = g.admit(ctx, deadline); err != nil {
			return nil, t.refuse(req, key, err)
		}
	}
	if err := t.acquire(ctx, key, start); err != nil {
		if g != nil {
			g.abort(tk)
		}
		return nil, t.refuse(req, key, err)
	}
	if t.observer != nil {
		t.emit(Event{Kind: EventAcquired, Key: key, Wait: time.Since(start)})
	}

	resp, err := t.base.RoundTrip(req)
	if g != nil {
		g.done(tk, resp, time.Now())
	}
	if err != nil {
		t.release(key)
		return nil, err
	}
	if t.holds {
		if resp.Body == nil || resp.Body == http.NoBody {
			t.release(key)
		} else {
			resp.Body = newReleaseBody(resp.Body, t, key)
		}
	}
	return resp, nil
}

// refuse closes the request body, tells the observer, and returns err.
func (t *Transport) refuse(req *http.Request, key string, err error) error {
	if req.Body != nil {
		req.Body.Close()
	}
	t.emit(Event{Kind: EventRejected, Key: key, Err: err})
	return err
}

// acquire takes one permit from the partition's limiter, honouring ctx and
// WithMaxWait. A permit that is free now is taken without allocating.
func (t *Transport) acquire(ctx context.Context, key string, start time.Time) error {
	switch {
	case t.lim != nil:
		if t.maxWait <= 0 {
			return t.lim.Acquire(ctx, 1)
		}
		if t.lim.TryAcquire(0).Allowed && t.lim.TryAcquire(1).Allowed {
			return nil
		}
		return t.waitMax(ctx, start, func(ctx context.Context) error { return t.lim.Acquire(ctx, 1) })
	case t.repo != nil:
		if t.maxWait <= 0 {
			return t.repo.Acquire(ctx, key, 1)
		}
		if d, err := t.repo.TryAcquire(ctx, key, 0); err == nil && d.Allowed {
			if d, err = t.repo.TryAcquire(ctx, key, 1); err == nil && d.Allowed {
				return nil
			}
		}
		return t.waitMax(ctx, start, func(ctx context.Context) error { return t.repo.Acquire(ctx, key, 1) })
	}
	return nil
}

// waitMax runs acquire under a context that also ends at start+maxWait, and
// reports running out of that time as a *limiters.RejectedError.
func (t *Transport) waitMax(ctx context.Context, start time.Time, acquire func(context.Context) error) error {
	left := t.maxWait - time.Since(start)
	if left <= 0 {
		return &limiters.RejectedError{Reason: "max wait exceeded"}
	}
	wctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	err := acquire(wctx)
	var rej *limiters.RejectedError
	if errors.As(err, &rej) {
		// The limiter refused at once because wctx's deadline would pass:
		// unless ctx's own deadline is the nearer bound, it was max wait.
		if dl, ok := ctx.Deadline(); !ok || dl.After(start.Add(t.maxWait)) {
			rej.Reason, rej.Cause = "max wait exceeded", nil
		}
		return err
	}
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return &limiters.RejectedError{Reason: "max wait exceeded", RetryAfter: 0}
	}
	return err
}

// release gives the request's permit back (only concurrency limiters care).
func (t *Transport) release(key string) {
	switch {
	case !t.holds:
	case t.lim != nil:
		t.lim.Release(1)
	case t.repo != nil:
		t.repo.Release(context.Background(), key, 1)
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
	t.mu.Lock()
	gates := t.gates
	t.gates = make(map[string]*gate)
	t.mu.Unlock()
	for _, g := range gates {
		g.close()
	}
	var err error
	if t.lim != nil {
		err = t.lim.Close()
	}
	if t.repo != nil {
		err = errors.Join(err, t.repo.Close())
	}
	return err
}

// releaseBody gives the request's permit back when the body is closed or
// read to EOF, exactly once.
type releaseBody struct {
	rc   io.ReadCloser
	t    *Transport
	key  string
	done atomic.Bool
}

// releaseRWBody keeps the io.Writer of a 101 Switching Protocols body.
type releaseRWBody struct{ *releaseBody }

func (b releaseRWBody) Write(p []byte) (int, error) { return b.rc.(io.Writer).Write(p) }

func newReleaseBody(rc io.ReadCloser, t *Transport, key string) io.ReadCloser {
	b := &releaseBody{rc: rc, t: t, key: key}
	if _, ok := rc.(io.Writer); ok {
		return releaseRWBody{b}
	}
	return b
}

func (b *releaseBody) finish() {
	if !b.done.Swap(true) {
		b.t.release(b.key)
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
