package ratelimitd_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/service"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/ratelimitd"
	"github.com/throttlekit/throttle/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const policy = `default_plan: free
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 10, window: 1h}
    endpoints:
      "POST /slow":
        limits:
          - {algorithm: gcra, rate: 20/s, limit: 1}
      "POST /slower":
        limits:
          - {algorithm: gcra, rate: 1/m, limit: 1}
`

// counts counts the requests to each path.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) get(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

// serve starts the real service over policy and returns its URL.
func serve(t *testing.T) (string, *counts) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(file, []byte(policy), 0o600))
	svc, err := service.New(service.Config{PolicyFile: file, AdminToken: "tok", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	c := &counts{n: map[string]int{}}
	h := svc.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.URL.Path]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		svc.Close()
	})
	return srv.URL, c
}

func newClient(t *testing.T, url string, opts ...ratelimitd.Option) *ratelimitd.Client {
	t.Helper()
	c, err := ratelimitd.New(url, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTryAcquire(t *testing.T) {
	url, _ := serve(t)
	c := newClient(t, url)
	ctx := context.Background()
	d, err := c.TryAcquire(ctx, "a", 4)
	require.NoError(t, err)
	assert.Equal(t, limiters.Decision{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: d.ResetAfter}, d)
	assert.Positive(t, d.ResetAfter)
	d, err = c.TryAcquire(ctx, "a", 7)
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Positive(t, d.RetryAfter)
}

// TestNegativeCountPanics: a negative permit count is a programming error,
// as for every repository.Repository: it panics before anything is sent.
func TestNegativeCountPanics(t *testing.T) {
	url, cnt := serve(t)
	c := newClient(t, url)
	ctx := context.Background()
	assert.PanicsWithValue(t, "ratelimitd: negative permit count", func() { c.TryAcquire(ctx, "a", -1) })
	assert.PanicsWithValue(t, "ratelimitd: negative permit count", func() { c.Acquire(ctx, "a", -1) })
	assert.Zero(t, cnt.get("/v1/check"))
	assert.PanicsWithValue(t, "ratelimitd: New: option 2 of 2 is nil", func() { ratelimitd.New(url, ratelimitd.WithPlan("free"), nil) })
}

func TestBatchesConcurrentChecks(t *testing.T) {
	url, cnt := serve(t)
	c := newClient(t, url, ratelimitd.WithSenders(1), ratelimitd.WithBatch(16))
	const n = 100
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := c.TryAcquire(context.Background(), "k"+string(rune('a'+i%5)), 1)
			assert.NoError(t, err)
			if d.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(50), allowed.Load(), "5 keys, 10 each")
	sent := cnt.get("/v1/check") + cnt.get("/v1/check/batch")
	assert.Less(t, sent, n, "concurrent checks share requests")
	assert.GreaterOrEqual(t, sent, n/16, "at most 16 checks per request")
	assert.Positive(t, cnt.get("/v1/check/batch"))
}

func TestAcquireWaits(t *testing.T) {
	url, _ := serve(t)
	c := newClient(t, url, ratelimitd.WithEndpoint("POST /slow"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	for range 3 {
		require.NoError(t, c.Acquire(ctx, "w", 1))
	}
	// 20/s with a burst of 1: the third grant comes 100ms after the first.
	assert.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond)

	// A minute's wait and a deadline 5 s away (room for the round trip on
	// a loaded machine; 5 ms was not): refused at once.
	slower := newClient(t, url, ratelimitd.WithEndpoint("POST /slower"))
	short, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	require.NoError(t, slower.Acquire(context.Background(), "v", 1))
	begin := time.Now()
	err := slower.Acquire(short, "v", 1)
	var re *limiters.RejectedError
	require.ErrorAs(t, err, &re, "the wait would pass the deadline: refused at once")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Greater(t, re.RetryAfter, 50*time.Second)
	assert.Less(t, time.Since(begin), 5*time.Second, "refused before the deadline")

	assert.ErrorIs(t, c.Acquire(ctx, "v", 2), limiters.ErrExceedsLimit)
}

func TestPeekAndReset(t *testing.T) {
	url, _ := serve(t)
	ctx := context.Background()
	c := newClient(t, url, ratelimitd.WithAdminToken("tok"))
	_, err := c.TryAcquire(ctx, "p", 10)
	require.NoError(t, err)
	for range 2 {
		d, err := c.Peek(ctx, "p")
		require.NoError(t, err)
		assert.Equal(t, 0, d.Remaining)
	}
	require.NoError(t, c.Reset(ctx, "p"))
	d, err := c.Peek(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, 10, d.Remaining)

	// Keys with slashes, spaces and non-ASCII survive the URL path.
	odd := "tenant/a b?é"
	_, err = c.TryAcquire(ctx, odd, 3)
	require.NoError(t, err)
	d, err = c.Peek(ctx, odd)
	require.NoError(t, err)
	assert.Equal(t, 7, d.Remaining)
	require.NoError(t, c.Reset(ctx, odd))
	d, err = c.Peek(ctx, odd)
	require.NoError(t, err)
	assert.Equal(t, 10, d.Remaining)

	anon := newClient(t, url)
	err = anon.Reset(ctx, "p")
	var p *ratelimitd.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, http.StatusUnauthorized, p.Status)
}

func TestBadCheckIsAProblem(t *testing.T) {
	url, _ := serve(t)
	c := newClient(t, url)
	_, err := c.TryAcquire(context.Background(), strings.Repeat("x", ratelimitd.MaxKeyLen+1), 1)
	var p *ratelimitd.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, http.StatusBadRequest, p.Status)
	assert.Contains(t, p.Error(), "key must be")
}

func TestClose(t *testing.T) {
	url, _ := serve(t)
	c, err := ratelimitd.New(url)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err = c.TryAcquire(context.Background(), "a", 1)
	assert.ErrorIs(t, err, ratelimitd.ErrClosed)
	_, err = ratelimitd.New("localhost:80")
	assert.Error(t, err)
}

func TestAsMiddlewareBackend(t *testing.T) {
	url, _ := serve(t)
	c := newClient(t, url)
	rl := server.New(c, server.WithKey(keyextract.Header("X-User")))
	h := rl.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	codes := map[int]int{}
	for range 12 {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-User", "mw")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		codes[w.Code]++
	}
	assert.Equal(t, map[int]int{200: 10, 429: 2}, codes)
}

// TestCheckHonoursContext: a check with a done context fails with its
// error and sends nothing. (The call's select once had the batch and the
// done context to pick from at random: one make test run in many got a
// decision, and a permit spent, for a cancelled call.)
func TestCheckHonoursContext(t *testing.T) {
	url, cnt := serve(t)
	c := newClient(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 {
		_, err := c.TryAcquire(ctx, "a", 1)
		require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	}
	require.NoError(t, c.Close()) // its senders done: what they sent has been counted
	assert.Zero(t, cnt.get("/v1/check")+cnt.get("/v1/check/batch"), "nothing sent")
}

func TestAsTransportBackend(t *testing.T) {
	url, _ := serve(t)
	c := newClient(t, url)
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer upstream.Close()
	tr := throttle.NewTransport(nil, throttle.WithRepository(c), throttle.WithMaxWait(50*time.Millisecond))
	defer tr.Close()
	hc := &http.Client{Transport: tr}
	sent, refused := 0, 0
	for range 12 {
		resp, err := hc.Get(upstream.URL)
		if err != nil {
			var re *limiters.RejectedError
			require.ErrorAs(t, err, &re)
			refused++
			continue
		}
		resp.Body.Close()
		sent++
	}
	assert.Equal(t, []int{10, 2}, []int{sent, refused}, "the service's limit of 10 per hour for the upstream's host")
}
