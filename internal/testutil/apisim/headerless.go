package apisim

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LeakyBucket is a shaper in the manner of nginx's limit_req with a burst
// and without nodelay: requests are let through 1/Rate apart, each held
// until its turn, at most Burst of them waiting; a request that finds the
// queue full is refused at once with a bare status (429 here; nginx's
// limit_req_status), no headers, no body.
//
// Stats.ByKey counts everything under "".
type LeakyBucket struct {
	recorder
	interval time.Duration
	burst    int
	mu       sync.Mutex
	next     time.Time // when the next request may pass
}

// NewLeakyBucket returns a shaper letting perSecond requests a second
// through, with burst of them waiting. It panics on a non-positive rate or a
// negative burst.
func NewLeakyBucket(perSecond int, burst int) *LeakyBucket {
	if perSecond <= 0 || burst < 0 {
		panic("apisim: NewLeakyBucket needs a positive rate and a non-negative burst")
	}
	return &LeakyBucket{interval: time.Second / time.Duration(perSecond), burst: burst}
}

// ServeHTTP holds the request until its turn, or refuses it.
func (l *LeakyBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.enter()
	defer l.leave()
	now := time.Now()
	l.mu.Lock()
	turn := now
	if l.next.After(now) {
		turn = l.next
	}
	wait := turn.Sub(now)
	admit := wait <= time.Duration(l.burst)*l.interval
	if admit {
		l.next = turn.Add(l.interval)
	}
	l.mu.Unlock()
	if !admit {
		l.refuse("", now)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if Sleep(r.Context(), wait) != nil {
		return // the client gave up; its turn is spent, as in nginx
	}
	l.admit("")
	w.WriteHeader(http.StatusOK)
}

// mustWindow panics, naming the constructor, unless limit and window are
// positive.
func mustWindow(constructor string, limit int, window time.Duration) {
	if limit <= 0 || window <= 0 {
		panic("apisim: " + constructor + " needs a positive limit and window")
	}
}

// PenaltyWindow is a fixed window, aligned to the Unix epoch, that counts
// every request against the caller, refused ones included (as OpenAI's guide
// warns its limits do: "unsuccessful requests contribute to your per-minute
// limit"). In a plain fixed window a refusal past the limit would cost
// nothing, so the overage carries over: requests beyond Limit in one window
// are debited from the next (at most one window's worth). A client that keeps
// knocking while refused starts the next window in debt. Refusals are a bare
// 429.
//
// Stats.ByKey counts everything under "".
type PenaltyWindow struct {
	recorder
	limit  int64
	length time.Duration
	mu     sync.Mutex
	start  time.Time
	count  int64 // requests counted in the window starting at start
}

// NewPenaltyWindow returns a PenaltyWindow of limit requests per window. It
// panics on a non-positive limit or window.
func NewPenaltyWindow(limit int, window time.Duration) *PenaltyWindow {
	mustWindow("NewPenaltyWindow", limit, window)
	return &PenaltyWindow{limit: int64(limit), length: window}
}

// ServeHTTP counts the request and admits it if the window's count allows.
func (p *PenaltyWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.enter()
	defer p.leave()
	now := time.Now()
	p.mu.Lock()
	if start := now.Truncate(p.length); !start.Equal(p.start) {
		debt := int64(0)
		if start.Sub(p.start) == p.length { // the window right after
			debt = min(p.limit, max(0, p.count-p.limit))
		}
		p.start, p.count = start, debt
	}
	p.count++
	admit := p.count <= p.limit
	p.mu.Unlock()
	if !admit {
		p.refuse("", now)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	p.admit("")
	w.WriteHeader(http.StatusOK)
}

// SlidingWindow is the sliding-window counter of go-chi/httprate: windows
// aligned to the epoch, and a request admitted iff
// round(prev·(1−elapsed/window) + curr) + 1 ≤ limit. Like httprate it
// reports X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset,
// where the reset is the end of the current fixed window in epoch seconds —
// a misreport, since the previous window still weighs in after it — and on
// a 429 a Retry-After of the whole window length.
//
// Stats.ByKey counts everything under "".
type SlidingWindow struct {
	recorder
	// Origin, when set, aligns the windows to it instead of to the epoch,
	// as a limiter whose windows start when it was created does.
	Origin time.Time
	limit  int64
	length time.Duration
	mu     sync.Mutex
	start  time.Time // of the current window
	curr   int64
	prev   int64
}

// NewSlidingWindow returns a SlidingWindow of limit requests per window. It
// panics on a non-positive limit or window.
func NewSlidingWindow(limit int, window time.Duration) *SlidingWindow {
	mustWindow("NewSlidingWindow", limit, window)
	return &SlidingWindow{limit: int64(limit), length: window}
}

// ServeHTTP admits or refuses the request as httprate does.
func (s *SlidingWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.enter()
	defer s.leave()
	now := time.Now()
	start := now.Truncate(s.length)
	if !s.Origin.IsZero() {
		start = s.Origin.Add(now.Sub(s.Origin).Truncate(s.length))
	}
	s.mu.Lock()
	switch {
	case start.Equal(s.start):
	case start.Sub(s.start) == s.length:
		s.prev, s.curr = s.curr, 0
	default:
		s.prev, s.curr = 0, 0
	}
	s.start = start
	weight := float64(s.length-now.Sub(start)) / float64(s.length)
	rate := int64(math.Round(float64(s.prev)*weight + float64(s.curr)))
	admit := rate+1 <= s.limit
	if admit {
		s.curr++
		rate++
	}
	s.mu.Unlock()

	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(s.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(s.limit-rate, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(start.Add(s.length).Unix(), 10))
	if !admit {
		s.refuse("", now)
		h.Set("Retry-After", strconv.Itoa(int(s.length.Seconds())))
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	s.admit("")
	w.WriteHeader(http.StatusOK)
}

// Capacity refuses with a bare 503 — no Retry-After, no quota fields —
// whenever more than Max requests would be in its hands at once, each
// admitted request being held for a service time: an overloaded backend
// behind a concurrency cap, not a rate limiter.
//
// Stats.ByKey counts everything under "".
type Capacity struct {
	recorder
	max     int
	service time.Duration
	mu      sync.Mutex
	busy    int
}

// NewCapacity returns a Capacity server taking at most max requests at once,
// holding each for service. It panics on a non-positive max or a negative
// service time.
func NewCapacity(max int, service time.Duration) *Capacity {
	if max <= 0 || service < 0 {
		panic("apisim: NewCapacity needs a positive max and a non-negative service time")
	}
	return &Capacity{max: max, service: service}
}

// ServeHTTP holds the request for the service time, or refuses it.
func (c *Capacity) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.enter()
	defer c.leave()
	now := time.Now()
	c.mu.Lock()
	admit := c.busy < c.max
	if admit {
		c.busy++
	}
	c.mu.Unlock()
	if !admit {
		c.refuse("", now)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer func() {
		c.mu.Lock()
		c.busy--
		c.mu.Unlock()
	}()
	if Sleep(r.Context(), c.service) != nil {
		return // the client gave up
	}
	c.admit("")
	w.WriteHeader(http.StatusOK)
}
