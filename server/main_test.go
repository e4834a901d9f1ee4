package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// do sends one request straight to h and returns the recorded response.
// hdr is name, value pairs.
func do(h http.Handler, method, target, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// ok is a handler that answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

// problem decodes a problem details body.
func problem(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), w.Body.String())
	return m
}

// recorder collects observer events.
type recorder struct {
	mu     sync.Mutex
	events []server.Event
}

func (r *recorder) observe(e server.Event) {
	r.mu.Lock()
	e.Request = nil
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) kinds() []server.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ks []server.EventKind
	for _, e := range r.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

func (r *recorder) count(k server.EventKind) int {
	n := 0
	for _, got := range r.kinds() {
		if got == k {
			n++
		}
	}
	return n
}

// fakeRepo is a repository whose every call fails with err, counting
// Releases.
type fakeRepo struct {
	err error
}

func (f *fakeRepo) TryAcquire(context.Context, string, int) (limiters.Decision, error) {
	return limiters.Decision{}, f.err
}
func (f *fakeRepo) Acquire(context.Context, string, int) error { return f.err }
func (f *fakeRepo) Release(context.Context, string, int) error { return f.err }
func (f *fakeRepo) Close() error                               { return nil }

// last returns the latest event.
func (r *recorder) last() server.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[len(r.events)-1]
}
