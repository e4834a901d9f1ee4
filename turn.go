package throttle

import "time"

// turn bounds the window of a server that says nothing but its refusals
// (a bare 429, "Retry-After: 0"), a fixed window that lets a quota
// through and refuses the rest until it turns, from what the partition's
// own requests met. Each window opens with the first success after
// refusals (open: when that request left; the first with the gate's
// first request). A request sent at p and refused says the window is
// longer than p−open (lo, the most any window showed); the success that
// opens the next window, sent at s, that it is no longer than s−open
// (hi, the least). The pause after a refusal in a window then ends no
// sooner than open+lo, where every probe is refused (the backoff had
// probed a fifth of a second, half a second, a second... after the
// burst's refusal: five refusals a window of 5 s), halfway to open+hi
// while the two are far apart (each refused probe raises lo, each
// window's opening lowers hi), and at open+hi once they are within a
// sixteenth of it: the window has turned, and no probe is refused.
// Before hi is known, probes go an eighth of lo beyond lo. Windows
// shorter than aimdHold are left to the pace and the first burst's
// hold, which were made for them.
//
// That holds for a window that starts with the client's first request
// (Flask-Limiter's, koa-ratelimit's memory store). One that keeps the
// clock's time turns sooner after a late opening, and a refusal past hi
// or an opening short of lo shows it: the first time, the bounds start
// over (a loaded server's late answer shows the same), the second
// (clock), they say nothing from then on, and the backoff probes as
// before. A refusal after a run turnRun times as long as any window's
// before it is a pace found too fast (a bucket's, a rate's), not a
// window's end: the bounds start over. A refusal more than twice hi
// after the window opened (the partition idle, or other clients spending
// its windows) is a later window's, whose opening was not seen: until
// the next opening the bounds say nothing (lost), and that opening
// bounds nothing. The pause a bound sets is capped by maxPause like any
// other (learn). A server that asks for a wait in whole seconds may
// write a constant whatever its window ("Retry-After: 1" over a log of
// 5 s): once a probe after such a wait is refused (probed, in this window
// or the last), learn lets the bounds lengthen that pause too, never
// shorten it. Once they are proven and close, a window that has let its
// quota through holds the next request for its end (spent), and the
// request let through there opens the next; once one has been so held
// (bursts), the gate keeps a send log and holds each request a window
// (span) after the one as many places back as the quota (turnFree). A
// server that blocks a client from its refusal makes windows a block
// long after the refusal, not after the opening (block). Its zero value
// bounds nothing.
type turn struct {
	open    time.Time     // when the request that opened the current window left; zero: none
	ok      int           // successes since open
	refused bool          // a request sent since open was refused
	last    time.Time     // when the last refused request left
	quota   int           // the most successes a window let through before its first refusal
	lo, hi  time.Duration // the window is longer than lo and no longer than hi; 0: unknown
	doubted bool          // the bounds contradicted each other once, and started over
	clock   bool          // they did again: not a window that starts with ours
	turned  int           // windows opened after refusals
	lost    bool          // the current window's opening was not seen: open is a refusal's
	held    time.Duration // the current window let its quota through, and the next request was held for this long after open (spent); 0: not held
	bursts  bool          // a window let its quota through within half its length, and the next request was held (spent)
	blk     block         // the block a refusal may begin, from it
	// probed: a probe after a wait the server asked for was refused in
	// the current window; probedLast, in the one before (waitRefused).
	probed, probedLast bool
}

// turnDoubt: bounds measured from sendings are off by how much the ways
// there vary, so a bound is contradicted only by more than a
// turnDoubt-th of it, and hi, refused by less, is moved up by half that.
const turnDoubt = 16

// turnProof is how many windows must open, each no sooner after the
// last than lo, before the bounds are used: until then the backoff
// probes early in each window, where a window that keeps the clock's
// time and opened late turns (and contradicts lo).
const turnProof = 2

// turnRun is how many times the most a window let through a run must be
// to be a pace's, not a window's: a first window's count may be half its
// quota (counted at its first refusal, its answers still coming back).
const turnRun = 4

// succeeded records a success of a request sent at sent: the first of a
// request sent after a refusal opens the next window (one sent before is
// the current window's, answered late).
func (t *turn) succeeded(sent time.Time) {
	if sent.IsZero() || t.open.IsZero() {
		return
	}
	switch {
	case t.refused && sent.After(t.last):
		if !t.lost { // an opening after an unseen one bounds nothing
			if d := sent.Sub(t.open); d < t.lo-t.lo/turnDoubt {
				t.contradicted()
			} else {
				t.turned++
				if t.hi == 0 || d < t.hi {
					t.hi = d
				}
			}
			t.blk.opened(sent)
		}
	case t.held > 0 && !t.refused && !sent.Before(t.open.Add(t.held)):
		// Held for the window's end, and let through: the next window,
		// opened where the bounds said (it bounds nothing new).
		t.turned++
	default:
		t.ok++
		return
	}
	t.open, t.ok, t.refused, t.lost, t.held = sent, 1, false, false, 0
	t.probed, t.probedLast = false, t.probed
}

// spent is when the partition's next request may go, once the current
// window has let its quota through — the successes since it opened and
// the requests on the wire (wire) as many as the most a window let
// through before its first refusal — and its bounds are proven and
// within a sixteenth of each other: its end (open+span). Zero otherwise,
// and where the quota took more than half the window to go through.
// A window seen to let its quota through and refuse the next needs no
// refused request to show it again. Over windows of 5 s (10 per window,
// 10 goroutines 20 ms away, fake time) the refusals went 43 -> 28 for a
// window on the clock, 30 -> 13 for Flask-Limiter's and
// rate-limiter-flexible's from a client's first request, 37 -> 13 for a
// sliding log answering "Retry-After: 1", and @nestjs/throttler with
// setHeaders false 43 -> 14, 1.49x -> 1.30x. There hi was a block's
// and the run's before it — NestJS blocks a refused client for a window
// from the refusal — and at 5 per 2 s the hold was the longer way round
// (28 -> 17 refusals, but 1.21x -> 1.37x); held for the block's length
// (block) and each request after a window after the one a quota back
// (gate.turnFree), 1.11x and 1.13x.
func (t *turn) spent(wire int, spread time.Duration, now time.Time) time.Time {
	span := t.hold(spread)
	if t.refused || span == 0 || t.ok+wire < t.quota {
		return time.Time{}
	}
	if now.Sub(t.open) > t.hi/2 {
		// The quota went through over most of the window: a pace's
		// runs between refusals (a sliding window's, whose "windows"
		// are how long a pace a little too fast takes to be refused),
		// not a window that lets its quota through and waits to turn.
		return time.Time{}
	}
	t.held, t.bursts = span, true
	return t.open.Add(span)
}

// span is how long a window that has let its quota through holds the
// next request after it opened, once the bounds are proven and within a
// sixteenth of each other: hi, or the block's length where that is
// shorter by more than a sixteenth. Zero otherwise.
func (t *turn) span() time.Duration {
	if t.open.IsZero() || t.lost || t.clock || t.turned < turnProof || t.lo < aimdHold ||
		t.hi <= t.lo || t.hi-t.lo > t.hi/16 || t.quota == 0 {
		return 0
	}
	if b := t.blk.end(); b > 0 && b < t.hi-t.hi/turnDoubt {
		return b
	}
	return t.hi
}

// hold is span, or, where the bounds leave room for a whole number of
// seconds above lo (less spread, the round trip's spread: lo is measured
// between sendings, off by how much the ways there differ) that is
// shorter than span, that many seconds and a margin for the ways (a 64th
// of hi, or spread if more): windows are configured in seconds.
// hi is the first opening after the window's end that a request found,
// as late as the probes that found it (Flask-Limiter's 10 per 5 s: held
// 5.3 s from each opening, 6% under its rate). Zero while span is.
func (t *turn) hold(spread time.Duration) time.Duration {
	span := t.span()
	if span == 0 || span != t.hi {
		return span // unproven, or a block's
	}
	w := (t.lo - spread + time.Second - 1).Truncate(time.Second)
	if m := max(t.hi/64, spread); w > 0 && w+m < span {
		return w + m
	}
	return span
}

// fewAfterOpening reports whether a refusal of a request sent at sent is
// the first in a window that opened after refusals (a window seen
// whole before it) and let fewer than a quarter of the most a window let
// through before it: a rate in debt, not a window that turned.
func (t *turn) fewAfterOpening(sent time.Time) bool {
	return t.turned > 0 && !t.refused && !t.lost && !t.clock && !sent.Before(t.open) && t.ok < t.quota/4
}

// refusedAt records a bare refusal of a request sent at sent. Before any
// window is known, the first opened with the gate's first request (at
// first) and let ok through.
func (t *turn) refusedAt(sent, first time.Time, ok int) {
	if t.open.IsZero() {
		t.open, t.ok = first, ok
	}
	if sent.IsZero() || sent.Before(t.open) {
		return
	}
	if t.held > 0 && t.held < t.hi-t.hi/turnDoubt && !sent.Before(t.open.Add(t.held)) {
		// Held for a block's end short of the window's, and refused: the
		// refusals begin no block of their own length (block.end).
		t.blk.no = true
	}
	if !t.refused {
		if t.quota > 0 && t.ok > turnRun*t.quota {
			*t = turn{open: t.open, ok: t.ok, blk: t.blk}
		}
		t.quota = max(t.quota, t.ok)
		t.blk.first = sent
	} else {
		t.blk.refused(sent)
	}
	t.refused, t.last = true, maxTime(t.last, sent)
	d := sent.Sub(t.open)
	if t.hi > 0 && d > 2*t.hi {
		// Long after the window opened (the partition idle, or other
		// clients spending its windows): a later window's refusal, whose
		// opening was not seen. It bounds nothing, nor does the next
		// opening.
		t.open, t.lost = sent, true
		return
	}
	if t.hi > 0 && d >= t.hi {
		if d > t.hi+t.hi/turnDoubt {
			t.contradicted()
		} else {
			t.hi = d + t.hi/(2*turnDoubt) // hi was a little short: the ways vary
		}
	}
	t.lo = max(t.lo, d)
}

// waitRefused records, as refusedAt, a refusal that asked for a wait in
// whole seconds — a probe's when ok is 0 — and reports whether the
// bounds may lengthen its pause: a probe after such a wait was refused
// in this window or the one before (probed, probedLast).
func (t *turn) waitRefused(sent, first time.Time, ok int) bool {
	t.refusedAt(sent, first, ok)
	t.blk.no = true // a server that asks for a wait tells of its block
	if ok == 0 {
		t.probed = true
	}
	return t.probed || t.probedLast
}

// contradicted records bounds that contradict each other: the first
// time, they start over (a loaded server's late answers can fake one: a
// Python process per client, all at once, disabled them for good once,
// 110 refusals where 33 are drawn); the second, the window is taken to
// keep the clock's time (clock), and they bound nothing from then on.
func (t *turn) contradicted() {
	if t.doubted {
		t.clock = true
		return
	}
	t.doubted, t.lo, t.hi, t.turned, t.bursts = true, 0, 0, 0, false
}

// bound brings until, the end of the pause a bare refusal begins, within
// what the bounds say (see turn). It returns until unchanged when they
// say nothing.
func (t *turn) bound(until time.Time) time.Time {
	if t.open.IsZero() || !t.refused || t.lo < aimdHold || t.clock || t.lost || t.turned < turnProof {
		return until
	}
	next := t.lo + t.lo/8
	if t.hi <= t.lo {
		return maxTime(until, t.open.Add(next))
	}
	if t.hi-t.lo <= t.hi/16 {
		return t.open.Add(t.hi)
	}
	return minTime(maxTime(until, t.open.Add(min(next, (t.lo+t.hi)/2))), t.open.Add(t.hi))
}

// block bounds the wait a server's first refusal in a window begins, from
// that refusal: @nestjs/throttler blocks a client that went over its limit
// for a window's length from then (its blockDuration, by default its
// ttl), refuses every request until it ends, and counts the first after
// it alone. Its windows, as turn bounds them from their openings, are a
// block's: the time to the first refusal and the block's together (10
// per 5 s paced over its first 1.3 s: windows of 6.3 s). Every refused
// request after the window's first says the block is longer than lo
// after it, every opening that it is no longer than hi. Once proven, the
// block's length is the window's: a window that has let its quota
// through holds the next request for that long after it opened (plus a
// margin for the ways there), not the block's and the run's; a request so
// held and refused says the refusals begin no block (no), and the
// bounds are turn's alone from then on. So is a refusal later after the
// window's first than an opening came, and a server that asks for a wait
// (it tells of its block). Only the hold reads the block: a window that
// starts with the client's first request, refused at about the same time
// into each window, looks the same from its refusals, and one held
// request refused tells the two apart; the pause a refusal begins stays
// turn's. Its zero value bounds nothing.
type block struct {
	first  time.Time     // when the current window's first refused request left
	lo, hi time.Duration // the block is longer than lo and no longer than hi; 0: unknown
	seen   int           // openings it measured
	no     bool          // the refusals were found to begin no block
}

// refused records a refusal, after the window's first, of a request sent
// at sent.
func (b *block) refused(sent time.Time) {
	if b.first.IsZero() || sent.Before(b.first) {
		return
	}
	d := sent.Sub(b.first)
	if b.hi > 0 && d > b.hi+b.hi/turnDoubt {
		b.no = true
	}
	b.lo = max(b.lo, d)
}

// opened records the opening of a window by a request sent at sent,
// after refusals.
func (b *block) opened(sent time.Time) {
	if b.first.IsZero() || sent.Before(b.first) {
		return
	}
	d := sent.Sub(b.first)
	if d < b.lo-b.lo/turnDoubt {
		b.no = true
	}
	b.seen++
	if b.hi == 0 || d < b.hi {
		b.hi = d
	}
	b.first = time.Time{}
}

// end is the block's length, its margin for the ways there included,
// once proven — turnProof openings measured it — or zero. It is the
// least an opening showed, which the refusals need not have closed in
// on: once turn's bounds are proven and close, the pause after a
// refusal is theirs and probes nothing (real NestJS: refused up to 4.7 s
// after a first refusal, let through 5.1 s after another), and a held
// request refused says soon enough that the block was not there.
func (b *block) end() time.Duration {
	if b.no || b.seen < turnProof || b.hi <= b.lo {
		return 0
	}
	return b.hi + b.hi/(4*turnDoubt)
}
