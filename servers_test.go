package throttle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// handlerTransport serves requests in memory with an http.Handler, so that
// whole client–server exchanges run inside a testing/synctest bubble.
type handlerTransport struct {
	h       http.Handler
	latency time.Duration // one-way, slept (fake time) before and after
	jitter  bool          // the way there takes a random 0–2× latency instead
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if t.jitter {
		time.Sleep(time.Duration(rand.Int64N(int64(2*t.latency) + 1)))
	} else if t.latency > 0 {
		time.Sleep(t.latency)
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close()
	}
	if t.latency > 0 {
		time.Sleep(t.latency)
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// refuseFirst answers its first request with a 429 and Retry-After: 1,
// and the others with next (an empty 200 when next is nil).
func refuseFirst(next http.HandlerFunc) http.HandlerFunc {
	var calls atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if next != nil {
			next(w, r)
		}
	}
}

// api is a test server that enforces a limit and counts what it saw.
type api struct {
	mu      sync.Mutex
	ok      int
	limited int
	decide  func(now time.Time, h http.Header) bool // writes headers, reports admit
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	admit := a.decide(time.Now(), w.Header())
	if admit {
		a.ok++
	} else {
		a.limited++
	}
	a.mu.Unlock()
	if !admit {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

func (a *api) counts() (ok, limited int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ok, a.limited
}

// fixedWindow counts requests per window; windows start on the epoch, or
// at the first request when fromFirst is set (as many middlewares do).
type fixedWindow struct {
	limit     int
	window    time.Duration
	fromFirst bool
	start     time.Time
	count     int
}

// hit counts a request and returns whether it fits, the remaining count and
// the window's end.
func (f *fixedWindow) hit(now time.Time) (bool, int, time.Time) {
	if f.start.IsZero() || !now.Before(f.start.Add(f.window)) {
		if f.fromFirst {
			f.start = now
		} else {
			f.start = now.Truncate(f.window)
		}
		f.count = 0
	}
	end := f.start.Add(f.window)
	if f.count >= f.limit {
		return false, 0, end
	}
	f.count++
	return true, f.limit - f.count, end
}

// githubAPI answers like GitHub: X-RateLimit-* with the reset in epoch
// seconds, rounded down, and a 429 that carries no Retry-After.
func githubAPI(limit int, window time.Duration, fromFirst bool) *api {
	fw := &fixedWindow{limit: limit, window: window, fromFirst: fromFirst}
	return &api{decide: func(now time.Time, h http.Header) bool {
		ok, rem, end := fw.hit(now)
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(rem))
		h.Set("X-RateLimit-Used", strconv.Itoa(limit-rem))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
		return ok
	}}
}

// retryAfterAPI says nothing until it refuses, and then only Retry-After:
// the seconds to the window's end rounded up, or a constant when fixed > 0,
// or, with httpDate, an HTTP date written with "UTC" instead of "GMT".
func retryAfterAPI(limit int, window time.Duration, fromFirst bool, fixed time.Duration, httpDate bool) *api {
	fw := &fixedWindow{limit: limit, window: window, fromFirst: fromFirst}
	return &api{decide: func(now time.Time, h http.Header) bool {
		ok, _, end := fw.hit(now)
		if !ok {
			switch {
			case fixed > 0:
				h.Set("Retry-After", strconv.Itoa(int(fixed/time.Second)))
			case httpDate:
				h.Set("Retry-After", end.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC"))
			default:
				h.Set("Retry-After", strconv.Itoa(int(math.Ceil(end.Sub(now).Seconds()))))
			}
		}
		return ok
	}}
}

// silentAPI refuses with a bare 429: no Retry-After, no quota headers.
func silentAPI(limit int, window time.Duration) *api {
	fw := &fixedWindow{limit: limit, window: window}
	return &api{decide: func(now time.Time, h http.Header) bool {
		ok, _, _ := fw.hit(now)
		return ok
	}}
}

// ietfAPI is a token bucket that advertises itself with the IETF fields
// (and Retry-After on refusals), written by our own headers.Write.
func ietfAPI(r limiters.Rate, burst int) *api {
	tb := limiters.NewTokenBucket(r, burst)
	return &api{decide: func(now time.Time, h http.Header) bool {
		d := tb.TryAcquire(1)
		headers.Write(h, d, headers.IETF)
		return d.Allowed
	}}
}

// slidingLogAPI is an exact sliding window that frees one slot at a time
// and reports X-RateLimit-Reset as delta seconds rounded down (sloppy).
func slidingLogAPI(limit int, window time.Duration) *api {
	var log []time.Time
	return &api{decide: func(now time.Time, h http.Header) bool {
		for len(log) > 0 && !log[0].After(now.Add(-window)) {
			log = log[1:]
		}
		ok := len(log) < limit
		if ok {
			log = append(log, now)
		}
		var reset time.Duration
		if len(log) > 0 {
			reset = log[0].Add(window).Sub(now)
		}
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(limit-len(log)))
		h.Set("X-RateLimit-Reset", strconv.Itoa(int(reset/time.Second)))
		return ok
	}}
}
