package throttle

// Simulators of the server behaviours in issue 18's table, each mimicking a
// real rate-limiting server nobody here wrote (or this project's own), and
// a wire that carries a client's requests to them in fake time and counts
// what matters: successes, refusals, and requests sent during a wait a
// refusal asked for.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// askedWait is an internal field a simulator sets on a refusal to say how
// long it asked the client to wait, as a Go duration; the wire strips it
// before the client sees the answer. Without it the wire reads the wait
// from the answer's fields as headers.Parse does (our own server).
const askedWait = "Sim-Asked-Wait"

// simWire carries requests to a handler in memory, inside a
// testing/synctest bubble: each request travels latency plus a seeded
// random extra of up to jitter to the handler, and its answer travels
// latency back. It counts, for the whole run, the successes (2xx), the
// refusals (429, 403, 503) and the requests sent during a pause: sent after
// the client had heard a refusal that asked it to wait, and arriving at the
// server before that wait, counted from when the server wrote the refusal,
// had passed. (A client that waits what it was told from the moment it
// hears it never arrives inside it.)
type simWire struct {
	h       http.Handler
	latency time.Duration // one way
	jitter  time.Duration // extra on the way there: uniform in [0, jitter]
	// back is extra on the way back, uniform in [0, back]: answers that
	// come back out of the order they were sent in (a loaded machine).
	back time.Duration
	seed uint64

	// trace, when set, keeps the exchanges up to ten after the first
	// request sent during a pause, for a test to print.
	trace bool

	mu       sync.Mutex
	rng      *rand.Rand
	log      []string
	logLeft  int
	ok       int
	refused  int
	inPause  int
	requests int
	pauses   []simPause
	start    time.Time // the first request's sending
}

// simPause is a wait a refusal asked for: heard by the client at heard,
// over (at the server) at until, or later if a refusal heard before asked
// for longer.
type simPause struct{ heard, until time.Time }

// simCounts is what a simWire counted.
type simCounts struct {
	ok, refused, inPause, requests int
}

// traced returns the exchanges kept by trace: the forty before the first
// request sent during a pause, and the ten after it.
func (w *simWire) traced() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

func (w *simWire) counts() simCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return simCounts{w.ok, w.refused, w.inPause, w.requests}
}

func (w *simWire) draw() time.Duration { return w.uniform(w.jitter) }

func (w *simWire) uniform(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rng == nil {
		w.rng = rand.New(rand.NewPCG(w.seed, w.seed^0x9e3779b97f4a7c15))
	}
	return time.Duration(w.rng.Int64N(int64(d) + 1))
}

// simObserve, when set by a test that runs alone, hears every exchange.
var simObserve func(sent, arrived time.Time, status int, h http.Header)

func (w *simWire) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	ctx := req.Context()
	sent := time.Now()
	if err := apisim.Sleep(ctx, w.latency+w.draw()); err != nil {
		return nil, err
	}
	arrived := time.Now()
	w.mu.Lock()
	w.requests++
	// The pauses heard by the time the request was sent are a prefix
	// (they are kept in the order heard); the last of them holds the
	// latest end of any.
	// (A request sent at the very instant a refusal came back, in fake
	// time, was let through before the client could read it.)
	i := sort.Search(len(w.pauses), func(i int) bool { return !w.pauses[i].heard.Before(sent) })
	during := i > 0 && arrived.Before(w.pauses[i-1].until)
	if during {
		w.inPause++
		if w.inPause == 1 {
			w.logLeft = 11
		}
	}
	start := w.start
	if start.IsZero() {
		start, w.start = sent, sent
	}
	w.mu.Unlock()

	in := req.Clone(ctx)
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RemoteAddr = "192.0.2.1:1234"
	in.RequestURI = req.URL.RequestURI()
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, in)
	resp := rec.Result()
	var wait time.Duration
	refused := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusServiceUnavailable
	if v := resp.Header.Get(askedWait); v != "" {
		wait, _ = time.ParseDuration(v)
	} else if ms := resp.Header.Get("Retry-After-Ms"); refused && ms != "" {
		// The wait to the millisecond (ours, OpenAI's): the whole-second
		// fields beside it say the same, rounded up.
		n, _ := strconv.Atoi(ms)
		wait = time.Duration(n) * time.Millisecond
	} else if refused {
		wait = headers.Parse(resp.Header, arrived).Delay(arrived)
	}
	resp.Header.Del(askedWait)
	if simObserve != nil {
		simObserve(sent, arrived, resp.StatusCode, resp.Header)
	}
	w.mu.Lock()
	if refused {
		w.refused++
	} else if resp.StatusCode/100 == 2 {
		w.ok++
	}
	w.mu.Unlock()
	if err := apisim.Sleep(ctx, w.latency+w.uniform(w.back)); err != nil {
		return nil, err
	}
	w.mu.Lock()
	if refused && wait > 0 {
		p := simPause{heard: time.Now(), until: arrived.Add(wait)}
		if n := len(w.pauses); n > 0 && w.pauses[n-1].until.After(p.until) {
			p.until = w.pauses[n-1].until
		}
		w.pauses = append(w.pauses, p)
	}
	if w.trace && (w.inPause == 0 || w.logLeft > 0) {
		if w.inPause > 0 {
			w.logLeft--
		}
		mark := ""
		if during {
			mark = "  <- sent during a pause"
		}
		at := func(t time.Time) string { return fmt.Sprintf("%.4f", t.Sub(start).Seconds()) }
		extra := ""
		for _, k := range []string{"Retry-After-Ms", "X-Ratelimit-Reset-After"} {
			if v := resp.Header.Get(k); v != "" {
				extra += " " + k + "=" + strconv.Quote(v)
			}
		}
		w.log = append(w.log, fmt.Sprintf("sent %s arrived %s heard %s: %d Retry-After=%q X-RateLimit-Remaining=%q X-RateLimit-Reset=%q RateLimit=%q%s%s",
			at(sent), at(arrived), at(time.Now()), resp.StatusCode, resp.Header.Get("Retry-After"),
			resp.Header.Get("X-Ratelimit-Remaining"), resp.Header.Get("X-Ratelimit-Reset"), resp.Header.Get("Ratelimit"), extra, mark))
		if w.inPause == 0 && len(w.log) > 40 {
			w.log = w.log[1:]
		}
	}
	w.mu.Unlock()
	resp.Request = req
	return resp, nil
}

// simNowMs is the time in whole milliseconds, as JavaScript's Date.now() and
// HAProxy's now_ms read it.
func simNowMs() int64 { return time.Now().UnixMilli() }

// simCeilDiv is ⌈a/b⌉ for a ≥ 0, b > 0 (Math.ceil of a quotient); negative a
// gives what Math.ceil does too (towards zero).
func simCeilDiv(a, b int64) int64 {
	if a <= 0 {
		return -(-a / b)
	}
	return (a + b - 1) / b
}

// expressMode is how an express-rate-limit middleware writes its fields.
type expressMode int

const (
	expressDraft6 expressMode = iota // standardHeaders: 'draft-6'
	expressDraft7                    // standardHeaders: 'draft-7'
	expressDraft8                    // standardHeaders: 'draft-8'
	expressLegacy                    // legacyHeaders only: X-RateLimit-*, reset in epoch seconds rounded up
)

// expressLimit mimics express-rate-limit (npm, v7/v8) with its default
// MemoryStore, as its source has it (source/memory-store.ts,
// source/headers.ts, source/rate-limit.ts):
//   - a fixed window per client that starts at the client's first request
//     after the last one ended (resetTime = now + windowMs; a client whose
//     resetTime ≤ Date.now() starts afresh), on a millisecond clock;
//   - every request counts, refused ones too (totalHits++ before the
//     check); a request is refused when totalHits > limit;
//   - remaining = max(0, limit − totalHits); the reset is
//     max(0, Math.ceil((resetTime − Date.now())/1000)) seconds, whole
//     seconds rounded up; legacy X-RateLimit-Reset is
//     Math.ceil(resetTime/1000), epoch seconds rounded up, sent with Date;
//   - draft-6: RateLimit-Policy "10;w=1", RateLimit-Limit/-Remaining, and
//     RateLimit-Reset only when non-zero; draft-7: RateLimit-Policy and
//     "RateLimit: limit=10, remaining=9, reset=1"; draft-8: a named policy
//     `"10-in-1sec"; q=10; w=1; pk=:…:` and `"10-in-1sec"; r=9; t=1`;
//   - a refusal is 429 "Too many requests, please try again later." with
//     Retry-After = the same rounded-up seconds.
//
// With fractional set, a refusal's Retry-After is the time to the window's
// end in fractional seconds, to the millisecond rounded up ("Retry-After:
// 0.975"), as several API gateways and Python servers write it, the rest
// as the mode says.
type expressLimit struct {
	limit      int
	window     time.Duration
	mode       expressMode
	fractional bool

	mu      sync.Mutex
	clients map[string]*expressClient
}

type expressClient struct {
	hits    int
	resetMs int64
}

func (e *expressLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.RemoteAddr
	e.mu.Lock()
	if e.clients == nil {
		e.clients = make(map[string]*expressClient)
	}
	now := simNowMs()
	windowMs := e.window.Milliseconds()
	c := e.clients[key]
	if c == nil || c.resetMs <= now {
		c = &expressClient{resetMs: now + windowMs}
		e.clients[key] = c
	}
	c.hits++
	hits, resetMs := c.hits, c.resetMs
	e.mu.Unlock()

	remaining := max(0, e.limit-hits)
	resetSec := max(0, simCeilDiv(resetMs-now, 1000))
	winSec := simCeilDiv(windowMs, 1000)
	h := w.Header()
	switch e.mode {
	case expressDraft6:
		h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", e.limit, winSec))
		h.Set("RateLimit-Limit", strconv.Itoa(e.limit))
		h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
		if resetSec != 0 {
			h.Set("RateLimit-Reset", strconv.FormatInt(resetSec, 10))
		}
	case expressDraft7:
		h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", e.limit, winSec))
		h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", e.limit, remaining, resetSec))
	case expressDraft8:
		name := fmt.Sprintf("%d-in-%dsec", e.limit, winSec)
		sum := sha256.Sum256([]byte(key))
		pk := base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(sum[:])[:12]))
		h.Add("RateLimit-Policy", fmt.Sprintf("%q; q=%d; w=%d; pk=:%s:", name, e.limit, winSec, pk))
		h.Add("RateLimit", fmt.Sprintf("%q; r=%d; t=%d", name, remaining, resetSec))
	case expressLegacy:
		h.Set("X-RateLimit-Limit", strconv.Itoa(e.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("Date", time.UnixMilli(now).UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(simCeilDiv(resetMs, 1000), 10))
	}
	if hits > e.limit {
		if e.fractional {
			left := time.Duration(resetMs-now) * time.Millisecond
			h.Set("Retry-After", strconv.FormatFloat(left.Seconds(), 'f', -1, 64))
			h.Set(askedWait, left.String())
		} else {
			h.Set("Retry-After", strconv.FormatInt(resetSec, 10))
			h.Set(askedWait, (time.Duration(resetSec) * time.Second).String())
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "Too many requests, please try again later.")
		return
	}
	fmt.Fprint(w, "ok")
}

// fractionalWindow is the same window from the client's first request,
// which says nothing on a success and answers a refusal with a 429 whose
// Retry-After is the time to the window's end in fractional seconds, to
// the millisecond rounded up (as expressLimit's fractional). Refusals do
// not count.
type fractionalWindow struct {
	limit  int
	window time.Duration

	mu    sync.Mutex
	start time.Time
	used  int
}

func (f *fractionalWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	now := time.Now()
	if f.start.IsZero() || !now.Before(f.start.Add(f.window)) {
		f.start, f.used = now, 0
	}
	ok := f.used < f.limit
	if ok {
		f.used++
	}
	left := f.start.Add(f.window).Sub(now)
	f.mu.Unlock()
	if !ok {
		left = (left + time.Millisecond - 1).Truncate(time.Millisecond)
		w.Header().Set("Retry-After", strconv.FormatFloat(left.Seconds(), 'f', -1, 64))
		w.Header().Set(askedWait, left.String())
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

// slidingRefuser is a sliding window that says nothing on a success and
// answers a refusal with a bare 429 and "Retry-After: 1", whatever the
// wait really is. With exact set it is a sliding log (at most limit
// admitted in any window-long span, as rate-limiter-flexible's and
// Redis-sorted-set limiters do); otherwise the sliding-window counter of
// Cloudflare and many gateways, over windows aligned to the epoch: admit
// iff prev·(1−elapsed/window) + curr < limit. Refusals do not count.
type slidingRefuser struct {
	limit  int
	window time.Duration
	exact  bool

	mu         sync.Mutex
	log        []time.Time
	curStart   time.Time
	prev, curr int
}

func (s *slidingRefuser) admit(now time.Time) bool {
	if s.exact {
		for len(s.log) > 0 && !s.log[0].After(now.Add(-s.window)) {
			s.log = s.log[1:]
		}
		if len(s.log) >= s.limit {
			return false
		}
		s.log = append(s.log, now)
		return true
	}
	start := now.Truncate(s.window)
	switch {
	case start.Equal(s.curStart):
	case start.Sub(s.curStart) == s.window:
		s.prev, s.curr, s.curStart = s.curr, 0, start
	default:
		s.prev, s.curr, s.curStart = 0, 0, start
	}
	elapsed := now.Sub(start)
	weighted := float64(s.prev)*float64(s.window-elapsed)/float64(s.window) + float64(s.curr)
	if weighted+1 > float64(s.limit) {
		return false
	}
	s.curr++
	return true
}

func (s *slidingRefuser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ok := s.admit(time.Now())
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.Header().Set(askedWait, "1s")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

// haproxyTable mimics an HAProxy stick table as bench/haproxy_test.go
// configures it, plus a Retry-After on its refusals:
//
//	stick-table type ip size 1k expire 10s store http_req_rate(1s)
//	http-request track-sc0 src
//	http-request deny deny_status 429 if { sc_http_req_rate(0) gt 10 }
//	http-after-response set-header Retry-After 1 if { status 429 }
//
// Its freq_ctr (src/freq_ctr.c) counts on a millisecond clock: the period
// starts with the entry's first request and moves on in whole periods
// (curr_tick += period; after two idle periods it restarts at now), and the
// rate read is ⌊(prev·remain + curr·period)/period⌋, remain being what is
// left of the current period, with the low-rate correction (curr = 0 and
// prev ≤ 1 reads prev). Every request is tracked before it is judged, so
// refused requests count against the client.
type haproxyTable struct {
	limit  int64
	period int64 // milliseconds
	bare   bool  // no Retry-After: a bare 429, as bench/haproxy_test.go configures it

	mu         sync.Mutex
	tick       int64 // curr_tick; 0 = a fresh entry
	prev, curr int64
}

func (s *haproxyTable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	now := simNowMs()
	// update_freq_ctr_period
	if now-s.tick >= s.period {
		s.prev, s.curr = s.curr, 0
		s.tick += s.period
		if now-s.tick >= s.period {
			s.prev, s.tick = 0, now
		}
	}
	s.curr++
	// read_freq_ctr_period
	curr, past := s.curr, s.prev
	remain := s.tick + s.period - now
	if remain < 0 {
		remain += s.period
		if remain >= 0 {
			past = curr
		} else {
			past = 0
		}
		curr = 0
	}
	var rate int64
	if curr == 0 && past <= 1 {
		rate = past
	} else {
		rate = (past*remain + curr*s.period) / s.period
	}
	s.mu.Unlock()
	if rate > s.limit {
		if !s.bare {
			w.Header().Set("Retry-After", "1")
			w.Header().Set(askedWait, "1s")
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "<html><body><h1>429 Too Many Requests</h1>\nYou have sent too many requests in a given amount of time.\n</body></html>\n")
		return
	}
	fmt.Fprint(w, "ok")
}

// githubSecondary mimics GitHub's secondary rate limits as its REST
// documentation describes them (docs.github.com/rest/using-the-rest-api/
// rate-limits-for-the-rest-api, "About secondary rate limits"): beside the
// primary limit (5,000 an hour, x-ratelimit-* on every answer, far from
// spent here), "no more than 900 points per minute" with a GET costing 1
// point and a POST, PATCH, PUT or DELETE 5, or the per-second figure of
// issue 18 (40 requests a second). Over it: 403 (or 429), the documented
// message "You have exceeded a secondary rate limit…", x-ratelimit-remaining
// not 0, and retry-after when GitHub sends one. The limit is a sliding log
// of points admitted in the last window; refused requests spend nothing.
type githubSecondary struct {
	points     int           // per window
	window     time.Duration // 1 s (issue 18's figure) or 1 min (the docs')
	status     int           // 403 or 429
	retryAfter int           // seconds; 0 sends none

	mu       sync.Mutex
	log      []githubSpend
	spent    int
	primary  int
	resetsAt time.Time
	second   int // secondary refusals
}

type githubSpend struct {
	at     time.Time
	points int
}

// githubPoints is what a request costs against the secondary limit.
func githubPoints(method string) int {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

func (g *githubSecondary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cost := githubPoints(r.Method)
	g.mu.Lock()
	now := time.Now()
	for len(g.log) > 0 && !g.log[0].at.After(now.Add(-g.window)) {
		g.spent -= g.log[0].points
		g.log = g.log[1:]
	}
	if g.resetsAt.IsZero() || !now.Before(g.resetsAt) {
		g.primary, g.resetsAt = 0, now.Add(time.Hour)
	}
	ok := g.spent+cost <= g.points
	if ok {
		g.log = append(g.log, githubSpend{now, cost})
		g.spent += cost
		g.primary++
	} else {
		g.second++
	}
	used, reset := g.primary, g.resetsAt
	g.mu.Unlock()
	h := w.Header()
	h.Set("x-ratelimit-limit", "5000")
	h.Set("x-ratelimit-remaining", strconv.Itoa(5000-used))
	h.Set("x-ratelimit-used", strconv.Itoa(used))
	h.Set("x-ratelimit-reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("x-ratelimit-resource", "core")
	h.Set("Content-Type", "application/json; charset=utf-8")
	if !ok {
		if g.retryAfter > 0 {
			h.Set("retry-after", strconv.Itoa(g.retryAfter))
			h.Set(askedWait, (time.Duration(g.retryAfter) * time.Second).String())
		}
		w.WriteHeader(g.status)
		fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"`+strconv.Itoa(g.status)+`"}`)
		return
	}
	fmt.Fprint(w, `{"ok":true}`)
}

// bareWindow is a fixed window aligned to the epoch that refuses with a
// bare 429: no Retry-After, no quota fields. Refusals do not count.
type bareWindow struct {
	limit  int
	window time.Duration

	mu    sync.Mutex
	start time.Time
	used  int
}

func (b *bareWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	now := time.Now()
	if start := now.Truncate(b.window); !start.Equal(b.start) {
		b.start, b.used = start, 0
	}
	ok := b.used < b.limit
	if ok {
		b.used++
	}
	b.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

// koaRedisLog mimics koa-ratelimit (v6) over its Redis driver,
// async-ratelimiter (v1.6), as read from their sources: a sliding log in a
// sorted set scored in milliseconds (a fraction of one included). Entries
// older than the duration go; with count left, remaining = max − count and,
// if it is above zero, the request is logged. The reset is the oldest entry
// (or now, when none) plus the duration, written as epoch seconds rounded
// DOWN. The middleware writes X-RateLimit-Limit, X-RateLimit-Remaining as
// remaining−1 (0 when none) and X-RateLimit-Reset on every answer, and on a
// refusal (remaining 0) Retry-After as (reset − now/1000) truncated towards
// zero: 0 or 1 for a window of a few seconds, never the exact wait.
// Refusals are not logged.
type koaRedisLog struct {
	max      int
	duration int64 // ms

	mu  sync.Mutex
	log []float64 // ms, oldest first
}

func (k *koaRedisLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	now := float64(time.Now().UnixMicro()) / 1000 // microtime.now(): ms with a fraction
	start := now - float64(k.duration)
	for len(k.log) > 0 && k.log[0] <= start {
		k.log = k.log[1:]
	}
	oldest := now
	if len(k.log) > 0 {
		oldest = k.log[0]
	}
	remaining := k.max - len(k.log)
	if remaining > 0 {
		k.log = append(k.log, now)
	}
	reset := int64(math.Floor((oldest + float64(k.duration)) / 1000))
	k.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(k.max))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(remaining-1, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	if remaining > 0 {
		fmt.Fprint(w, "ok")
		return
	}
	after := int64(float64(reset) - float64(time.Now().UnixMilli())/1000) // JavaScript's x|0
	h.Set("Retry-After", strconv.FormatInt(after, 10))
	// The wait the refusal asks for, as the test counts it: what
	// Retry-After says, whole seconds from now.
	h.Set(askedWait, (time.Duration(max(after, 0)) * time.Second).String())
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, "Rate limit exceeded, retry in %d ms.", reset*1000-time.Now().UnixMilli()) // JavaScript's | 0 truncates a float; this is whole already
}

// koaMemory mimics koa-ratelimit (v6) over its memory driver, as read from
// its source: a fixed window per client that starts at the first request
// after the last one expired (reset = that request's time + duration, in
// epoch seconds with microseconds), counting down from max; a request that
// finds remaining 0 is refused with Retry-After (reset − now) truncated
// towards zero — 0 for a window of a second. With disableHeader it writes
// nothing else; otherwise X-RateLimit-Remaining (remaining−1, 0 at
// none), X-RateLimit-Reset (the fractional epoch seconds) and
// X-RateLimit-Limit on every answer. Its clock is Date.now() when the
// driver loaded, in whole milliseconds, plus the monotonic time since:
// lag behind ours (up to a millisecond).
type koaMemory struct {
	max           int
	duration      time.Duration
	disableHeader bool
	lag           time.Duration

	mu        sync.Mutex
	reset     time.Time
	remaining int
}

func (k *koaMemory) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	now := time.Now().Add(-k.lag).Truncate(time.Microsecond)
	if k.reset.IsZero() || k.reset.Before(now) {
		k.reset, k.remaining = now.Add(k.duration), k.max
	} else {
		k.remaining = max(k.remaining-1, 0)
	}
	remaining, reset := k.remaining, k.reset
	k.mu.Unlock()
	h := w.Header()
	if !k.disableHeader {
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(remaining-1, 0)))
		h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(reset.UnixMicro())/1e6, 'f', -1, 64))
		h.Set("X-RateLimit-Limit", strconv.Itoa(k.max))
	}
	if remaining > 0 {
		fmt.Fprint(w, "ok")
		return
	}
	after := int64(reset.Sub(now) / time.Second) // (reset − now/1000)|0
	h.Set("Retry-After", strconv.FormatInt(after, 10))
	if after > 0 {
		h.Set(askedWait, (time.Duration(after) * time.Second).String())
	}
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, "Rate limit exceeded, retry in %d ms.", reset.Sub(now).Milliseconds())
}

// flaskLimiter mimics Flask-Limiter 3.3 over limits 2.8's memory storage
// (Debian bookworm's python3-flask-limiter), as read from their source and
// run against the real one (bench/realservers/flask_servers.py): every
// answer, a success too, carries X-RateLimit-Limit, -Remaining, -Reset
// (reset_at: int(reset + 1) in epoch seconds) and Retry-After (int(reset_at
// − now), truncated: "1" on a 200 in a window of a second), unless headers
// are disabled (a bare 429). Its strategies:
//
//   - fixed window: a count per client whose expiry is set by the first
//     hit after the last expired (hit time + window); every hit counts,
//     refused ones too; reset is the expiry truncated to the second, so
//     reset_at is the expiry rounded up.
//   - moving window: a log of admitted hits, newest first; a hit is
//     refused when the limit-th newest is within the window. Its reset is
//     the newest hit within the window, truncated to the second, plus the
//     window: when the log will be empty, not when one more fits.
//   - elastic: the fixed window, but every hit, refused or not, sets the
//     expiry a window from it.
type flaskLimiter struct {
	limit    int
	window   time.Duration // whole seconds
	moving   bool
	elastic  bool
	httpDate bool // Retry-After as an HTTP date
	noHeader bool

	mu     sync.Mutex
	count  int
	expiry time.Time
	log    []time.Time // admitted hits of the moving window, newest first
}

func (f *flaskLimiter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	now := time.Now()
	var ok bool
	var reset time.Time // limits' window_stats reset
	remaining := 0
	if f.moving {
		ok = len(f.log) < f.limit || f.log[f.limit-1].Before(now.Add(-f.window))
		if ok {
			f.log = append([]time.Time{now}, f.log[:min(len(f.log), f.limit)]...)
		}
		reset = now.Truncate(time.Second).Add(f.window)
		acquired := 0
		for _, at := range f.log {
			if !at.Before(now.Add(-f.window)) {
				if acquired == 0 {
					reset = at.Truncate(time.Second).Add(f.window)
				}
				acquired++
			}
		}
		remaining = f.limit - acquired
	} else {
		if !f.expiry.After(now) {
			f.count, f.expiry = 0, time.Time{}
		}
		f.count++
		if f.elastic || f.count == 1 {
			f.expiry = now.Add(f.window)
		}
		ok = f.count <= f.limit
		remaining = max(0, f.limit-f.count)
		reset = f.expiry.Truncate(time.Second)
	}
	f.mu.Unlock()
	resetAt := reset.Add(time.Second).Truncate(time.Second) // int(reset + 1)
	after := int64(resetAt.Sub(now) / time.Second)          // int(reset_at − now)
	if !f.noHeader {
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(f.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(resetAt.Unix(), 10))
		if f.httpDate {
			h.Set("Retry-After", resetAt.UTC().Format(http.TimeFormat))
		} else {
			h.Set("Retry-After", strconv.FormatInt(after, 10))
		}
		if !ok {
			// The wait a refusal asks for is until the latest of what it
			// says (headers.Info.Delay): its X-RateLimit-Reset, a second
			// beyond its truncated Retry-After.
			if wait := resetAt.Sub(now); wait > 0 {
				h.Set(askedWait, wait.String())
			}
		}
	}
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

// traefikBucket is Traefik's rateLimit middleware, as its source
// (pkg/middlewares/ratelimiter) behaves: a token bucket of x/time/rate
// (rate n a window, burst tokens, full at first) that reserves a token
// for every request; a request whose token is at most maxDelay away
// (half a token's interval: 1/(2·⌊rate⌋), 0.5 s under one a second) is
// held that long and let through, one further is refused, its
// reservation cancelled (the token given back), with "Retry-After" (the
// wait rounded up to whole seconds) and "X-Retry-In" (the wait exactly,
// as a Go duration). Answers that get through say nothing. The wire reads
// the wait asked for from X-Retry-In, as headers.Parse does.
type traefikBucket struct {
	rate  float64 // tokens a second
	burst int

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTraefikBucket(q simQuota, burst int) *traefikBucket {
	return &traefikBucket{rate: float64(q.n) / q.window.Seconds(), burst: burst, tokens: float64(burst)}
}

// maxDelay is how long Traefik holds a request for its token.
func (b *traefikBucket) maxDelay() time.Duration {
	if b.rate < 1 {
		return 500 * time.Millisecond
	}
	return time.Second / (2 * time.Duration(b.rate))
}

// reserve takes a token at now and says how long until it is there, or
// gives it back and says false when that is longer than maxDelay.
func (b *traefikBucket) reserve(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(float64(b.burst), b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	b.tokens--
	var wait time.Duration
	if b.tokens < 0 {
		wait = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	if wait > b.maxDelay() {
		b.tokens++
		return wait, false
	}
	return wait, true
}

func (b *traefikBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wait, ok := b.reserve(time.Now())
	if !ok {
		w.Header().Set("Retry-After", strconv.FormatFloat(math.Ceil(wait.Seconds()), 'f', 0, 64))
		w.Header().Set("X-Retry-In", wait.String())
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(wait)
	fmt.Fprint(w, "ok")
}

// nestThrottler mimics @nestjs/throttler 6.7 (ThrottlerGuard over its
// ThrottlerStorageService), as read from its source and run against the
// real one (bench/realservers/servers.js), with one throttler or several
// (each a nestThrottle of its own). The guard asks each in the order of
// their ttl; the first that blocks the request refuses it, with its own
// Retry-After (suffixed with its name) beside the fields of those before
// it, and those after it do not count it. With noHeaders, no field is
// written.
//
// Node.js runs one request at a time: each takes the server nestServe,
// in turn, before its hits are counted (the real one, on loopback, took a
// first wave of ten over 14-21 ms), so a wave's hits are counted well
// after it reached the server, and leave the logs as late.
type nestThrottler struct {
	throttlers []nestThrottle // by ttl
	noHeaders  bool

	mu   sync.Mutex
	busy time.Time // when the event loop is free
}

// nestThrottle is one throttler's record of the client. Its count is a
// log: each hit leaves ttl after it came. Beside it, a window that starts
// at the first request after the last one expired, whose end
// X-RateLimit-Reset gives in whole seconds left, rounded up (Math.ceil) —
// an end the log does not keep. The hit that takes the log over the
// limit is logged and blocks the client for blockDuration (the ttl):
// every request until then is refused with Retry-After (the block's
// seconds left, rounded up) and not logged, and the first after it
// empties the log and is logged alone. Remaining is limit − the log's
// hits, this one's included, at least 0. A throttler named other than
// "default" suffixes every field with "-" and its name (Retry-After-short).
type nestThrottle struct {
	limit int
	ttl   int64 // ms, as blockDuration
	name  string

	started      bool
	hits         []int64 // when each logged hit leaves, ms
	expiresAt    int64   // the window X-RateLimit-Reset tells of, ms
	blocked      bool
	blockExpires int64
}

// nestServe is how long a request takes a NestJS server before its hit
// is counted.
const nestServe = time.Millisecond

// increment is the storage's increment for a request at now (ms): the
// hits in the log, this one's included, the window's seconds left, and
// whether the client is blocked, for how many seconds more.
func (n *nestThrottle) increment(now int64) (total int, toExpire int64, blocked bool, toBlockExpire int64) {
	if !n.started {
		n.started, n.expiresAt = true, now+n.ttl
	}
	n.hits = slices.DeleteFunc(n.hits, func(exp int64) bool { return exp <= now })
	toExpire = simCeilDiv(n.expiresAt-now, 1000)
	if toExpire <= 0 {
		n.expiresAt = now + n.ttl
		toExpire = simCeilDiv(n.ttl, 1000)
	}
	if !n.blocked {
		n.hits = append(n.hits, now+n.ttl)
	}
	if len(n.hits) > n.limit && !n.blocked {
		n.blocked, n.blockExpires = true, now+n.ttl
	}
	toBlockExpire = simCeilDiv(n.blockExpires-now, 1000)
	if toBlockExpire <= 0 && n.blocked {
		n.blocked = false
		n.hits = append(n.hits[:0], now+n.ttl)
	}
	return len(n.hits), toExpire, n.blocked, toBlockExpire
}

// suffix is what the throttler's fields end with.
func (n *nestThrottle) suffix() string {
	if n.name == "" || n.name == "default" {
		return ""
	}
	return "-" + n.name
}

func (n *nestThrottler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n.mu.Lock()
	n.busy = maxTime(n.busy, time.Now()).Add(nestServe)
	turn := n.busy
	n.mu.Unlock()
	time.Sleep(time.Until(turn))
	n.mu.Lock()
	defer n.mu.Unlock()
	now := simNowMs()
	h := w.Header()
	for i := range n.throttlers {
		t := &n.throttlers[i]
		total, toExpire, blocked, toBlockExpire := t.increment(now)
		if blocked {
			if !n.noHeaders {
				h.Set("Retry-After"+t.suffix(), strconv.FormatInt(toBlockExpire, 10))
				h.Set(askedWait, (time.Duration(toBlockExpire) * time.Second).String())
			}
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"statusCode":429,"message":"ThrottlerException: Too Many Requests"}`)
			return
		}
		if !n.noHeaders {
			h.Set("X-RateLimit-Limit"+t.suffix(), strconv.Itoa(t.limit))
			h.Set("X-RateLimit-Remaining"+t.suffix(), strconv.Itoa(max(0, t.limit-total)))
			h.Set("X-RateLimit-Reset"+t.suffix(), strconv.FormatInt(toExpire, 10))
		}
	}
	fmt.Fprint(w, "ok")
}

// flexibleMemory mimics rate-limiter-flexible 11's RateLimiterMemory
// behind the Express middleware its wiki gives, as read from its source
// and run against the real one (bench/realservers/servers.js): a count per
// key that starts at the first request after the last one expired and
// lasts duration; every request adds to it, refused ones too, and one
// that takes it over the limit is refused. Bare, or with the fields its
// README suggests on every answer: Retry-After as msBeforeNext / 1000 (a
// fraction: "0.734", on successes too), X-RateLimit-Limit, -Remaining,
// and X-RateLimit-Reset as ⌈(now + msBeforeNext) / 1000⌉ epoch seconds.
type flexibleMemory struct {
	points   int
	duration int64 // ms, whole seconds
	headers  bool

	mu        sync.Mutex
	value     int
	expiresAt int64
}

func (f *flexibleMemory) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	now := simNowMs()
	if f.expiresAt-now > 0 {
		f.value++
	} else {
		f.value, f.expiresAt = 1, now+f.duration
	}
	consumed, msBeforeNext := f.value, f.expiresAt-now
	f.mu.Unlock()
	if f.headers {
		h := w.Header()
		h.Set("Retry-After", strconv.FormatFloat(float64(msBeforeNext)/1000, 'f', -1, 64))
		h.Set("X-RateLimit-Limit", strconv.Itoa(f.points))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(f.points-consumed, 0)))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(simCeilDiv(now+msBeforeNext, 1000), 10))
		if consumed > f.points {
			h.Set(askedWait, (time.Duration(msBeforeNext) * time.Millisecond).String())
		}
	}
	if consumed > f.points {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "Too Many Requests")
		return
	}
	fmt.Fprint(w, "ok")
}
