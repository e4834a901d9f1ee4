package throttle

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

func TestBackoffReadsEveryFormat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		resp := func(status int, kv ...string) *http.Response {
			h := http.Header{}
			for i := 0; i < len(kv); i += 2 {
				h.Set(kv[i], kv[i+1])
			}
			return &http.Response{StatusCode: status, Header: h}
		}
		cases := []struct {
			name string
			resp *http.Response
			want time.Duration
		}{
			{"retry-after seconds", resp(429, "Retry-After", "7"), 7 * time.Second},
			{"retry-after on 503", resp(503, "Retry-After", "3"), 3 * time.Second},
			{"retry-after-ms", resp(429, "retry-after-ms", "1500"), 1500 * time.Millisecond},
			{"github reset", resp(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Add(20*time.Second).Unix(), 10)), 20 * time.Second},
			{"openai tokens", resp(429, "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"), 30 * time.Second},
			{"ietf", resp(429, "RateLimit-Policy", `"p";q=10;w=60`, "RateLimit", `"p";r=0;t=12`), 12 * time.Second},
			{"capped at max", resp(429, "Retry-After", "3600"), 30 * time.Second},
			{"at least min", resp(429, "Retry-After", "0.1"), time.Second},
		}
		for _, tc := range cases {
			assert.Equal(t, tc.want, Backoff(time.Second, 30*time.Second, 0, tc.resp), tc.name)
		}
		// When nothing is said: exponential.
		r := resp(500)
		assert.Equal(t, retryablehttp.DefaultBackoff(time.Second, 30*time.Second, 3, r), Backoff(time.Second, 30*time.Second, 3, r))
		assert.Equal(t, 8*time.Second, Backoff(time.Second, 30*time.Second, 3, nil))
	})
}

func TestCheckRetryDoesNotRetryOurRefusals(t *testing.T) {
	for _, err := range []error{&limiters.RejectedError{}, limiters.ErrClosed, limiters.ErrQueueFull, limiters.ErrExceedsLimit} {
		retry, got := CheckRetry(t.Context(), nil, err)
		assert.False(t, retry, "%v", err)
		assert.Equal(t, err, got)
	}
	retry, _ := CheckRetry(t.Context(), &http.Response{StatusCode: 429, Header: http.Header{}}, nil)
	assert.True(t, retry)
	retry, _ = CheckRetry(t.Context(), nil, errors.New("connection reset"))
	assert.True(t, retry)
}

// TestRetriedTooManyRequestsWaitsForResetAndReplaysBody: a GitHub-style 429
// (no Retry-After, a reset in epoch seconds) is retried exactly when the
// quota resets, with the same body.
func TestRetriedTooManyRequestsWaitsForResetAndReplaysBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var bodies []string
		var at []time.Duration
		start := time.Now()
		reset := start.Add(10 * time.Second)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			at = append(at, time.Since(start))
			mu.Unlock()
			if time.Now().Before(reset) {
				w.Header().Set("X-RateLimit-Limit", "60")
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, "created")
		})
		c := NewRetryableClient(handlerTransport{h: h})
		c.RetryWaitMax = time.Minute
		defer c.HTTPClient.Transport.(*Transport).Close()
		req, err := retryablehttp.NewRequest(http.MethodPost, "http://api.test/items", bytes.NewReader([]byte(`{"name":"x"}`)))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "created", string(body))
		assert.Equal(t, []string{`{"name":"x"}`, `{"name":"x"}`}, bodies, "the body is replayed")
		assert.Equal(t, []time.Duration{0, 10 * time.Second}, at, "the retry waits for the reset, no longer")
	})
}

// TestRetryableClientOverLoopback: the same through real sockets.
func TestRetryableClientOverLoopback(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write(b)
	}))
	defer srv.Close()
	c := NewRetryableClient(nil)
	tr := c.HTTPClient.Transport.(*Transport)
	defer tr.Close()
	defer tr.CloseIdleConnections()
	start := time.Now()
	resp, err := c.Post(srv.URL, "text/plain", []byte("hello"))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello", string(b))
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
	assert.Equal(t, 2, n)
}
