package throttle

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// pauses records the EventPaused events of a Transport.
type pauses struct {
	mu sync.Mutex
	ev []Event
}

func (p *pauses) observe(e Event) {
	if e.Kind == EventPaused {
		p.mu.Lock()
		p.ev = append(p.ev, e)
		p.mu.Unlock()
	}
}

func (p *pauses) all() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.ev...)
}

// TestGitHubSecondaryLimitPausesItsBucket: a secondary rate limit (403,
// its message in the body, no Retry-After, remaining not 0) pauses the
// bucket it names for the minute GitHub documents; another bucket of the
// host is not held.
func TestGitHubSecondaryLimitPausesItsBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := apisim.NewGitHub(apisim.GitHubConfig{SecondaryLimit: 3})
		var p pauses
		tr := NewTransport(&apisim.Transport{Handler: gh, Latency: 5 * time.Millisecond}, WithObserver(p.observe))
		defer tr.Close()
		get := func(path string) (int, time.Duration) {
			start := time.Now()
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path, nil))
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode, time.Since(start)
		}
		for range 3 {
			status, _ := get("/repos/o/r")
			require.Equal(t, http.StatusOK, status)
		}
		status, _ := get("/repos/o/r")
		require.Equal(t, http.StatusForbidden, status)
		ev := p.all()
		require.Len(t, ev, 1)
		assert.Equal(t, "api.test#core", ev[0].Key)
		assert.Equal(t, http.StatusForbidden, ev[0].Status)
		assert.Equal(t, headers.SecondaryLimitWait, time.Until(ev[0].Until))

		_, took := get("/search/code?q=x")
		assert.Equal(t, 10*time.Millisecond, took, "search is not held by core's pause")
		_, took = get("/repos/o/r")
		assert.GreaterOrEqual(t, took, headers.SecondaryLimitWait-10*time.Millisecond, "core waits out the minute")
	})
}

// TestShouldRetryDecidesTheRetryLayer: x-should-retry: false stops
// NewRetryableClient even on a 503 it would retry; true makes it retry a
// 400 it would not.
func TestShouldRetryDecidesTheRetryLayer(t *testing.T) {
	for _, tc := range []struct {
		status int
		should string
		want   int32
	}{
		{http.StatusServiceUnavailable, "false", 1},
		{http.StatusBadRequest, "true", 3},
		{http.StatusBadRequest, "", 1},
	} {
		var calls atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if tc.should != "" {
				w.Header().Set("X-Should-Retry", tc.should)
			}
			w.WriteHeader(tc.status)
		})
		c := NewRetryableClient(handlerTransport{h: h})
		c.RetryMax = 2
		c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, time.Millisecond
		resp, err := c.Get("http://api.test/")
		if err == nil {
			resp.Body.Close()
		}
		assert.Equal(t, tc.want, calls.Load(), "%d, x-should-retry %q", tc.status, tc.should)
		c.HTTPClient.Transport.(*Transport).Close()
	}
}

// TestFinalRefusalsNeitherRetryNorPause: OpenAI's insufficient_quota is a
// 429 that no wait cures: the retry layer does not retry it, the partition
// is not paused, and the caller can tell it apart with Classify; the body
// the Transport peeked at still reads in full.
func TestFinalRefusalsNeitherRetryNorPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oa := apisim.NewOpenAI(apisim.OpenAIConfig{InsufficientQuota: true})
		var p pauses
		c := NewRetryableClient(&apisim.Transport{Handler: oa, Latency: 5 * time.Millisecond}, WithObserver(p.observe))
		defer c.HTTPClient.Transport.(*Transport).Close()
		c.RetryMax = 3
		for range 3 {
			resp, err := c.Post("http://api.test/v1/chat/completions", "application/json", chat(10))
			require.NoError(t, err)
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			cls := Classify(resp)
			assert.Equal(t, headers.QuotaExhausted, cls.Signal)
			assert.Equal(t, "insufficient_quota", cls.Code)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(body), "{") && strings.Contains(string(body), "insufficient_quota"), "the whole body: %s", body)
			resp.Body.Close()
		}
		assert.EqualValues(t, 3, oa.Snapshot().Refused, "one try each")
		assert.Empty(t, p.all(), "no pause")
	})
}

// TestOverloadedBacksOffAdaptively: Anthropic's 529 overloaded_error is a
// capacity signal: each refusal in a row doubles a short pause (never a
// quota at zero, never the minute-long reset of its quotas), and requests
// flow again once the server recovers.
func TestOverloadedBacksOffAdaptively(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		an := apisim.NewAnthropic(apisim.AnthropicConfig{})
		an.SetOverloaded(true)
		var p pauses
		tr := NewTransport(&apisim.Transport{Handler: an, Latency: 5 * time.Millisecond}, WithObserver(p.observe))
		defer tr.Close()
		client := &http.Client{Transport: tr}
		body := []byte(`{"model":"claude","max_tokens":10,"messages":[]}`)
		for range 3 {
			status, err := post(t, t.Context(), client, "http://api.test/v1/messages", body)
			require.NoError(t, err)
			assert.Equal(t, 529, status)
		}
		an.SetOverloaded(false)
		status, err := post(t, t.Context(), client, "http://api.test/v1/messages", body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status)
		ev := p.all()
		require.Len(t, ev, 3)
		var last time.Duration
		for i, e := range ev {
			assert.Equal(t, 529, e.Status)
			if i > 0 {
				gap := e.Until.Sub(ev[i-1].Until)
				assert.Greater(t, gap, last, "each refusal in a row waits longer")
				last = gap
			}
		}
		assert.Less(t, time.Until(ev[2].Until), 10*time.Second, "a short back-off, not a quota's reset")
	})
}

// TestConcurrentRequestsQuotaIsAConcurrencyLimit: an IETF policy whose
// unit is concurrent-requests limits the requests in flight, not per
// window.
func TestConcurrentRequestsQuotaIsAConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inflight, most atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			if n > most.Load() {
				most.Store(n)
			}
			w.Header().Set("RateLimit-Policy", `"conc";q=2;qu="concurrent-requests"`)
			time.Sleep(100 * time.Millisecond)
		})
		tr := NewTransport(&apisim.Transport{Handler: h, Latency: 5 * time.Millisecond})
		defer tr.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil)) // learns the policy
		require.NoError(t, err)
		resp.Body.Close()
		most.Store(0)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
				require.NoError(t, err)
				resp.Body.Close()
			})
		}
		wg.Wait()
		assert.EqualValues(t, 2, most.Load())
	})
}

// TestIETFPartitionKeyIsABucket: the IETF draft's pk parameter tells
// buckets of one host apart: a quota at zero for one partition key pauses
// only the requests of its route (method and first two path segments).
func TestIETFPartitionKeyIsABucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pk, remaining := ":YWJj:", "0" // "abc", used up for 30 s
			if strings.HasPrefix(r.URL.Path, "/b/") {
				pk, remaining = ":ZGVm:", "5" // "def"
			}
			w.Header().Set("RateLimit-Policy", `"p";q=10;w=60;pk=`+pk)
			w.Header().Set("RateLimit", `"p";r=`+remaining+`;t=30;pk=`+pk)
		})
		var p pauses
		tr := NewTransport(handlerTransport{h: h, latency: 5 * time.Millisecond}, WithObserver(p.observe))
		defer tr.Close()
		get := func(path string) time.Duration { return timedGet(t, tr, "http://api.test"+path) }
		get("/a/q/1")
		get("/b/q/1")
		ev := p.all()
		require.Len(t, ev, 1)
		assert.Equal(t, "api.test#abc", ev[0].Key)
		assert.Equal(t, 10*time.Millisecond, get("/b/q/2"), "def is not held")
		assert.GreaterOrEqual(t, get("/a/q/2"), 29*time.Second, "abc waits for its reset")
	})
}

// TestRouteGuessCorrected: a route not learned yet goes through the
// bucket of its family (method and first path segment) as a guess; an
// answer to it that reports a quota of no bucket teaches that the route
// has none, and it is no longer held by that bucket's pause.
func TestRouteGuessCorrected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		abcLeft := "5"
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/a/x/") {
				w.Header().Set("RateLimit-Policy", `"p";q=10;w=60;pk=:YWJj:`) // "abc"
				w.Header().Set("RateLimit", `"p";r=`+abcLeft+`;t=30;pk=:YWJj:`)
				return
			}
			w.Header().Set("RateLimit-Policy", `"q";q=100;w=60`)
			w.Header().Set("RateLimit", `"q";r=50;t=30`)
		})
		tr := NewTransport(handlerTransport{h: h, latency: 5 * time.Millisecond})
		defer tr.Close()
		get := func(path string) time.Duration { return timedGet(t, tr, "http://api.test"+path) }
		get("/a/x/1") // GET /a/x is abc's; GET /a/y is guessed abc's
		get("/a/y/1") // and its answer names no bucket
		abcLeft = "0"
		get("/a/x/2") // abc is spent for 30 s
		assert.Equal(t, 10*time.Millisecond, get("/a/y/2"), "a route of no bucket is not held by abc")
		assert.GreaterOrEqual(t, get("/a/x/3"), 29*time.Second, "abc waits for its reset")
	})
}

// timedGet sends GET url through rt and returns how long its answer took.
func timedGet(t *testing.T, rt http.RoundTripper, url string) time.Duration {
	t.Helper()
	start := time.Now()
	resp, err := rt.RoundTrip(mustReq(t, url, nil))
	require.NoError(t, err)
	resp.Body.Close()
	return time.Since(start)
}
