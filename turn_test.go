package throttle

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// turnAt is s seconds into the turn tests' timeline.
func turnAt(s float64) time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(s * float64(time.Second)))
}

// TestTurnBoundsAWindowThatStartsWithOurs feeds turn the requests of a
// server whose 5-s windows start with the client's first request after
// the last: the bounds stay silent until two windows have opened, then
// skip the probes a window's start makes certain to be refused, bisect
// between the bounds, and go at the upper one once they are close.
func TestTurnBoundsAWindowThatStartsWithOurs(t *testing.T) {
	var tr turn
	// Window 1 opened with the first request; ten got through; the
	// backoff's probes were refused up to 4.4 s and one at 7.8 s opened
	// window 2.
	tr.refusedAt(turnAt(0.5), turnAt(0), 10)
	for _, p := range []float64{1.7, 2.6, 4.4} {
		tr.refusedAt(turnAt(p), turnAt(0), 0)
		assert.Equal(t, turnAt(p+1), tr.bound(turnAt(p+1)), "a window has yet to open: the backoff's own")
	}
	for i := range 10 {
		tr.succeeded(turnAt(7.8 + 0.1*float64(i)))
	}
	assert.Equal(t, 4400*time.Millisecond, tr.lo)
	assert.Equal(t, 7800*time.Millisecond, tr.hi)
	tr.refusedAt(turnAt(8.8), turnAt(0), 0)
	assert.Equal(t, turnAt(8.9), tr.bound(turnAt(8.9)), "one window opened: not yet proven")
	tr.refusedAt(turnAt(12.7), turnAt(0), 0) // 4.9 s into window 2
	for i := range 10 {
		tr.succeeded(turnAt(12.9 + 0.1*float64(i))) // window 3 at 5.1 s
	}
	// Window 3's burst is refused: lo (4.9 s) and hi (5.1 s) are within a
	// sixteenth of hi, so the pause lasts to hi, whatever the backoff.
	tr.refusedAt(turnAt(13.9), turnAt(0), 0)
	assert.Equal(t, turnAt(12.9+5.1), tr.bound(turnAt(14.0)), "at hi, the bounds close")
	assert.Equal(t, turnAt(12.9+5.1), tr.bound(turnAt(30)), "never later than hi")

	// Far apart, the probe goes an eighth of lo beyond lo, or halfway to
	// hi if that is sooner, and never before the backoff's own end.
	far := turn{open: turnAt(0), ok: 10, refused: true, last: turnAt(1), quota: 10, lo: 4 * time.Second, hi: 8 * time.Second, turned: 2}
	assert.Equal(t, turnAt(4.5), far.bound(turnAt(1.1)), "an eighth beyond lo")
	assert.Equal(t, turnAt(4.7), far.bound(turnAt(4.7)), "the backoff's, later")
	far.hi = 4900 * time.Millisecond
	assert.Equal(t, turnAt(4.45), far.bound(turnAt(1.1)), "halfway to hi")
}

// TestTurnSeesAClockWindow: a window that keeps the clock's time, opened
// late by our first success in it, turns sooner after it than lo; the
// bounds start over (one contradiction may be a loaded server's late
// answer), and when they contradict each other again they say nothing
// from then on.
func TestTurnSeesAClockWindow(t *testing.T) {
	var tr turn
	tr.refusedAt(turnAt(0.5), turnAt(0), 10)
	tr.refusedAt(turnAt(4.4), turnAt(0), 0)
	tr.succeeded(turnAt(7.8)) // the window [5, 10) opened late
	tr.refusedAt(turnAt(8.8), turnAt(0), 0)
	tr.succeeded(turnAt(10.1)) // [10, 15): 2.3 s after the last opening, under lo
	assert.False(t, tr.clock, "once: the bounds start over")
	assert.Zero(t, tr.lo)
	assert.Zero(t, tr.hi)
	tr.refusedAt(turnAt(11.2), turnAt(0), 0)
	assert.Equal(t, turnAt(11.3), tr.bound(turnAt(11.3)))
	tr.refusedAt(turnAt(14.6), turnAt(0), 0) // lo 4.5 s
	tr.succeeded(turnAt(17.6))               // [15, 20) opened late: hi 7.5 s
	tr.refusedAt(turnAt(18.0), turnAt(0), 0)
	tr.succeeded(turnAt(20.1)) // 2.5 s on, under lo again
	assert.True(t, tr.clock)
	tr.refusedAt(turnAt(21.2), turnAt(0), 0)
	assert.Equal(t, turnAt(21.3), tr.bound(turnAt(21.3)))
}

// TestTurnOutlivesOneLateAnswer: bounds that one late opening (a loaded
// server answering late) contradicts start over and, two consistent
// windows on, bound the pause again.
func TestTurnOutlivesOneLateAnswer(t *testing.T) {
	tr := turn{open: turnAt(0), ok: 10, refused: true, last: turnAt(4.9), quota: 10,
		lo: 4900 * time.Millisecond, hi: 5100 * time.Millisecond, turned: 2}
	tr.succeeded(turnAt(5.0)) // the next window opens
	tr.refusedAt(turnAt(5.5), turnAt(0), 0)
	tr.succeeded(turnAt(9.0)) // 4.0 s after the last opening: under lo
	assert.False(t, tr.clock)
	assert.Zero(t, tr.turned, "started over")
	for _, w := range []float64{14.0, 19.0} { // two windows of 5 s
		tr.refusedAt(turnAt(w-0.1), turnAt(0), 0)
		tr.succeeded(turnAt(w))
	}
	tr.refusedAt(turnAt(19.5), turnAt(0), 0)
	assert.Equal(t, 2, tr.turned)
	assert.Equal(t, turnAt(24.0), tr.bound(turnAt(19.6)), "bounded again: at hi")
}

// TestTurnForgetsAPacedRun: a refusal after a run four times as long as
// any window's burst is a pace found too fast, not a window's end.
func TestTurnForgetsAPacedRun(t *testing.T) {
	var tr turn
	tr.refusedAt(turnAt(0.5), turnAt(0), 10)
	tr.refusedAt(turnAt(4.4), turnAt(0), 0)
	for i := range 60 {
		tr.succeeded(turnAt(5 + 0.2*float64(i)))
	}
	tr.refusedAt(turnAt(17), turnAt(0), 0)
	assert.Equal(t, 12*time.Second, tr.lo, "the paced run's refusal alone")
	assert.Zero(t, tr.hi)
	assert.Zero(t, tr.turned)
}

// TestTurnLeavesShortWindows: windows under aimdHold are the pace's and
// the first burst's hold's to handle.
func TestTurnLeavesShortWindows(t *testing.T) {
	var tr turn
	tr.refusedAt(turnAt(0.1), turnAt(0), 10)
	for w := range 4 {
		start := float64(w) + 1.02
		tr.succeeded(turnAt(start))
		tr.refusedAt(turnAt(start+0.9), turnAt(0), 0)
	}
	assert.Equal(t, turnAt(5), tr.bound(turnAt(5)))
}

// TestTurnBareWindowsOfSeconds: the windows of seconds a bare 429 ends
// (fake time, 250 units): Flask-Limiter with its headers off, whose
// window starts with the client's first request after the last, at 10
// per 5 s took 1.25x and 79 refusals, each window's end probed by a
// backoff that doubled from a tenth of a second and overshot it; a
// window kept by the clock (row h) is held as before.
func TestTurnBareWindowsOfSeconds(t *testing.T) {
	for _, tc := range []struct {
		behave   string
		rate     int
		window   time.Duration
		total    int
		refusals int
		ratio    float64
	}{
		{"j/flask-limiter headers disabled", 10, 5 * time.Second, 250, 40, 1.16},  // measured 30, 1.136
		{"j/flask-limiter headers disabled", 20, 10 * time.Second, 500, 50, 1.08}, // 40, 1.062 (150, 1.33 before)
		{"h/bare 429, epoch window", 20, 10 * time.Second, 500, 60, 1.05},         // 46, 1.033 (134, 1.031 before)
	} {
		t.Run(tc.behave+"/"+tc.window.String(), func(t *testing.T) {
			b := modelBehaviourOf(t, tc.behave)
			r := runModel(t, b, modelRun{rate: tc.rate, window: tc.window, workers: 10, total: tc.total,
				latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: b.method})
			r.holds(t, tc.refusals, tc.ratio)
		})
	}
}

// TestTurnAfterAnIdleHour: a refusal an hour after the window opened is a
// later window's: it bounds nothing (no pause of an hour and more), nor
// does the opening after it; then the bounds hold again.
func TestTurnAfterAnIdleHour(t *testing.T) {
	tr := turn{open: turnAt(0), ok: 10, refused: true, last: turnAt(4.9), quota: 10,
		lo: 4900 * time.Millisecond, hi: 5100 * time.Millisecond, turned: 2}
	tr.succeeded(turnAt(5.1)) // window opened: hi stays 5.1 s
	tr.refusedAt(turnAt(3600), turnAt(0), 0)
	assert.Equal(t, turnAt(3600.1), tr.bound(turnAt(3600.1)), "the backoff's own")
	assert.Equal(t, 4900*time.Millisecond, tr.lo)
	tr.succeeded(turnAt(3605))
	assert.Equal(t, 5100*time.Millisecond, tr.hi, "an opening after an unseen one bounds nothing")
	tr.refusedAt(turnAt(3606), turnAt(0), 0) // this window's burst, refused
	assert.Equal(t, turnAt(3605+5.1), tr.bound(turnAt(3606.1)), "at hi again")
}

// TestTurnBoundsAFixedRetryAfter: a server that writes the same
// "Retry-After: 1" whatever its window is, over a sliding log of 5 s (issue
// 18's row d, its window five times as long), refused each window's probe
// once a second for four seconds: 62 refusals, 1.13×. Once a probe after
// such a wait is refused (in this window or the last), the windows its
// refusals bound (turn) make the pause longer than the wait it asked for,
// never shorter; a refusal that tells its wait finer than the second
// (Traefik's X-Retry-In, a bucket's next token) is not read so.
func TestTurnBoundsAFixedRetryAfter(t *testing.T) {
	holdEach(t, modelRun{rate: 10, window: 5 * time.Second, workers: 10, total: 250,
		latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond}, []behaviourBound{
		{"d/sliding log, Retry-After 1", 42, 1.12}, // measured 37, 1.108 (62, 1.134 before)
		{"k/traefik rateLimit, burst 1", 12, 1.05}, // 10, 1.023, as before
	})
}

// TestTurnFewAfterOpening: a window that let twenty through and reopened
// after 14 s (its last refused probe at 7.7 s), then let one through
// before its first refusal, is a rate in debt; a window that let its
// quota through again is a window that turned; a refusal in the first
// window, or a second one after the reopening, says nothing of it.
func TestTurnFewAfterOpening(t *testing.T) {
	var tr turn
	tr.refusedAt(turnAt(0.01), turnAt(0), 20)
	for _, p := range []float64{1.3, 2.1, 4.5, 7.7} {
		assert.False(t, tr.fewAfterOpening(turnAt(p)), "the first window: no opening seen yet")
		tr.refusedAt(turnAt(p), turnAt(0), 0)
	}
	tr.succeeded(turnAt(14.1))
	assert.Equal(t, 7700*time.Millisecond, tr.lo)
	assert.Equal(t, 14100*time.Millisecond, tr.hi)
	assert.Equal(t, 20, tr.quota)
	assert.True(t, tr.fewAfterOpening(turnAt(14.2)), "one of twenty, then refused: a rate in debt")
	tr.refusedAt(turnAt(14.2), turnAt(0), 0)
	assert.False(t, tr.fewAfterOpening(turnAt(14.3)), "refused once already in this window")

	tr = turn{}
	tr.refusedAt(turnAt(0.01), turnAt(0), 20)
	tr.refusedAt(turnAt(7.7), turnAt(0), 0)
	tr.succeeded(turnAt(10.1))
	for i := range 19 {
		tr.succeeded(turnAt(10.2 + 0.01*float64(i)))
	}
	assert.False(t, tr.fewAfterOpening(turnAt(10.5)), "its quota through again: a window that turned")
}

// TestTurnHoldsASpentWindow: once the bounds are proven and close, a
// window that has let its quota through (successes, and requests on the
// wire) holds the next request for its end instead of sending it to be
// refused; the request let through there opens the next window. A quota
// that took most of the window to go through is a pace's run, not a
// window's: nothing is held.
func TestTurnHoldsASpentWindow(t *testing.T) {
	proven := func() turn {
		return turn{open: turnAt(0), ok: 8, quota: 10, lo: 4900 * time.Millisecond, hi: 5100 * time.Millisecond, turned: 2}
	}
	tr := proven()
	end := 5*time.Second + 5100*time.Millisecond/64 // five whole seconds, and a margin for the ways
	assert.Zero(t, tr.spent(1, 0, turnAt(1)), "nine of ten: one more may go")
	assert.Equal(t, turnAt(0).Add(end), tr.spent(2, 0, turnAt(1)), "eight through and two on the wire: spent")
	assert.Equal(t, end, tr.held)
	tr.succeeded(turnAt(1)) // one of those on the wire
	assert.Equal(t, turnAt(0), tr.open, "sent before the end: the same window")
	tr.succeeded(turnAt(0).Add(end))
	assert.Equal(t, turnAt(0).Add(end), tr.open, "sent at its end: the next window opens")
	assert.Equal(t, 1, tr.ok)
	assert.Equal(t, 3, tr.turned)
	assert.Equal(t, 5100*time.Millisecond, tr.hi, "an opening we chose bounds nothing")

	slow := proven()
	assert.Zero(t, slow.spent(2, 0, turnAt(3)), "most of the window gone: a pace's run")
	unproven := proven()
	unproven.turned = 1
	assert.Zero(t, unproven.spent(2, 0, turnAt(1)), "one window opened: not yet proven")
	apart := proven()
	apart.lo = 4 * time.Second
	assert.Zero(t, apart.spent(2, 0, turnAt(1)), "bounds a fifth apart: its end is not known")
	refused := proven()
	refused.refused = true
	assert.Zero(t, refused.spent(2, 0, turnAt(1)), "refused already: the pause holds it")
}

// TestTurnHoldsWholeSeconds: hi is the first opening a request found
// after the window's end, as late as the probes that found it; windows
// are configured in seconds. Where a whole number of seconds lies above
// lo (less the round trip's spread, lo's doubt: it is measured between
// sendings) and short of hi, a spent window holds for that many seconds
// and a margin for the ways, a 64th of hi or the spread if more.
func TestTurnHoldsWholeSeconds(t *testing.T) {
	const spread = 30 * time.Millisecond
	tr := turn{open: turnAt(0), ok: 10, quota: 10, lo: 5001 * time.Millisecond, hi: 5300 * time.Millisecond, turned: 2}
	assert.Equal(t, span64(5*time.Second, 5300*time.Millisecond), tr.hold(spread), "lo a millisecond over five seconds: the ways")
	assert.Equal(t, 5*time.Second+150*time.Millisecond, tr.hold(150*time.Millisecond), "the round trip's spread, if more")
	assert.Equal(t, 5300*time.Millisecond, tr.hold(400*time.Millisecond), "no shorter than hi")
	assert.Equal(t, 5300*time.Millisecond, tr.hold(0), "no spread: lo is over five seconds")
	tr.lo = 5200 * time.Millisecond
	assert.Equal(t, 5300*time.Millisecond, tr.hold(spread), "no whole second between the bounds: hi")
	tr.lo = 4990 * time.Millisecond
	assert.Equal(t, turnAt(0).Add(span64(5*time.Second, 5300*time.Millisecond)), tr.spent(0, spread, turnAt(1)))

	// A log of 150 per 30 s: lo 29.3 s, hi 30.4 s. Thirty seconds and a
	// 64th of hi is longer than hi: hi. (Twenty-nine, lo less a 64th of
	// hi rounded up, held the windows short.)
	long := turn{open: turnAt(0), ok: 150, quota: 150, lo: 29300 * time.Millisecond, hi: 30360 * time.Millisecond, turned: 3}
	assert.Equal(t, 30360*time.Millisecond, long.hold(50*time.Millisecond))
	tr.turned = 1
	assert.Zero(t, tr.hold(spread), "unproven")
}

// span64 is w and a 64th of hi.
func span64(w, hi time.Duration) time.Duration { return w + hi/64 }

// TestBlockBoundsTheWaitFromTheFirstRefusal: @nestjs/throttler with
// setHeaders false blocks a client that went over its limit for a
// window from that refusal (5 s here), whatever time into the window the
// refusal fell. Refused probes after the first refusal and the opening
// after them bound the block; proven over two windows, a window that let
// its quota through is held for the block's length (and a margin), not
// the window's as its openings showed it (the time to the first refusal
// and the block together). A request so held and refused says the refusals begin
// no block; so does a refusal later after the first than an opening came,
// or a server that asks for a wait.
func TestBlockBoundsTheWaitFromTheFirstRefusal(t *testing.T) {
	var b block
	b.first = turnAt(0)
	b.refused(turnAt(4.9))
	b.opened(turnAt(5.05))
	assert.Equal(t, 4900*time.Millisecond, b.lo)
	assert.Equal(t, 5050*time.Millisecond, b.hi)
	assert.Zero(t, b.end(), "one opening: not yet proven")
	b.first = turnAt(10)
	b.refused(turnAt(14.95))
	b.opened(turnAt(15.02))
	assert.Equal(t, 5020*time.Millisecond+5020*time.Millisecond/64, b.end(), "two openings, the bounds within a sixteenth")
	assert.True(t, b.first.IsZero(), "an opening ends the window's refusals")

	late := b
	late.first = turnAt(20)
	late.refused(turnAt(25.5))
	assert.True(t, late.no, "refused later after the first refusal than an opening came")
	early := b
	early.first = turnAt(20)
	early.opened(turnAt(22))
	assert.True(t, early.no, "let through sooner after the first refusal than refused probes were")

	// A turn whose windows, from their openings, are 6.3 s: a paced run
	// of 1.3 s to the first refusal, and the block.
	proven := func() turn {
		return turn{open: turnAt(0), ok: 8, quota: 10, lo: 6200 * time.Millisecond, hi: 6300 * time.Millisecond, turned: 2, blk: b}
	}
	tr := proven()
	want := turnAt(0).Add(b.end())
	assert.Equal(t, want, tr.spent(2, 0, turnAt(1)), "spent: held for the block's length, not the window's")
	tr.succeeded(want)
	assert.Equal(t, want, tr.open, "let through there: the next window opens")
	assert.Equal(t, 3, tr.turned)

	tr = proven()
	tr.spent(2, 0, turnAt(1))
	tr.refusedAt(want, turnAt(0), 10)
	assert.True(t, tr.blk.no, "held for the block's end and refused: no block")
	tr = proven()
	tr.waitRefused(turnAt(1.3), turnAt(0), 10)
	assert.True(t, tr.blk.no, "a server that asks for a wait tells of its block")
	tr = proven()
	tr.blk.no = true
	assert.Equal(t, turnAt(6.3), tr.spent(2, 0, turnAt(1)), "no block: held for the window's end")
}

// TestBareLogHeldByTheWindowBefore: @nestjs/throttler with setHeaders
// false counts a log, and blocks a client that goes over it for a
// window. Once turn has proven its windows and seen one let its quota
// through at once (bursts), each request of a window waits a window
// after the request as many places back in the window before
// (gate.turnFree): a pace creeping up within the window no longer
// catches up with the window before's entries, each refusal a block of
// 2 s (5 per 2 s, 10 goroutines 20 ms away, 250 units: 17 refusals and
// 1.37x before, 17 and 1.13x now).
func TestBareLogHeldByTheWindowBefore(t *testing.T) {
	b := modelBehaviourOf(t, "n/nestjs throttler, no headers")
	r := runModel(t, b, modelRun{rate: 5, window: 2 * time.Second, workers: 10, total: 250, latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: b.method})
	assert.Less(t, r.ratio(), 1.2)
	assert.LessOrEqual(t, r.counts.refused, 20)
	assert.Zero(t, r.counts.inPause, "sent during a wait a refusal asked for")
}

// TestRefusedProbesBackOff: a count that takes refusals in (HAProxy's
// http_req_rate, answering "Retry-After: 1") over windows of a few
// seconds, with a quota of fewer than one a second, is kept over its
// limit by a probe each second, obeyed to the letter, for ever: 3 per
// 5 s, 10 goroutines, no success in 600 s (unfinished, 650 refusals).
// Probes refused for ten of the waits asked, with no success since,
// each wait half as long again as the last (never less than asked), and
// the count falls under its limit.
func TestRefusedProbesBackOff(t *testing.T) {
	b := modelBehaviourOf(t, "e/haproxy stick table")
	for _, q := range []simQuota{{3, 5 * time.Second}, {5, 10 * time.Second}} {
		t.Run(fmt.Sprintf("%d per %v", q.n, q.window), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: q.n, window: q.window, workers: 10, total: 40,
				latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond, method: b.method})
			require.True(t, r.finished, "unfinished: %d of %d in %v", r.done, r.run.total, r.elapsed)
			assert.Less(t, r.ratio(), 4.0) // measured 3.2x and 2.3x
			assert.Less(t, r.counts.refused, 60)
			assert.Zero(t, r.counts.inPause, "sent during a wait a refusal asked for")
		})
	}
}
