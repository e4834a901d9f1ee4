package throttle

import (
	"time"

	"github.com/throttlekit/throttle/headers"
)

// wholeSecond learns when a server's resets written in whole seconds
// really come. A whole second R means a moment in [R, R+1s) if the server
// rounds down (most write epoch seconds so); where in that second its
// windows end is the phase: 0 for windows on the clock, anything for
// windows that start at a client's first request. Once a reset R has
// passed while nothing remains, the gate probes again after 50 ms, 100 ms,
// 200 ms, … up to R+1s, and the probe that gets through teaches the phase
// (learn). Its zero value knows nothing. (A window that starts at a
// client's first request is learnt better from the request that opened
// it: span, in quota.go.)
type wholeSecond struct {
	reset int64  // the whole-second reset the current pause waits for, in Unix seconds; 0: none
	phase phase  // how long after its whole-second resets this server's really come
	steps int16  // probes refused since reset passed, up to maxSteps
	lag   uint16 // how far the server's clock lags ours, in lagUnits, as its resets finer than the second show (lagged)
}

// maxSteps is where wholeSecond.steps stops counting: the wait doubles
// six times at most.
const maxSteps = 6

// lagUnit is the unit of wholeSecond.lag: up to 6.5 s.
const lagUnit = 100 * time.Microsecond

// lagging is how far the server's clock lags ours (lagged).
func (w *wholeSecond) lagging() time.Duration { return time.Duration(w.lag) * lagUnit }

// phase is a wholeSecond's phase: a duration under a second, in
// nanoseconds, held in four bytes (every partition keeps one).
type phase int32

func (p phase) d() time.Duration { return time.Duration(p) }

// resetTime is w.reset as a time.
func (w *wholeSecond) resetTime() time.Time { return time.Unix(w.reset, 0) }

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
// R+1s, and the probe that gets through teaches it the phase. A reset
// finer than the second is allowed resetSlack for its rounding, and the
// lag of the server's clock behind ours its refusals showed (lagged); one
// that has passed while nothing remains is waited for as long again. Any
// other reset that has passed while nothing remains means "not yet", not
// "no information". (Backoff, which keeps no state, uses a zero
// wholeSecond.)
func (w *wholeSecond) resetFor(q *headers.Quota, now time.Time) time.Time {
	r := q.Reset
	if r.IsZero() {
		return r
	}
	if r.Nanosecond() == 0 {
		switch {
		case r.After(now):
			if q.Remaining == 0 {
				w.reset = r.Unix()
			}
			if w.phase == 0 {
				return r
			}
			return r.Add(w.phase.d())
		case q.Remaining == 0 && r.Add(time.Second).After(now):
			end := r.Add(time.Second)
			if r.Unix() != w.reset {
				w.reset, w.steps = r.Unix(), 0
				if t := r.Add(w.phase.d()); w.phase > 0 && t.After(now) {
					return t // the phase we learnt says when
				}
			}
			step := firstStep << w.steps
			w.steps = min(w.steps+1, maxSteps)
			return minTime(now.Add(step), end)
		}
	} else if !wholeSeconds(r, now) {
		if end := r.Add(w.lagging() + resetSlack); end.After(now) {
			return end
		}
		if q.Remaining == 0 {
			// Told finer than the second, passed by our clock and
			// still at zero: the answer was on its way when the window
			// turned, or the server's clock lags ours (lagged) — by
			// milliseconds, not the second notYet allows a reset
			// rounded down.
			return now.Add(w.lagging() + resetSlack)
		}
		return r
	} else if r.After(now) {
		return r.Add(resetSlack)
	}
	if q.Remaining == 0 {
		return now.Add(notYet)
	}
	return r
}

// lagged learns, from a refusal of a request sent at sent, how far the
// server's clock lags ours: a quota at zero whose reset, written finer
// than the second, had passed by our clock when the request went, was
// still running by the server's when it came. Its resets are waited for
// that much longer from then on, and twice as long after each such
// refusal, up to notYet. (koa-ratelimit's memory driver reads its clock
// as Date.now() when it loaded, in whole milliseconds, plus the
// monotonic time since: up to a millisecond behind. On a loaded machine
// every window's first request, sent at its reset, was refused, and the
// second of notYet waited after it: 2.01x.)
func (w *wholeSecond) lagged(info headers.Info, sent, now time.Time) {
	if sent.IsZero() {
		return
	}
	for i := range info.Quotas {
		q := &info.Quotas[i]
		if q.Remaining != 0 || q.Reset.IsZero() || q.Reset.After(sent) || wholeSeconds(q.Reset, now) {
			continue
		}
		lag := min(max(2*w.lagging(), sent.Sub(q.Reset)+resetSlack), notYet)
		w.lag = uint16((lag + lagUnit - 1) / lagUnit)
	}
}

// wholeSeconds reports whether a reset read at now was written in whole
// seconds: as epoch seconds, or as seconds from now (headers.Parse adds
// those to now). Such a reset is rounded, up or down, by up to a second.
func wholeSeconds(reset, now time.Time) bool {
	return reset.Nanosecond() == 0 || reset.Sub(now)%time.Second == 0
}

// resetSlack is added to a reset written finer than the second: fields
// written to the millisecond (Reset-After: 0.25, epoch milliseconds) are
// rounded, so the window may end up to that much after what they say, and
// a request sent at the reset over a fast link would reach the server
// while the old window is still full.
const resetSlack = time.Millisecond

// delay is Info.Delay with the sloppy-server rules of resetFor, and one
// bound tightened by another: a quota at zero whose reset is written in
// whole seconds (rounded up: the wait is within the second before it)
// waits only as long as a Retry-After written finer than the second
// (retry-after-ms, or fractional seconds) says, when that lies within
// the same second — the two say the same, one more precisely.
func (w *wholeSecond) delay(info headers.Info, now time.Time) time.Duration {
	var d time.Duration
	ra := time.Duration(-1)
	if info.HasRetryAfter {
		ra = info.RetryAfter
	}
	fine := ra > 0 && ra%time.Second != 0
	for i := range info.Quotas {
		if q := &info.Quotas[i]; q.Remaining == 0 {
			if r := w.resetFor(q, now); !r.IsZero() {
				dq := r.Sub(now)
				if fine && wholeSeconds(q.Reset, now) && ra <= dq && ra > dq-time.Second-resetSlack {
					dq = ra
				}
				d = max(d, dq)
			}
		}
	}
	return max(d, ra)
}

// learn learns, from the answer a to the probe sent after a
// whole-second reset (w.reset), when this server's whole-second resets
// really come (resetFor).
func (w *wholeSecond) learn(a *answer, now time.Time) {
	reset := w.resetTime()
	if q, ok := tightest(a.info); ok && q.Reset.After(reset) {
		// The first request through after a whole-second reset, and it
		// opened a new window: the server's reset had come by the time
		// it was sent. Next time, send one round trip later than that:
		// latency varies, and a window that starts when a request
		// arrives ends later by as much as that request's way there
		// took.
		switch d := max(now.Sub(reset), 0); {
		case d < time.Second:
			w.phase = phase(d)
		case !q.Reset.Before(reset.Add(2 * time.Second)):
			// Sent a second or more after the reset, and its window
			// ends two whole seconds or more after it: a window that
			// started at this request (one that was already running
			// would end within a second of it). Its end falls where
			// the request fell in its second.
			w.phase = phase(d % time.Second)
		default:
			// Sent a second or more after the reset (a Retry-After
			// held it), into a window already running: it says nothing
			// of where in their second this server's windows end.
		}
	}
	w.reset, w.steps = 0, 0
}

// tightest is the quota with the fewest units remaining.
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
