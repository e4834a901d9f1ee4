package apisim

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Sleep waits d, or until ctx is done, and returns ctx's error in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Transport is an http.RoundTripper that serves requests in memory with
// Handler, so a client and a simulator can run together inside a
// testing/synctest bubble (no sockets; sleeps are fake time). Each request
// travels Latency to the handler plus a random extra of up to Jitter, drawn
// from a generator seeded with Seed, and its response travels Latency back.
// The zero value with a Handler is ready to use; a Transport is safe for
// concurrent use.
type Transport struct {
	Handler http.Handler
	Latency time.Duration // one way
	Jitter  time.Duration // extra on the way there: uniform in [0, Jitter]
	Seed    uint64

	delays delays
}

// RoundTrip serves req with the handler. It fails only with req's context
// error, when the context ends before the request reaches the handler or
// before its response is back; it always closes the request body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	ctx := req.Context()
	if err := Sleep(ctx, t.Latency+t.delays.draw(t.Seed, t.Jitter)); err != nil {
		return nil, err
	}
	// A server-side request always has a body and a RemoteAddr.
	in := req.Clone(ctx)
	if in.Body == nil {
		in.Body = http.NoBody
	}
	if in.RemoteAddr == "" {
		in.RemoteAddr = "192.0.2.1:1234"
	}
	in.RequestURI = req.URL.RequestURI()
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, in)
	if err := Sleep(ctx, t.Latency); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// delays draws random delays from a generator seeded on first use. It is
// safe for concurrent use; draws follow the order of the calls.
type delays struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// draw returns a delay uniform in [0, upTo] (0 when upTo ≤ 0).
func (d *delays) draw(seed uint64, upTo time.Duration) time.Duration {
	if upTo <= 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rng == nil {
		d.rng = rand.New(rand.NewPCG(seed, seed))
	}
	return time.Duration(d.rng.Int64N(int64(upTo) + 1))
}
