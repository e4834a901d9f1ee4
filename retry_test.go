package throttle

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
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

// TestBackoffStaysWithinBounds: whatever the server sends — values past
// the parser's horizon, values that overflow int64 nanoseconds, dates in
// year 9999, garbage — Backoff returns a wait in [min, max], never negative,
// and a hint beyond the horizon means max.
func TestBackoffStaysWithinBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lo, hi = 100 * time.Millisecond, 2 * time.Second
		cases := []struct {
			kv   []string
			want time.Duration // 0: anywhere in [lo, hi]
		}{
			{[]string{"Retry-After", "99999999999"}, hi}, // DefaultBackoff: 2,157,299 h
			{[]string{"Retry-After", "9999999999"}, hi},  // DefaultBackoff: overflows negative
			{[]string{"Retry-After", "99999999999999999999999"}, hi},
			{[]string{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}, hi}, // DefaultBackoff: 2,562,047 h
			{[]string{"Retry-After-Ms", "99999999999999"}, hi},
			{[]string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999"}, hi},
			{[]string{"Retry-After", "-5"}, 0},
			{[]string{"Retry-After", "soon"}, 0},
			{[]string{"Retry-After", "0.01"}, lo},
			{[]string{"Retry-After", "1", "Retry-After", "3"}, hi}, // the longer line wins, capped
			{[]string{"Retry-After", "1", "Retry-After", "0.5"}, time.Second},
		}
		for _, tc := range cases {
			h := http.Header{}
			for i := 0; i < len(tc.kv); i += 2 {
				h.Add(tc.kv[i], tc.kv[i+1])
			}
			for _, status := range []int{429, 503} {
				for _, attempt := range []int{0, 5, 62, 63, 1000, -1} {
					d := Backoff(lo, hi, attempt, &http.Response{StatusCode: status, Header: h})
					assert.GreaterOrEqual(t, d, lo, "%v attempt %d", tc.kv, attempt)
					assert.LessOrEqual(t, d, hi, "%v attempt %d", tc.kv, attempt)
					if tc.want != 0 {
						assert.Equal(t, tc.want, d, "%v attempt %d", tc.kv, attempt)
					}
				}
			}
		}
		// Bounds given upside down or negative still give a wait in them.
		assert.Equal(t, lo, Backoff(lo, -time.Second, 10, nil))
		assert.Equal(t, time.Duration(0), Backoff(-time.Second, -time.Second, 3, nil))
		assert.Equal(t, hi, Backoff(lo, hi, 1<<40, nil))
	})
}

// TestNewRetryableClientUsesTheCallersBase: the client's requests go
// through the caller's own RoundTripper, under a Transport.
func TestNewRetryableClientUsesTheCallersBase(t *testing.T) {
	base := &recordingRT{h: okHandler}
	c := NewRetryableClient(base, WithMaxWait(time.Second))
	tr := c.HTTPClient.Transport.(*Transport)
	defer tr.Close()
	resp, err := c.Get("http://api.test/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, base.count())
	assert.Same(t, base, tr.base)
}

// TestNewRetryableClientWaitsLittle: the retry layer's floor is a tenth
// of a second, not go-retryablehttp's second (the Transport holds a retry
// as long as the server asked); the rest of its defaults stay.
func TestNewRetryableClientWaitsLittle(t *testing.T) {
	c := NewRetryableClient(handlerTransport{h: okHandler})
	defer c.HTTPClient.Transport.(*Transport).Close()
	def := retryablehttp.NewClient()
	assert.Equal(t, 100*time.Millisecond, c.RetryWaitMin)
	assert.Equal(t, def.RetryWaitMax, c.RetryWaitMax)
	assert.Equal(t, def.RetryMax, c.RetryMax)
	// A refusal that says "now" (koa-ratelimit's Retry-After: 0) is
	// retried after the floor, not a second later.
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"0"}}}
	assert.Equal(t, 100*time.Millisecond, c.Backoff(c.RetryWaitMin, c.RetryWaitMax, 0, resp))
}

// TestNewRetryableClientLogsOnlyWhenAsked: silent by default; WithLogger
// gives go-retryablehttp's request and retry logs, and the Transport's
// pauses, to the caller's *slog.Logger.
func TestNewRetryableClientLogsOnlyWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := refuseFirst(nil)
		silent := NewRetryableClient(handlerTransport{h: h})
		defer silent.HTTPClient.Transport.(*Transport).Close()
		assert.Nil(t, silent.Logger, "silent by default")

		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c := NewRetryableClient(handlerTransport{h: h}, WithLogger(logger))
		defer c.HTTPClient.Transport.(*Transport).Close()
		resp, err := c.Get("http://api.test/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		out := buf.String()
		assert.Contains(t, out, "performing request")
		assert.Contains(t, out, "retrying request")
		assert.Contains(t, out, "the server paused a partition")
		assert.Contains(t, out, "partition=api.test")
	})
}

// TestLongWaitIsFinalForTheRetryLayer: a refusal that asks for hours —
// a Retry-After of five hours, a quota at zero until tomorrow, or
// Anthropic's subscription limits rejected until their window resets —
// is not retried: CheckRetry reports the wait, as a *limiters.RejectedError.
func TestLongWaitIsFinalForTheRetryLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		epoch := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
		resp := func(status int, kv ...string) *http.Response {
			h := http.Header{}
			for i := 0; i < len(kv); i += 2 {
				h.Add(kv[i], kv[i+1])
			}
			return &http.Response{StatusCode: status, Header: h, Body: http.NoBody}
		}
		for _, tc := range []struct {
			name  string
			resp  *http.Response
			final bool
			wait  time.Duration
		}{
			{"retry-after of hours", resp(429, "Retry-After", "18000"), true, 5 * time.Hour},
			{"quota at zero until tomorrow", resp(429, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(20*time.Hour)), true, 20 * time.Hour},
			{"unified rejected", resp(429, "anthropic-ratelimit-unified-status", "rejected", "anthropic-ratelimit-unified-reset", epoch(3*time.Hour),
				"anthropic-ratelimit-unified-representative-claim", "five_hour"), true, 3 * time.Hour},
			{"unified window rejected", resp(429, "Anthropic-Ratelimit-Unified-7d-Status", "rejected", "Anthropic-Ratelimit-Unified-7d-Reset", epoch(50*time.Hour),
				"anthropic-ratelimit-unified-5h-status", "allowed", "anthropic-ratelimit-unified-5h-reset", epoch(90*time.Hour)), true, 50 * time.Hour},
			{"unified rejected soon", resp(429, "anthropic-ratelimit-unified-status", "rejected", "anthropic-ratelimit-unified-reset", epoch(2*time.Minute)), false, 0},
			{"unified allowed", resp(429, "anthropic-ratelimit-unified-status", "allowed_warning", "anthropic-ratelimit-unified-reset", epoch(3*time.Hour)), false, 0},
			{"unified garbage", resp(429, "anthropic-ratelimit-unified-status", "rejected", "anthropic-ratelimit-unified-reset", "tomorrow"), false, 0},
			{"retry-after of a minute", resp(429, "Retry-After", "60"), false, 0},
			{"a success says nothing final", resp(200, "anthropic-ratelimit-unified-status", "rejected", "anthropic-ratelimit-unified-reset", epoch(3*time.Hour)), false, 0},
		} {
			retry, err := CheckRetry(t.Context(), tc.resp, nil)
			if !tc.final {
				assert.Nil(t, err, tc.name)
				continue
			}
			assert.False(t, retry, tc.name)
			var rej *limiters.RejectedError
			require.ErrorAs(t, err, &rej, tc.name)
			assert.Equal(t, tc.wait, rej.RetryAfter, tc.name)
			assert.ErrorIs(t, err, limiters.ErrRateLimited)
		}
	})
}

// TestRetryableClientReportsALongWait: a client made by
// NewRetryableClient gets a 5-hour Retry-After once, and returns at once
// with the wait instead of sleeping on it or retrying.
func TestRetryableClientReportsALongWait(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Retry-After", "18000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	c := NewRetryableClient(srv.Client().Transport)
	defer c.HTTPClient.Transport.(*Transport).Close()
	defer c.HTTPClient.CloseIdleConnections()
	start := time.Now()
	_, err := c.Get(srv.URL)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	var rej *limiters.RejectedError
	require.ErrorAs(t, err, &rej)
	assert.InDelta(t, (5 * time.Hour).Seconds(), rej.RetryAfter.Seconds(), 2)
	assert.Equal(t, 1, calls, "not retried")
}

// FuzzUnifiedReset: any values of Anthropic's unified fields give no
// panic, and a reset only in the future and within a year.
func FuzzUnifiedReset(f *testing.F) {
	f.Add("rejected", "1775455200", "5h", "allowed")
	f.Add("REJECTED ", "99999999999999999999", "", "rejected")
	f.Add("allowed_warning", "-5", "7d", "rejected")
	now := time.Unix(1775000000, 0)
	f.Fuzz(func(t *testing.T, status, reset, window, wstatus string) {
		h := http.Header{}
		h.Set("Anthropic-Ratelimit-Unified-Status", status)
		h.Set("Anthropic-Ratelimit-Unified-Reset", reset)
		h["anthropic-ratelimit-unified-"+window+"-status"] = []string{wstatus}
		h["anthropic-ratelimit-unified-"+window+"-reset"] = []string{reset}
		r, ok := unifiedReset(h, now)
		if ok && (!r.After(now) || r.After(now.Add(366*24*time.Hour))) {
			t.Fatalf("reset %v out of (now, now+366d]", r)
		}
		if !ok && !r.IsZero() {
			t.Fatalf("no reset, but %v", r)
		}
	})
}
