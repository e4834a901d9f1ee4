package throttle

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// gate is one partition's memory of what the server said: a pause until a
// reset, the quota left (less the requests already on the wire), the pacing
// that spreads a low quota evenly until its reset, and the one-request probe
// that follows every pause. Requests pass the gate in FIFO order before they
// take a permit from the partition's limiter.
type gate struct {
	key      string
	maxPause time.Duration // the longest one answer may pause the partition
	emit     func(Event)   // the Transport's observer, or nil

	mu     sync.Mutex
	head   *gwaiter
	tail   *gwaiter
	queued int // waiters in the list
	timer  *time.Timer
	closed bool

	pausedUntil time.Time // no request starts before this
	paused      bool      // a pause is in force (for the Resumed event)
	probe       bool      // the next request probes alone
	probing     bool      // the probe is on the wire: hold the rest
	quota       bool      // avail, reset are known
	rmin        int64     // the least the server said remains before reset
	ver         int64     // answers applied so far
	rminVer     int64     // ver when rmin was last set
	pauses      int64     // pauses begun so far
	limit       int64
	reset       time.Time
	guessed     bool          // reset is our guess (the server's had passed): no pacing
	nextSend    time.Time     // pacing: the next request waits until then
	inflight    int           // admitted, not yet answered
	backoff     time.Duration // for 429s that say nothing about when
	learned     time.Duration // pacing learned from 429s that came without quota headers
	resumedAt   time.Time     // when the last pause ended
	okSince     int           // successful responses since resumedAt
	wsReset     time.Time     // the whole-second reset the current pause waits for
	phase       time.Duration // how long after its whole-second resets this server's really come
	steps       int           // probes refused since wsReset passed
}

type gwaiter struct {
	ready      chan struct{}
	err        error
	tk         ticket
	prev, next *gwaiter
}

// ticket is what enter and wait hand a request: whether it is the probe, and its
// place in the order of admissions.
type ticket struct {
	probe bool
	ver   int64     // g.ver when the request was let through
	pause int64     // g.pauses when the request was let through
	at    time.Time // when a probe was let through (zero for others)
}

const (
	minBackoff = time.Second
	// notYet is how long to wait when a quota is used up and its reset has
	// already passed: servers write resets in whole seconds, rounded down,
	// so "0" means "within the second", and a reset that has passed while
	// nothing remains means "not yet", not "no information".
	notYet = time.Second
)

// check reports whether a request may go now; if not, wake is when to look
// again (zero: when a response arrives). g.mu must be held.
func (g *gate) check(now time.Time) (ok bool, wake time.Time, resumed bool) {
	if now.Before(g.pausedUntil) {
		return false, g.pausedUntil, false
	}
	if g.paused {
		g.paused = false
		g.resumedAt, g.okSince = now, 0
		resumed = true
	}
	if g.probing {
		return false, time.Time{}, resumed
	}
	if g.quota && !now.Before(g.reset) {
		// The quota's window has ended: what we knew is stale.
		g.quota, g.probe = false, true
	}
	if g.quota && g.avail() <= 0 {
		// Our own estimate, not the server's word: an answer that shows
		// fewer requests in flight than we feared lets waiters go.
		return false, g.reset, resumed
	}
	if now.Before(g.nextSend) {
		return false, g.nextSend, resumed
	}
	return true, time.Time{}, resumed
}

// quiet reports whether the gate has nothing that could hold a request
// back or pace it. g.mu must be held.
func (g *gate) quiet() bool {
	return !g.paused && !g.probe && !g.probing && !g.quota && g.learned == 0 &&
		g.pausedUntil.IsZero() && g.nextSend.IsZero()
}

// low reports whether a quota is low enough to pace: a tenth of the limit
// or less (when the limit is unknown, ten requests or fewer).
func low(avail, limit int64) bool {
	if limit > 0 {
		return avail*10 <= limit
	}
	return avail <= 10
}

// sent records that a request passed the gate. now may be zero when the
// gate is quiet: nothing it does then needs the time but the start of the
// first cycle. g.mu must be held.
func (g *gate) sent(now time.Time) ticket {
	g.inflight++
	if g.resumedAt.IsZero() {
		if now.IsZero() {
			now = time.Now()
		}
		g.resumedAt = now // the first cycle starts with the first request
	}
	tk := ticket{probe: g.probe, ver: g.ver, pause: g.pauses}
	if g.probe {
		tk.at = now
		g.probe, g.probing = false, true
	}
	if g.quota {
		if a := g.avail(); a > 0 && !g.guessed && low(a, g.limit) {
			g.nextSend = now.Add(g.reset.Sub(now) / time.Duration(a+1))
		}
	} else if g.learned > 0 {
		g.nextSend = now.Add(g.learned)
	}
	return tk
}

func (g *gate) pauseUntil(until time.Time) {
	if until.After(g.pausedUntil) {
		g.pausedUntil = until
	}
	if !g.paused {
		g.pauses++
	}
	g.paused, g.probe, g.quota = true, true, false
}

// enter lets the request through the gate now, or queues it: then w is
// its place in the queue, to wait on with wait. deadline (if non-zero) is
// the latest the request may wait until: if the gate can tell its turn
// would come later, enter refuses it at once with a *limiters.RejectedError
// whose RetryAfter says when its turn would come.
func (g *gate) enter(deadline time.Time) (tk ticket, w *gwaiter, err error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ticket{}, nil, limiters.ErrClosed
	}
	if g.head == nil && g.quiet() {
		// Nothing learned yet that could hold this request back: no need
		// to read the clock.
		tk = g.sent(time.Time{})
		g.mu.Unlock()
		return tk, nil, nil
	}
	now := time.Now()
	var resumed bool
	if g.head == nil {
		var ok bool
		if ok, _, resumed = g.check(now); ok {
			tk = g.sent(now)
			g.mu.Unlock()
			g.report(resumed)
			return tk, nil, nil
		}
	}
	if due := g.due(now); !deadline.IsZero() && !due.IsZero() && due.After(deadline) {
		g.mu.Unlock()
		g.report(resumed)
		return ticket{}, nil, &limiters.RejectedError{
			Limiter:    "server feedback",
			RetryAfter: due.Sub(now),
			Reason:     "the server paused or paced the partition",
		}
	}
	w = &gwaiter{ready: make(chan struct{})}
	g.push(w)
	if g.head == w {
		resumed = g.dispatch(now) || resumed
	}
	g.mu.Unlock()
	g.report(resumed)
	return ticket{}, w, nil
}

// wait waits for the gate to let w through, in FIFO order, or for ctx to
// end. A waiter whose ctx ends takes nothing with it: if it was let through
// at that very moment, the admission is undone and the next waiter may go
// (the race of go.dev/issue/63615).
func (g *gate) wait(ctx context.Context, w *gwaiter) (ticket, error) {
	select {
	case <-w.ready:
		if ctx.Err() == nil || w.err != nil {
			return w.tk, w.err
		}
		// Let through, but ctx ended as well: undo the admission below.
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-w.ready:
		if w.err == nil {
			// Let through as we gave up: undo it.
			g.abortLocked(w.tk)
		}
	default:
		g.remove(w)
	}
	resumed := g.head != nil && g.dispatch(time.Now())
	g.mu.Unlock()
	g.report(resumed)
	return ticket{}, ctx.Err()
}

// report tells the observer that a pause ended, if one did.
func (g *gate) report(resumed bool) {
	if resumed && g.emit != nil {
		g.emit(Event{Kind: EventResumed, Key: g.key})
	}
}

// due estimates when a request queued now would be let through: the gate's
// own wake time plus one pacing interval per waiter ahead. Zero means
// unknown (it waits for a response). g.mu must be held.
func (g *gate) due(now time.Time) time.Time {
	if g.probing {
		return time.Time{}
	}
	at := now
	if now.Before(g.pausedUntil) {
		at = g.pausedUntil
	}
	if at.Before(g.nextSend) {
		at = g.nextSend
	}
	if g.quota && g.avail() <= 0 && at.Before(g.reset) {
		at = g.reset
	}
	if ahead := g.queued; ahead > 0 {
		if g.probe || (g.quota && g.avail() <= 0) || g.pausedUntil.After(now) {
			// Behind a probe: its answer decides; we cannot tell.
			return time.Time{}
		}
		step := g.learned
		if a := g.avail(); g.quota && a > 0 && !g.guessed && low(a, g.limit) {
			step = g.reset.Sub(now) / time.Duration(a+1)
		}
		at = at.Add(time.Duration(ahead) * step)
	}
	return at
}

func (g *gate) push(w *gwaiter) {
	w.prev = g.tail
	if g.tail != nil {
		g.tail.next = w
	} else {
		g.head = w
	}
	g.tail = w
	g.queued++
}

func (g *gate) remove(w *gwaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		g.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		g.tail = w.prev
	}
	w.prev, w.next = nil, nil
	g.queued--
}

// dispatch lets waiters through from the head while the gate allows and arms
// the timer for the next look. It reports whether a pause ended. g.mu must
// be held.
func (g *gate) dispatch(now time.Time) (resumed bool) {
	for g.head != nil && !g.closed {
		ok, wake, r := g.check(now)
		resumed = resumed || r
		if !ok {
			if !wake.IsZero() {
				g.arm(wake.Sub(now))
			}
			return resumed
		}
		w := g.head
		g.remove(w)
		w.tk = g.sent(now)
		close(w.ready)
	}
	return resumed
}

func (g *gate) arm(d time.Duration) {
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.wake)
		return
	}
	g.timer.Reset(d)
}

func (g *gate) wake() {
	g.mu.Lock()
	resumed := g.dispatch(time.Now())
	g.mu.Unlock()
	g.report(resumed)
}

// abort undoes an admission whose request was never sent.
func (g *gate) abort(tk ticket) {
	g.mu.Lock()
	g.abortLocked(tk)
	resumed := g.dispatch(time.Now())
	g.mu.Unlock()
	g.report(resumed)
}

func (g *gate) abortLocked(tk ticket) {
	g.inflight--
	if tk.probe {
		g.probing, g.probe = false, true
	}
}

// done learns from a response (or a transport error) to a request the gate
// let through.
func (g *gate) done(tk ticket, resp *http.Response, now time.Time) {
	var info headers.Info
	var far beyond
	status := 0
	if resp != nil {
		status = resp.StatusCode
		info = headers.Parse(resp.Header, now)
		if saysStop(status, info) {
			far = farHints(resp.Header, now)
		}
	}
	g.mu.Lock()
	g.inflight--
	if tk.probe {
		g.probing = false
	}
	var paused time.Time
	if resp != nil {
		paused = g.learn(tk, status, info, far, now)
	}
	resumed := g.dispatch(now)
	g.mu.Unlock()
	if !paused.IsZero() && g.emit != nil {
		g.emit(Event{Kind: EventPaused, Key: g.key, Until: paused, Status: status})
	}
	g.report(resumed)
}

// learn applies what a response (status, parsed as info, with far its
// hints beyond headers.Parse's horizon) says. It returns the end of a pause
// it started, or zero. g.mu must be held.
//
// A hint beyond the horizon still says "stop": a refusal that carries one,
// or a quota at zero whose reset is one, pauses the partition for maxPause.
func (g *gate) learn(tk ticket, status int, info headers.Info, far beyond, now time.Time) time.Time {
	limited := status == http.StatusTooManyRequests ||
		(status == http.StatusServiceUnavailable && (info.HasRetryAfter || far.retry))
	if limited {
		d := g.delay(info, now)
		if far.any() {
			d = g.maxPause
		}
		if tk.pause < g.pauses {
			// Sent before the pause this answer's siblings began: it
			// tells us nothing new, and must not compound the backoff.
			if d > 0 {
				g.pauseUntil(now.Add(min(d, g.maxPause)))
			}
			return time.Time{}
		}
		if d <= 0 {
			// A 429 that says nothing about when: back off exponentially.
			g.backoff = min(max(2*g.backoff, minBackoff), g.maxPause)
			d = g.backoff
		}
		until := now.Add(min(d, g.maxPause))
		if !far.any() && !g.quota && g.okSince > 0 && !g.resumedAt.IsZero() {
			// No quota headers: learn a pace from how many requests the
			// server took between the last pause and this one.
			if step := until.Sub(g.resumedAt) / time.Duration(g.okSince); step > g.learned {
				g.learned = step
			}
		}
		g.pauseUntil(until)
		return g.pausedUntil
	}
	q, ok := tightest(info)
	if status < 400 {
		g.backoff = 0
		g.okSince++
		if tk.probe && !g.wsReset.IsZero() {
			if ok && q.Reset.After(g.wsReset) {
				// The first request through after a whole-second reset,
				// and it opened a new window: the server's reset had come
				// by the time it was sent. Next time, send one round trip
				// later than that: latency varies, and a window that
				// starts when a request arrives ends later by as much as
				// that request's way there took.
				g.phase = min(max(tk.at.Sub(g.wsReset)+now.Sub(tk.at), 0), time.Second-time.Millisecond)
			}
			g.wsReset, g.steps = time.Time{}, 0
		}
	}
	if !ok {
		return time.Time{}
	}
	reset := g.resetFor(q, now)
	if q.Remaining == 0 {
		if reset.IsZero() {
			if !far.reset {
				return time.Time{}
			}
			reset = now.Add(g.maxPause)
		}
		g.pauseUntil(minTime(reset, now.Add(g.maxPause)))
		return g.pausedUntil
	}
	if reset.IsZero() {
		g.quota = false
		return time.Time{}
	}
	guessed := false
	if !reset.After(now) {
		// Some remain, but the reset is stale or rounded down to nothing:
		// trust the count for a moment, then probe again.
		reset, guessed = now.Add(notYet), true
	}
	// Within a window the server's count only grows, so an answer to a
	// request sent before the answer we last learned from may be stale: keep
	// the least remaining. An answer to a request sent after it is fresher
	// (a window may have ended, a bucket refilled): believe it. Every
	// request still on the wire may be missing from the count, so avail
	// subtracts them; one that was counted comes back and gives its slot
	// back.
	reset = minTime(reset, now.Add(g.maxPause))
	fresh := !g.quota || tk.ver >= g.rminVer || !reset.Before(g.reset.Add(time.Second))
	if fresh || q.Remaining < g.rmin {
		g.rmin = q.Remaining
	}
	if fresh || reset.After(g.reset) {
		g.reset, g.guessed = reset, guessed
	}
	g.ver++
	g.rminVer = g.ver
	g.learned = 0
	g.quota = true
	g.limit = q.Limit
	return time.Time{}
}

// avail is how many more requests the quota allows now. g.mu must be held.
func (g *gate) avail() int64 { return g.rmin - int64(g.inflight) }

// delay is Info.Delay with the sloppy-server rules of resetFor.
func (g *gate) delay(info headers.Info, now time.Time) time.Duration {
	var d time.Duration
	if info.HasRetryAfter {
		d = info.RetryAfter
	}
	for _, q := range info.Quotas {
		if q.Remaining == 0 {
			if r := g.resetFor(q, now); !r.IsZero() {
				d = max(d, r.Sub(now))
			}
		}
	}
	return d
}

// tightest is the quota with the fewest requests remaining.
func tightest(info headers.Info) (headers.Quota, bool) {
	var best headers.Quota
	found := false
	for _, q := range info.Quotas {
		if q.Remaining < 0 {
			continue
		}
		if !found || q.Remaining < best.Remaining ||
			(q.Remaining == best.Remaining && q.Reset.After(best.Reset)) {
			best, found = q, true
		}
	}
	return best, found
}

// firstStep is the first wait before probing again after a whole-second
// reset has passed while nothing remains; each refusal doubles it.
const firstStep = 50 * time.Millisecond

// resetFor is when a quota's reset really comes, allowing for sloppy
// servers. Servers write resets in whole seconds, rounded down, so a whole
// second R means a moment in [R, R+1s): before R the gate waits until R
// plus the phase it has learned for this server (how far past the whole
// second its resets fall: 0 for windows on the clock, up to a second for
// windows that start at a client's first request); once R has passed while
// nothing remains, it probes again after 50 ms, 100 ms, 200 ms, … up to
// R+1s, and the probe that gets through teaches it the phase. Any other
// reset that has passed while nothing remains means "not yet", not "no
// information". g.mu must be held (Backoff uses a zero gate of its own).
func (g *gate) resetFor(q headers.Quota, now time.Time) time.Time {
	r := q.Reset
	if r.IsZero() {
		return r
	}
	if r.Nanosecond() == 0 {
		end := r.Add(time.Second)
		switch {
		case r.After(now):
			if q.Remaining == 0 {
				g.wsReset = r
			}
			return r.Add(g.phase)
		case end.After(now) && q.Remaining == 0:
			if !r.Equal(g.wsReset) {
				g.wsReset, g.steps = r, 0
				if t := r.Add(g.phase); g.phase > 0 && t.After(now) {
					return t // the phase we learnt says when
				}
			}
			step := firstStep << min(g.steps, 6)
			g.steps++
			return minTime(now.Add(step), end)
		}
	} else if r.After(now) {
		return r
	}
	if q.Remaining == 0 {
		return now.Add(notYet)
	}
	return r
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// neutral reports whether the gate holds nothing worth remembering.
// g.mu must be held.
func (g *gate) neutral(now time.Time) bool {
	return g.head == nil && g.inflight == 0 && (!g.quota || !now.Before(g.reset)) && !g.probing &&
		!g.pausedUntil.After(now) && g.learned == 0 && g.phase == 0
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	for w := g.head; w != nil; {
		next := w.next
		g.remove(w)
		w.err = limiters.ErrClosed
		close(w.ready)
		w = next
	}
	if g.timer != nil {
		g.timer.Stop()
	}
}
