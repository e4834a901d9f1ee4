package apisim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func TestTransportLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen *http.Request
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Echo", string(b))
			w.WriteHeader(http.StatusTeapot)
		})
		tr := &Transport{Handler: h, Latency: 20 * time.Millisecond}
		body := &closeCounter{Reader: strings.NewReader("hello")}
		req, err := http.NewRequest(http.MethodPost, "http://api.test/x?y=1", body)
		require.NoError(t, err)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 40*time.Millisecond, time.Since(start), "latency both ways")
		assert.Equal(t, http.StatusTeapot, resp.StatusCode)
		assert.Equal(t, "hello", resp.Header.Get("X-Echo"))
		assert.Same(t, req, resp.Request)
		assert.Equal(t, int32(1), body.closed.Load(), "the request body is closed")
		assert.Equal(t, "/x?y=1", seen.RequestURI)
		assert.NotEmpty(t, seen.RemoteAddr)
	})
}

func TestTransportNilBodyAndHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil {
				t.Error("a handler must see a non-nil body")
			}
		})
		r := get(t, h, "/")
		assert.Equal(t, http.StatusOK, r.status)
	})
}

func TestTransportJitterIsSeeded(t *testing.T) {
	delays := func(seed uint64) []time.Duration {
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) {
			tr := &Transport{Handler: http.NotFoundHandler(), Latency: 10 * time.Millisecond, Jitter: 30 * time.Millisecond, Seed: seed}
			for range 20 {
				start := time.Now()
				send(t, tr, http.MethodGet, "/", "")
				d := time.Since(start)
				require.GreaterOrEqual(t, d, 20*time.Millisecond)
				require.LessOrEqual(t, d, 50*time.Millisecond)
				out = append(out, d)
			}
		})
		return out
	}
	a := delays(7)
	assert.Equal(t, a, delays(7), "the same seed, the same delays")
	assert.NotEqual(t, a, delays(8))
}

func TestTransportHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var served atomic.Int32
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })
		tr := &Transport{Handler: h, Latency: time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		body := &closeCounter{Reader: strings.NewReader("x")}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/", body)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		assert.Nil(t, resp)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		assert.Zero(t, served.Load(), "it never reached the server")
		assert.Equal(t, int32(1), body.closed.Load())
	})
}

// TestSimulatorsBehindHTTPTest runs a simulator behind a real server, as
// tests that need sockets use them.
func TestSimulatorsBehindHTTPTest(t *testing.T) {
	o := NewOpenAI(OpenAIConfig{RequestsPerWindow: 1, TokensPerWindow: 1000, Window: time.Hour})
	srv := httptest.NewServer(o)
	defer srv.Close()
	do := func() *http.Response {
		resp, err := srv.Client().Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat(100)))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := do()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "0", resp.Header.Get("x-ratelimit-remaining-requests"))
	resp = do()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("retry-after-ms"))
	s := o.Snapshot()
	assert.Equal(t, int64(1), s.Admitted)
	assert.Equal(t, int64(1), s.Refused)
}
