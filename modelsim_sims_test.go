package throttle

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The simulators of modelsim_servers_test.go hold to the quirks they
// claim: what each answers, request by request, in fake time.

// simHit sends one request to h and returns the answer's status and fields.
func simHit(h http.Handler, method string) (int, http.Header, string) {
	req := httptest.NewRequest(method, "http://api.test/items", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

func TestSimExpressRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(300 * time.Millisecond) // the window starts at the first request, not on the second
		start := time.Now()
		modes := map[expressMode]*expressLimit{}
		for _, m := range []expressMode{expressDraft6, expressDraft7, expressDraft8, expressLegacy} {
			modes[m] = &expressLimit{limit: 10, window: time.Second, mode: m}
		}
		for i := 1; i <= 10; i++ {
			for _, e := range modes {
				code, _, _ := simHit(e, http.MethodGet)
				require.Equal(t, http.StatusOK, code, "request %d", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// 0.1 s in: 0.9 s left, written as 1 (rounded up).
		_, h, _ := simHit(modes[expressDraft6], http.MethodGet)
		assert.Equal(t, "10;w=1", h.Get("RateLimit-Policy"))
		assert.Equal(t, "0", h.Get("RateLimit-Remaining"))
		assert.Equal(t, "1", h.Get("RateLimit-Reset"))
		assert.Equal(t, "1", h.Get("Retry-After"))
		_, h, _ = simHit(modes[expressDraft7], http.MethodGet)
		assert.Equal(t, "limit=10, remaining=0, reset=1", h.Get("RateLimit"))
		code, h, body := simHit(modes[expressDraft8], http.MethodGet)
		assert.Equal(t, http.StatusTooManyRequests, code)
		assert.Equal(t, "Too many requests, please try again later.", body)
		assert.Equal(t, `"10-in-1sec"; r=0; t=1`, h.Get("RateLimit"))
		assert.True(t, strings.HasPrefix(h.Get("RateLimit-Policy"), `"10-in-1sec"; q=10; w=1; pk=:`), h.Get("RateLimit-Policy"))
		_, h, _ = simHit(modes[expressLegacy], http.MethodGet)
		// The window ends at start+1 s, x.3: the epoch reset is rounded up.
		assert.Equal(t, start.Add(time.Second).Truncate(time.Second).Add(time.Second).Unix(), simInt(t, h.Get("X-RateLimit-Reset")))
		assert.NotEmpty(t, h.Get("Date"))

		// Refusals count: knocking until the window ends still ends it at
		// the same time (start + 1 s), and a new window starts with the
		// first request after it.
		time.Sleep(time.Until(start.Add(time.Second)) - time.Millisecond)
		code, _, _ = simHit(modes[expressDraft7], http.MethodGet)
		assert.Equal(t, http.StatusTooManyRequests, code, "1 ms before the end")
		time.Sleep(time.Millisecond)
		code, h, _ = simHit(modes[expressDraft7], http.MethodGet)
		assert.Equal(t, http.StatusOK, code, "at the end")
		assert.Equal(t, "limit=10, remaining=9, reset=1", h.Get("RateLimit"))

		// Fractional: the seconds to the window's end, to the millisecond.
		f := &expressLimit{limit: 1, window: time.Second, mode: expressLegacy, fractional: true}
		simHit(f, http.MethodGet)
		time.Sleep(25 * time.Millisecond)
		code, h, _ = simHit(f, http.MethodGet)
		assert.Equal(t, http.StatusTooManyRequests, code)
		assert.Equal(t, "0.975", h.Get("Retry-After"))
		assert.Equal(t, "975ms", h.Get(askedWait))
	})
}

func simInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', "not a number: %q", s)
		n = n*10 + int64(c-'0')
	}
	return n
}

func TestSimHAProxyStickTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(123 * time.Millisecond)
		s := &haproxyTable{limit: 10, period: 1000}
		for i := range 10 {
			code, _, _ := simHit(s, http.MethodGet)
			require.Equal(t, http.StatusOK, code, "request %d", i)
		}
		code, h, _ := simHit(s, http.MethodGet)
		assert.Equal(t, http.StatusTooManyRequests, code, "the 11th in the period")
		assert.Equal(t, "1", h.Get("Retry-After"))
		// Half of the next period: the last period (11, the refusal
		// counts) weighs half: ⌊11·500/1000 + 1⌋ = 6, admitted up to 10.
		time.Sleep(1500 * time.Millisecond)
		admitted := 0
		for range 10 {
			if code, _, _ := simHit(s, http.MethodGet); code == http.StatusOK {
				admitted++
			}
		}
		assert.Equal(t, 5, admitted, "11 × ½ = 5.5 of the last period, ⌊5.5 + n⌋ ≤ 10")
		// Two idle periods: a fresh start.
		time.Sleep(2 * time.Second)
		for i := range 10 {
			code, _, _ := simHit(s, http.MethodGet)
			require.Equal(t, http.StatusOK, code, "request %d after two idle periods", i)
		}
	})
}

func TestSimSlidingRefuser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, exact := range []bool{false, true} {
			s := &slidingRefuser{limit: 10, window: time.Second, exact: exact}
			for i := range 10 {
				code, h, _ := simHit(s, http.MethodGet)
				require.Equal(t, http.StatusOK, code, "request %d", i)
				assert.Empty(t, h.Get("Retry-After"), "nothing on a success")
			}
			code, h, _ := simHit(s, http.MethodGet)
			assert.Equal(t, http.StatusTooManyRequests, code)
			assert.Equal(t, "1", h.Get("Retry-After"))
			h.Del(askedWait) // the wire strips it
			assert.Len(t, h, 1, "a refusal carries only Retry-After")
			time.Sleep(time.Second)
		}
	})
}

func TestSimGitHubSecondary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &githubSecondary{points: 40, window: time.Second, status: http.StatusForbidden, retryAfter: 2}
		for i := range 40 {
			code, _, _ := simHit(g, http.MethodGet)
			require.Equal(t, http.StatusOK, code, "request %d", i)
		}
		code, h, body := simHit(g, http.MethodGet)
		assert.Equal(t, http.StatusForbidden, code)
		assert.Equal(t, "2", h.Get("Retry-After"))
		assert.Equal(t, "4960", h.Get("X-RateLimit-Remaining"), "the primary limit is far from spent")
		assert.Contains(t, body, "You have exceeded a secondary rate limit")
		// POSTs cost 5 points.
		p := &githubSecondary{points: 900, window: time.Minute, status: http.StatusForbidden, retryAfter: 60}
		for i := range 180 {
			code, _, _ := simHit(p, http.MethodPost)
			require.Equal(t, http.StatusOK, code, "POST %d", i)
		}
		code, _, _ = simHit(p, http.MethodPost)
		assert.Equal(t, http.StatusForbidden, code, "900 points spent")
		code, _, _ = simHit(p, http.MethodGet)
		assert.Equal(t, http.StatusForbidden, code, "not one point left")
	})
}

// TestSimWireCountsPauses: a request counts as sent during a pause when it
// leaves after the client heard a refusal that asked for a wait and
// arrives before that wait is over; not when it left before the refusal
// was heard, nor when it arrives after the wait.
func TestSimWireCountsPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refuse := true
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if refuse {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		wire := &simWire{h: h, latency: 10 * time.Millisecond}
		send := func() {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/", nil)
			require.NoError(t, err)
			resp, err := wire.RoundTrip(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done := make(chan struct{})
		go func() {
			// Sent at 15 ms, before the first refusal was heard: not
			// counted. Refused at 25 ms, heard at 35 ms: the wait ends at
			// 1.025 s.
			time.Sleep(15 * time.Millisecond)
			send()
			close(done)
		}()
		send() // refused at 10 ms, heard at 20 ms: the wait ends at 1.01 s
		<-done
		assert.Zero(t, wire.counts().inPause)
		refuse = false
		time.Sleep(970 * time.Millisecond) // 1.005 s: arrives at 1.015 s, inside the second wait
		send()
		assert.Equal(t, 1, wire.counts().inPause, "arrived inside the wait")
		time.Sleep(5 * time.Millisecond) // 1.03 s: arrives at 1.04 s
		send()
		c := wire.counts()
		assert.Equal(t, 1, c.inPause, "arrived after the wait")
		assert.Equal(t, simCounts{ok: 2, refused: 2, inPause: 1, requests: 4}, c)
	})
}
