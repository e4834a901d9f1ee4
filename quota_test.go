package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestQuotaCharge: declared costs, 1 for request quotas, Anthropic's
// tokens as the sum of declared *-tokens, else the recent average.
func TestQuotaCharge(t *testing.T) {
	c := costsOf(WithCost(WithCost(context.Background(), "input-tokens", 300), "output-tokens", 50))
	assert.EqualValues(t, 300, (&quota{name: "input-tokens", word: word{unit: unitOther}}).charge(c))
	assert.EqualValues(t, 1, (&quota{name: "requests", word: word{unit: unitRequests}}).charge(c))
	assert.EqualValues(t, 1, (&quota{name: "core"}).charge(c), "a name that says nothing of its unit")
	assert.EqualValues(t, 350, (&quota{name: "tokens", word: word{unit: unitOther}}).charge(c))
	q := &quota{name: "tokens", word: word{unit: unitOther, known: true, reset: t0.Add(time.Minute)}}
	assert.EqualValues(t, 1, q.charge(nil), "nothing declared yet")
	q.claim(t0, 800, true)
	q.claim(t0, 1600, true)
	assert.EqualValues(t, 900, q.charge(nil), "the recent average")
	c = costsOf(WithCost(WithCost(context.Background(), "tokens", 5), "TOKENS", 7))
	assert.EqualValues(t, 7, q.charge(c), "names match case-insensitively; the last WithCost wins")
}

// TestRefillingQuota: an OpenAI-style bucket refills limit−remaining evenly
// until its reset, and a request waits exactly until enough has refilled.
func TestRefillingQuota(t *testing.T) {
	var q quota
	q.apply(&headers.Quota{Name: "tokens", Unit: "tokens", Limit: 6000, Remaining: 0}, true, true, t0.Add(time.Minute), false, false, 1, time.Time{}, t0)
	assert.EqualValues(t, 0, q.avail(t0, 0))
	assert.EqualValues(t, 3000, q.avail(t0.Add(30*time.Second), 0))
	assert.EqualValues(t, 6000, q.avail(t0.Add(2*time.Minute), 0), "never above the limit")
	at := q.readyAt(t0, 1000, 0)
	assert.InDelta(t, 10, at.Sub(t0).Seconds(), 0.001)
	q.claim(t0, 1000, true)
	assert.InDelta(t, 20, q.readyAt(t0, 1000, 0).Sub(t0).Seconds(), 0.001, "claims on the wire count")
	assert.True(t, q.readyAt(t0, 5500, 0).IsZero(), "more than refills while 1000 are claimed: wait for an answer")
	assert.True(t, q.tooBig(6001))
	assert.False(t, q.stale(t0.Add(time.Hour)), "a bucket never goes stale")
}

// TestWindowQuota: a window quota opens at its reset and paces its last
// tenth evenly until then; a stale one (reset passed) is forgotten.
func TestWindowQuota(t *testing.T) {
	var q quota
	q.apply(&headers.Quota{Name: "core", Limit: 100, Remaining: 5}, false, true, t0.Add(60*time.Second), false, false, 1, time.Time{}, t0)
	assert.EqualValues(t, 5, q.avail(t0, 0))
	assert.EqualValues(t, 2, q.avail(t0, 3), "requests on the wire count against a quota of requests")
	assert.Equal(t, t0.Add(60*time.Second), q.readyAt(t0, 6, 0))
	q.claim(t0, 1, false)
	assert.Equal(t, 11800*time.Millisecond, q.pace(t0, 1, 1), "4 left after this one: spread until a second before the reset, which whole seconds may round up: 59s/(4+1)")
	assert.False(t, q.stale(t0.Add(59*time.Second)))
	assert.True(t, q.stale(t0.Add(60*time.Second)))
}

// TestSlidingWindowDetected: a quota whose first answer after its reset
// shows far less than the limit, though we sent little since, is a sliding
// window reporting its fixed window's end: it is paced under its limit from
// then on, not trusted to reopen at the reset. A new window is one whose
// reset the server moved on: our own guess of a reset moving on (probing
// after a whole-second reset) is not.
func TestSlidingWindowDetected(t *testing.T) {
	var q quota
	q.apply(&headers.Quota{Name: "", Limit: 10, Remaining: 0, Reset: t0.Add(time.Second)}, false, true, t0.Add(time.Second), false, false, 1, time.Time{}, t0)
	assert.False(t, q.sliding())
	now := t0.Add(time.Second)
	q.claim(now, 1, false) // the probe
	q.apply(&headers.Quota{Name: "", Limit: 10, Remaining: 0, Reset: t0.Add(2 * time.Second)}, false, true, t0.Add(2*time.Second), false, false, 2, time.Time{}, now)
	assert.True(t, q.sliding())
	assert.Equal(t, now, q.readyAt(now, 1, 1), "paced, not counted")
	assert.InDelta(t, float64(time.Second)/9.4, float64(q.pace(now, 1, 1)), 1)

	var f quota // a fixed window: its new window starts full
	f.apply(&headers.Quota{Limit: 10, Remaining: 0, Reset: t0.Add(time.Second)}, false, true, t0.Add(time.Second), false, false, 1, time.Time{}, t0)
	f.claim(now, 1, false)
	f.apply(&headers.Quota{Limit: 10, Remaining: 9, Reset: t0.Add(2 * time.Second)}, false, true, t0.Add(2*time.Second), false, false, 2, time.Time{}, now)
	assert.False(t, f.sliding())

	var g quota // a fixed window probed after its whole-second reset
	g.apply(&headers.Quota{Limit: 10, Remaining: 0, Reset: t0}, false, true, t0.Add(50*time.Millisecond), true, false, 1, time.Time{}, t0)
	later := t0.Add(100 * time.Millisecond)
	g.claim(later, 1, false)
	g.apply(&headers.Quota{Limit: 10, Remaining: 0, Reset: t0}, false, true, later.Add(800*time.Millisecond), true, false, 2, time.Time{}, later)
	assert.False(t, g.sliding(), "our guess of the reset moved on, the server's did not")
}

// TestSlidingLogSlack: a sliding window whose resets step by other than
// whole windows (a log's oldest entry's expiry, koa-ratelimit's over
// Redis) counts exactly: its slack under the limit is halved after every
// two windows' worth of successes, down to slackMin, and a refusal
// doubles it and ends the search. A window whose resets step by whole
// windows (a weighted count, go-chi/httprate's) keeps slidingMargin.
func TestSlidingLogSlack(t *testing.T) {
	// Detected sliding with a 2 s window, as in TestSlidingWindowDetected.
	sliding := func(resets ...time.Duration) *quota {
		q := new(quota)
		q.apply(&headers.Quota{Limit: 5, Remaining: 0, Reset: t0.Add(2 * time.Second)}, false, true, t0.Add(2*time.Second), false, false, 1, time.Time{}, t0)
		now := t0.Add(2 * time.Second)
		q.claim(now, 1, false)
		q.apply(&headers.Quota{Limit: 5, Remaining: 0, Reset: t0.Add(4 * time.Second)}, false, true, t0.Add(4*time.Second), false, false, 2, time.Time{}, now)
		require.True(t, q.sliding())
		require.Equal(t, 2*time.Second, q.window)
		for i, r := range resets {
			at := t0.Add(r - 1500*time.Millisecond) // each said 1.5 s ahead, within the window
			q.apply(&headers.Quota{Limit: 5, Remaining: 0, Reset: t0.Add(r)}, false, true, t0.Add(r), false, false, int64(3+i), time.Time{}, at)
		}
		require.Equal(t, 2*time.Second, q.window)
		return q
	}
	pace := func(q *quota) float64 { return float64(q.pace(t0.Add(5*time.Second), 1, 1)) }
	under := func(slack float32) float64 { return float64(2*time.Second) / (5 - float64(slack)) } // the pace at slack

	counter := sliding(6 * time.Second) // steps by the window
	assert.False(t, counter.log)
	for range 100 {
		counter.slide(false)
	}
	assert.InDelta(t, under(slidingMargin), pace(counter), 2, "a weighted count keeps slidingMargin")

	log := sliding(5 * time.Second) // a second: no window's end
	assert.True(t, log.log)
	assert.InDelta(t, under(slidingMargin), pace(log), 2, "the search starts at slidingMargin")
	for range 10 {
		log.slide(false)
	}
	assert.InDelta(t, under(slidingMargin/2), pace(log), 2, "two windows' worth: halved")
	for range 100 {
		log.slide(false)
	}
	assert.InDelta(t, under(slackMin), pace(log), 2, "down to slackMin")
	log.slide(true)
	assert.InDelta(t, under(2*slackMin), pace(log), 2, "a refusal doubles it")
	for range 100 {
		log.slide(false)
	}
	assert.InDelta(t, under(2*slackMin), pace(log), 2, "and ends the search")
}

// TestConcurrencyQuota: a concurrent-requests quota counts requests on the
// wire, not a window, and only an answer frees room.
func TestConcurrencyQuota(t *testing.T) {
	var q quota
	q.apply(&headers.Quota{Name: "conc", Unit: "concurrent-requests", Limit: 2, Remaining: -1}, false, true, time.Time{}, false, false, 1, time.Time{}, t0)
	assert.Equal(t, t0, q.readyAt(t0, 1, 1))
	assert.True(t, q.readyAt(t0, 1, 2).IsZero())
}

// TestAIMD: a first refusal guesses the rate (just under what the server
// took per second) and starts slow start, or, when it ends a burst, holds
// the partition and creeps; slow start doubles the rate after each short
// run; the refusal that ends it goes back to the last interval a run got
// through at (the guess, when only it did) and, if the guess was
// far off, searches halfway up to the refused interval; a refusal of a
// pace no run proved halves the rate; a refusal with no success since the
// last pause changes nothing; a creeping pace that a refusal ends after a
// long enough run is measured, no slower than three cuts under the pace
// refused; a pace a server measured is not searched.
func TestAIMD(t *testing.T) {
	cut := func(d time.Duration) time.Duration { return time.Duration(float64(d) * aimdCut) }
	runs := func(a *aimd, n int) {
		for range n {
			a.succeeded(t0.Add(time.Hour), t0.Add(time.Hour))
		}
	}

	var lone aimd
	assert.Equal(t, 2*cut(100*time.Millisecond), lone.refused(t0.Add(20*time.Millisecond), t0, 0, 10, 0, false),
		"refused before any answer got through: probe after twice the guess")
	assert.Equal(t, cut(100*time.Millisecond), lone.step, "8 refused at once, 2 still on the wire: 10 a second, just under")
	assert.True(t, lone.slow, "a guess: slow start")
	lone.refused(t0.Add(300*time.Millisecond), t0, 1, 1, 0, true)
	assert.Equal(t, 2*cut(100*time.Millisecond), lone.step, "refused before a run got through: half the rate")
	assert.False(t, lone.slow)

	// Requests held back only for the first wave's answers count as on
	// the wire for a guess (slow start), not for a burst's quota.
	var held, burst aimd
	held.refused(t0.Add(30*time.Millisecond), t0, 4, 2, 6, false)
	assert.Equal(t, cut(125*time.Millisecond), held.step, "4 through, a refusal within the wave, 2 on the wire and 6 held: 8 a second")
	assert.Equal(t, aimdHold, burst.refused(t0.Add(60*time.Millisecond), t0, 10, 1, 40, true))
	assert.Equal(t, 100*time.Millisecond, burst.ceil, "a burst of 10 with 40 held behind it: 10 a second")

	var w aimd
	assert.Zero(t, w.refused(t0.Add(30*time.Millisecond), t0, 6, 10, 0, false),
		"6 through, then a refusal of the first wave: the server's burst is smaller than the wave, no hold")
	assert.True(t, w.slow, "a bucket: searched from the guess")
	assert.Equal(t, waveWithin, w.wave, "or a window the wave emptied: the first success after it tells")

	// A refusal of a later wave that comes back before the first wave's
	// answers are counted (answers arriving together are counted in any
	// order): decided when the pause it began ends.
	var v aimd
	assert.Zero(t, v.refused(t0.Add(5*time.Millisecond), t0, 2, 9, 0, true))
	assert.Equal(t, waveAfter, v.wave)
	assert.Equal(t, aimdHold, v.settleWave(10), "ten got through by the end of the pause: a burst after all")
	assert.False(t, v.slow, "a burst: no slow start")
	assert.Zero(t, v.settleWave(10), "decided once")
	var u aimd
	u.refused(t0.Add(5*time.Millisecond), t0, 2, 9, 0, true)
	assert.Zero(t, u.settleWave(3), "three: not a burst")
	assert.True(t, u.slow)

	var a aimd
	assert.Equal(t, aimdHold, a.refused(t0.Add(30*time.Millisecond), t0, 10, 10, 0, true), "a burst of 10 then a refusal: hold two windows")
	plateau := a.plateau()
	assert.Equal(t, 100500*time.Microsecond-1, plateau) // 100 ms less half of aimdGain, in float64
	assert.Equal(t, plateau, a.step, "10 taken before the first refusal: 10 a second, at the plateau just under it")
	assert.Equal(t, 100*time.Millisecond, a.ceil)
	assert.False(t, a.slow, "the burst showed the quota: no slow start")
	assert.Zero(t, a.refused(t0.Add(3*time.Second), t0.Add(2900*time.Millisecond), 0, 1, 0, true))
	assert.Equal(t, plateau, a.step, "no success since the pause: unchanged")
	runs(&a, aimdRun)
	assert.Equal(t, plateau, a.step, "a run dwells at the plateau")
	b := a
	assert.Zero(t, a.refused(t0.Add(4500*time.Millisecond), t0, 39, 3, 0, true), "a paced refusal holds nothing")
	assert.Equal(t, cut(4500*time.Millisecond/41), a.step,
		"creeping: measured, 39 answered plus 2 on the wire in 4.5 s, times the cut, slower than the safe interval")
	// The same run over 5 s (and over a minute) measures a rate further
	// under the pace refused than three cuts: what the server took over a
	// run that started slower says less than the pace the creep reached.
	c := b
	b.refused(t0.Add(5*time.Second), t0, 39, 3, 0, true)
	assert.InDelta(t, float64(cut(cut(cut(plateau)))), float64(b.step), 10, "no slower than the pace refused, cut three times")
	c.refused(t0.Add(time.Minute), t0, 39, 3, 0, true)
	assert.Equal(t, b.step, c.step)

	// One request at a time: the guess (a second) rests on one request.
	var s aimd
	s.refused(t0.Add(2*time.Millisecond), t0, 1, 1, 0, true)
	assert.Equal(t, cut(time.Second), s.step)
	assert.True(t, s.slow)
	runs(&s, aimdStartRun)
	assert.Equal(t, cut(time.Second)/2, s.step, "slow start: a run doubles the rate")
	runs(&s, 3*aimdStartRun)
	assert.Equal(t, cut(time.Second)/16, s.step)
	s.refused(t0.Add(5*time.Second), t0.Add(4*time.Second), 3, 1, 0, true)
	assert.False(t, s.slow)
	assert.Equal(t, cut(time.Second)/8, s.step, "back to the last interval a run got through at")
	assert.Equal(t, cut(time.Second)/16, s.tight, "the guess was far off: search up to the refused interval")
	before, tight := s.step, s.tight
	runs(&s, aimdRun)
	assert.InDelta(t, float64(2/(1/float64(before)+1/float64(tight))), float64(s.step), 1, "halfway, in rate")
	refused := s.step
	s.refused(t0.Add(9*time.Second), t0.Add(8*time.Second), 20, 1, 0, true)
	assert.Equal(t, before, s.step, "refused while searching: back to the safe interval")
	assert.Equal(t, refused, s.tight)
	for range 10 {
		runs(&s, aimdRun)
	}
	assert.Zero(t, s.tight, "the search ends once safe and tight are close")

	// The guess got through, its double did not: the guess was about right.
	var g aimd
	g.refused(t0, t0, 1, 10, 0, true)
	runs(&g, aimdStartRun)
	g.refused(t0.Add(time.Second), t0, 2, 1, 0, true)
	assert.Equal(t, cut(100*time.Millisecond), g.step,
		"back to the guess, which already has its margin (a second one cost nginx at 10 a second 1.09-1.10x)")
	assert.Zero(t, g.tight, "no search")

	// A pace a server measured for us (refusals that said when to come
	// back) starts just short of the measured rate, dwells there for as
	// many runs as make aimdPenaltyDwell times the refusal's wait, and is
	// then searched upwards like any other.
	var m aimd
	m.measured(50*time.Millisecond, time.Second)
	fifty := 50 * time.Millisecond
	short := time.Duration(float64(fifty) * (1 + aimdGain/2))
	assert.Equal(t, short, m.step, "just short of the measured rate")
	dwell := m.dwellRuns()
	assert.Equal(t, int(aimdPenaltyDwell*time.Second/(aimdRun*short)), dwell, "a second's wait: half a minute's runs")
	runs(&m, dwell*aimdRun)
	assert.Equal(t, short, m.step, "dwelt")
	runs(&m, 3*aimdRun)
	assert.Less(t, m.step, 50*time.Millisecond, "then searched beyond the measured rate")
}

// TestAIMDDwellsShortOfTheRateRefused: the creep stops just short of the
// rate a burst showed, or of the rate last refused, stays there for
// aimdDwell runs, then probes beyond it (TCP CUBIC's plateau).
// TestBurstRecount: the pace a burst taught is recounted from all the
// burst's successes once they are in (a first refusal counted before 3
// of 20 guessed 17 a second), only ever faster, and not while slow start
// or a search is on.
func TestBurstRecount(t *testing.T) {
	plateau := func(d time.Duration) time.Duration { return time.Duration(float64(d) * (1 + aimdGain/2)) }
	var a aimd
	assert.Equal(t, aimdHold, a.refused(t0.Add(30*time.Millisecond), t0, 17, 17, 0, true))
	assert.InDelta(t, float64(plateau(time.Second/17)), float64(a.step), 2)
	a.recount(20)
	assert.Equal(t, plateau(time.Second/20), a.step, "20 of the burst got through: 20 a second, just under")
	assert.Equal(t, time.Second/20, a.ceil, "the creep dwells short of the burst's rate")
	a.recount(15)
	assert.Equal(t, plateau(time.Second/20), a.step, "never slower")

	var s aimd
	s.refused(t0.Add(5*time.Millisecond), t0, 2, 9, 0, false) // a bucket: slow start
	step := s.step
	s.recount(20)
	assert.Equal(t, step, s.step, "slow start is not a burst's pace")
}

// TestBurstHold: a first burst's hold is the window it emptied, the
// share of the next its refusals weigh on (debt/ok), and a step; two
// windows at most.
func TestBurstHold(t *testing.T) {
	r := traits{burst: burstState{debt: 10}}
	r.pace.step = 50 * time.Millisecond
	assert.Equal(t, time.Second+500*time.Millisecond+50*time.Millisecond, r.burstHold(20), "20 through, 10 refused")
	assert.Equal(t, aimdHold, r.burstHold(10), "as many refused as got through: the next window is spent")
	r.burst.debt = 1
	assert.Equal(t, time.Second+50*time.Millisecond+50*time.Millisecond, r.burstHold(20))
	assert.Equal(t, aimdHold, r.burstHold(0), "nothing counted through: two windows")
}

func TestAIMDDwellsShortOfTheRateRefused(t *testing.T) {
	runs := func(a *aimd, n int) {
		for range n {
			a.succeeded(t0.Add(time.Hour), t0.Add(time.Hour))
		}
	}
	short := func(d time.Duration) time.Duration { return time.Duration(float64(d) * (1 + aimdGain/2)) }

	var a aimd
	a.refused(t0.Add(30*time.Millisecond), t0, 10, 10, 0, true) // a burst of 10: 10 a second
	assert.Equal(t, 100*time.Millisecond, a.ceil)
	for i := 0; a.step > short(a.ceil); i++ {
		require.Less(t, i, 20, "the creep never reached the plateau")
		runs(&a, aimdRun)
	}
	plateau := a.step
	assert.Equal(t, short(100*time.Millisecond), plateau, "the creep stops just short of the burst's rate")
	// aimdDwell runs, or as many as last aimdDwellMin: 15 runs of 20 at
	// 10 a second.
	dwell := a.dwellRuns()
	assert.Equal(t, int(aimdDwellMin/(aimdRun*plateau)), dwell)
	runs(&a, dwell*aimdRun)
	assert.Equal(t, plateau, a.step, "and dwells there")
	runs(&a, aimdRun)
	assert.Less(t, a.step, plateau, "then probes beyond it")
	assert.Zero(t, a.ceil)

	// A refusal while creeping: its interval is the new ceiling.
	for a.step > 95*time.Millisecond {
		runs(&a, aimdRun)
	}
	refused := a.step
	a.refused(t0.Add(time.Minute), t0.Add(59*time.Second), 2, 1, 0, true)
	assert.Equal(t, refused, a.ceil)
	at := 0 // runs at the plateau
	for range 200 {
		runs(&a, aimdRun)
		if a.step < short(refused) {
			break
		}
		if a.step == short(refused) {
			at++
		}
	}
	assert.Equal(t, max(aimdDwell, int(aimdDwellMin/(aimdRun*short(refused))))+1, at, "reached, dwelt at, then left the plateau below the rate refused")

	// A ceiling the pace is already past (the guess came from more than
	// got through) is dropped, not dwelt at.
	var b aimd
	b.refused(t0.Add(30*time.Millisecond), t0, 7, 10, 0, true)
	b.ceil = 2 * b.step
	runs(&b, aimdRun)
	assert.Less(t, b.step, time.Duration(float64(100*time.Millisecond)*aimdCut))
	assert.Zero(t, b.ceil)
}

// TestRefills: OpenAI's and Anthropic's quotas refill continuously, found
// by their reset fields in any spelling; a quota named like theirs under
// another family (Linear's X-RateLimit-Requests-*) does not.
func TestRefills(t *testing.T) {
	named := []headers.Quota{{Name: "requests"}, {Name: "tokens"}}
	for _, tc := range []struct {
		name string
		h    http.Header
		qs   []headers.Quota
		want bool
	}{
		{"openai canonical", http.Header{"X-Ratelimit-Reset-Tokens": {"6m0s"}}, named, true},
		{"openai lower case", http.Header{"x-ratelimit-reset-requests": {"1s"}}, named, true},
		{"anthropic canonical", http.Header{"Anthropic-Ratelimit-Input-Tokens-Reset": {"2026-01-01T00:00:00Z"}}, []headers.Quota{{Name: "input-tokens"}}, true},
		{"anthropic other quota, lower case", http.Header{"anthropic-ratelimit-priority-tokens-reset": {"2026-01-01T00:00:00Z"}}, []headers.Quota{{Name: "priority-tokens"}}, true},
		{"linear", http.Header{"X-Ratelimit-Requests-Reset": {"1700000000"}}, named, false},
		{"github", http.Header{"X-Ratelimit-Reset": {"1700000000"}}, []headers.Quota{{Name: "core"}}, false},
		{"named elsewhere only", http.Header{"X-Ratelimit-Reset-Tokens": {"1s"}}, []headers.Quota{{Name: "core"}}, false},
	} {
		assert.Equal(t, tc.want, refills(tc.h, tc.qs), tc.name)
	}
}

// TestSpan: the length of a window that starts at a client's first
// request, learnt from the request that opened each window. Every window
// bounds it; once the bounds are within spanDoubt, the shortest whole
// number of seconds they allow is the guess, and a request that finds
// the window open after the guess raises the lower bound past it.
func TestSpan(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	assert.Zero(t, p.guess(false), "nothing known")
	p.learn(true, true, false, false, true, at(0), time.Time{}, at(40)) // opens a window: sent 0, answered 40
	assert.Zero(t, p.guess(false), "no upper bound yet")
	p.learn(false, false, false, false, true, at(500), time.Time{}, at(540)) // still open at 500: longer than 460
	assert.Equal(t, 460*time.Millisecond, p.lo)
	p.learn(true, true, false, false, true, at(2000), time.Time{}, at(2040)) // the next window: the first lasted at most 2040
	assert.Equal(t, 2040*time.Millisecond, p.hi)
	assert.Equal(t, time.Second, p.guess(false), "the shortest whole second in (460ms, 2040ms]")
	assert.Equal(t, at(3040), p.end(false), "one length after the opener's answer")

	// A request that finds the window open past the guess: not one second.
	p.learn(false, false, false, false, true, at(3100), time.Time{}, at(3140))
	assert.Equal(t, 1060*time.Millisecond, p.lo)
	assert.Equal(t, 2*time.Second, p.guess(false))

	// Bounds that cross (windows on the clock, not at a request) drop
	// the upper bound: nothing is guessed until windows bound it again.
	p.learn(true, true, false, false, true, at(3200), time.Time{}, at(3240)) // at most 1.24 s: still consistent
	assert.Equal(t, 1240*time.Millisecond, p.hi)
	p.learn(true, true, false, false, true, at(4000), time.Time{}, at(4040)) // at most 0.84 s, yet more than 1.06 s
	assert.Zero(t, p.hi, "bounds that cross drop the upper bound")
	assert.Zero(t, p.guess(false))
}

// TestSpanFromAResetInWholeSeconds: a reset in whole epoch seconds,
// read as rounded up, bounds the first window's length at once.
func TestSpanFromAResetInWholeSeconds(t *testing.T) {
	var p span
	p.learn(true, true, false, false, true, t0.Add(300*time.Millisecond), t0.Add(2*time.Second), t0.Add(320*time.Millisecond))
	assert.Equal(t, 1700*time.Millisecond, p.hi, "the window ends by the reset")
	assert.Equal(t, time.Second, p.guess(false))
	assert.Equal(t, t0.Add(1320*time.Millisecond), p.end(false))
	// A window 1.0004 s long, written to the millisecond as 1.000: a
	// guess that gains less than spanGain is not acted on (quota.apply).
}

// TestSpanDoubtWithWholeSecondResets: a two-second window opened just past
// a whole second, whose reset is written rounded up, leaves three seconds
// between the bounds if the reset is read as an upper bound alone, while a
// burst keeps the lower one near zero; and the shortest whole second was
// guessed, a refused probe at each second on. Whichever way the server
// rounded, the window ends less than a second before the reset
// (span.floorBy): more than 1.96 s long, so 2 s at once.
func TestSpanDoubtWithWholeSecondResets(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	p.learn(true, true, true, false, true, at(20), at(3000), at(40))      // opened at 20 ms; the reset 2.02 s rounded up to 3
	p.learn(false, false, true, false, true, at(60), time.Time{}, at(80)) // the burst's rest
	assert.Equal(t, 2980*time.Millisecond, p.hi)
	assert.Equal(t, 1960*time.Millisecond, p.lo, "ends after 2 s (epoch seconds), opened by 40 ms")
	assert.Equal(t, 2*time.Second, p.guess(true))
	assert.Equal(t, 2*time.Second, p.guess(false))
	assert.Equal(t, at(2040), p.end(true))
}

// TestSpanFloorFromAResetRelativeToTheAnswer: a reset written as seconds
// from the answer ("t=3", rounded up) was written once the window had
// opened and once the request had left, whenever the answer came back:
// the window is more than 2 s long, and more than that from the request's
// sending, less when the window opened. A reset a window later than the
// bounds allow (an answer of the next window) raises nothing.
func TestSpanFloorFromAResetRelativeToTheAnswer(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	p.learn(true, true, true, false, true, at(20), at(3045), at(45)) // the opener: "3" read at 45 ms
	assert.Equal(t, 2*time.Second, p.lo, "more than 2 s: its own request opened it")
	assert.Equal(t, 3*time.Second, p.guess(true))
	// Sent 500 ms after the opener's answer, "3" again: more than 2.5 s.
	p.learn(false, false, true, false, true, at(545), at(3570), at(570))
	assert.Equal(t, 2500*time.Millisecond, p.lo)
	assert.Equal(t, 3*time.Second, p.guess(true))
	// An answer of a later window, read as of this one: past the upper
	// bound, it raises nothing.
	p.floorBy(at(6120), at(3100), at(3120))
	assert.Equal(t, 2500*time.Millisecond, p.lo)
}

// TestSpanReadsResetsRoundedDown: bounds that cross with resets read as
// rounded up read them as rounded down from then on — the window ends
// within the second after one (koa-ratelimit's log over Redis writes
// its oldest entry's expiry rounded down) — so a two-second window
// opened at 0.3 s, whose reset says 2, is found to end at 2.3 s once
// probes at 2 and 2.1 found it spent (not probed again at 2.5, and at
// 3); crossed again, resets bound nothing.
func TestSpanReadsResetsRoundedDown(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	p.learn(true, true, true, false, true, at(280), at(2000), at(300)) // opened at 0.3 s; reset 2
	assert.Equal(t, 1720*time.Millisecond, p.hi, "read as rounded up: at most 1.72 s")
	assert.Equal(t, time.Second, p.guess(true))
	// Probes at the reset and a tenth after it find the window still
	// spent: longer than 1.8 s, where the reset read as rounded up said
	// at most 1.72.
	p.learn(false, false, true, true, true, at(2000), time.Time{}, at(2020))
	assert.False(t, p.down(), "within the opener's round trip of the bound")
	p.learn(false, false, true, true, true, at(2100), time.Time{}, at(2120))
	assert.True(t, p.down())
	p.boundBy(at(2000)) // the refused probe's answer wrote the same reset (quota.apply)
	assert.Equal(t, 2720*time.Millisecond, p.hi, "read as rounded down: within the second after it")
	assert.Equal(t, 2*time.Second, p.guess(true))
	end := p.end(true)
	assert.Equal(t, at(2300), end)
	got, ok := p.downTo(end, at(2000))
	assert.True(t, ok)
	assert.Equal(t, at(2300), got, "the window ends past the reset it wrote")
	got, ok = p.downTo(at(3400), at(2000))
	assert.True(t, ok)
	assert.Equal(t, at(3000), got, "and within the second after it")
	_, ok = p.downTo(at(1900), at(2000))
	assert.False(t, ok, "an end before the reset is no rounding down")

	// Windows that do not start at a request cross the rounded-down
	// bounds too: resets bound nothing from then on.
	p.learn(true, true, true, false, true, at(2300), at(4000), at(2320)) // the next window: at most 2.72 s
	p.learn(false, false, true, true, true, at(5400), time.Time{}, at(5420))
	assert.True(t, p.loose())
	assert.Zero(t, p.hi)
	p.boundBy(at(6000))
	assert.Zero(t, p.hi, "a loose span takes no bound from a reset")
	_, ok = p.downTo(at(6500), at(6000))
	assert.False(t, ok)
}

// TestQuotaAheadStepIsASlidingCounter: a reset told finer than the
// second that two answers or more wrote, then one a whole window further
// on while the old one was still over half a window away, is a later
// window's end than the one counting — this project's sliding window
// (server.New over a repository) says when its count is all gone, the
// end of the epoch's window after the current one — and the quota is
// taken for a sliding counter of that window. A fixed window's reset
// steps when it has passed, and a bucket's or a log's moves with every
// answer: neither is one.
func TestQuotaAheadStepIsASlidingCounter(t *testing.T) {
	ms := time.Millisecond
	answer := func(q *quota, remaining int64, reset, now time.Duration) {
		r := t0.Add(reset)
		q.apply(&headers.Quota{Limit: 10, Remaining: remaining, Reset: r}, false, true, r, false, false, 1, t0.Add(now-100*ms), t0.Add(now))
	}

	var c quota
	answer(&c, 8, 1805*ms, 150*ms)
	answer(&c, 7, 1806*ms, 160*ms) // the same end, placed by another answer's way back
	answer(&c, 0, 916*ms, 200*ms)  // at zero it says when one more is free: passed over
	require.False(t, c.sliding())
	answer(&c, 3, 2805*ms, 1200*ms) // the epoch's window turned; the old end is 0.6 s away
	assert.True(t, c.sliding(), "a reset a window on, the old one still ahead: a sliding counter")
	assert.Equal(t, time.Second, c.window)
	assert.False(t, c.log, "it steps by whole windows: a counter, not a log")

	var many quota       // more answers at one end than kept counts
	for i := range 256 { // a uint8 count that wrapped would read 0
		answer(&many, 5, 1805*ms, time.Duration(150+i)*ms)
	}
	answer(&many, 3, 2805*ms, 1200*ms)
	assert.True(t, many.sliding(), "kept stops at 255, it does not wrap")

	var once quota
	answer(&once, 8, 1805*ms, 150*ms)
	answer(&once, 3, 2805*ms, 1200*ms)
	assert.False(t, once.sliding(), "one answer's reset is no end the server keeps")

	var fixed quota
	answer(&fixed, 8, 1000*ms, 150*ms)
	answer(&fixed, 7, 1001*ms, 160*ms)
	answer(&fixed, 9, 2010*ms, 1010*ms) // its window ended: the next one's end
	assert.False(t, fixed.sliding(), "a fixed window steps once its end has passed")

	var moving quota
	for i, r := range []time.Duration{1000 * ms, 1100 * ms, 1200 * ms, 2200 * ms} {
		answer(&moving, int64(8-i), r, time.Duration(100+10*i)*ms)
	}
	assert.False(t, moving.sliding(), "a reset that moves with every answer (a bucket's, a log's) keeps no end")
}

// TestSpanSparesFarWindows: span learns windows of seconds to minutes
// (quota.apply). The answers of a window whose reset in whole seconds
// lies more than spanFar ahead (GitHub's hour) are not learned from —
// nothing is bounded, nothing guessed — until its end comes within
// spanFar; a window that turned meanwhile is not learned at all (its
// opening was not seen). A window a minute long is learned from every
// answer.
func TestSpanSparesFarWindows(t *testing.T) {
	answer := func(q *quota, remaining int64, reset, sent time.Time) {
		now := sent.Add(20 * time.Millisecond)
		q.apply(&headers.Quota{Limit: 100, Remaining: remaining, Reset: reset}, false, true, reset, false, true, 1, sent, now)
	}
	end := t0.Add(time.Hour)
	var hour quota
	for i := range 5 {
		answer(&hour, int64(99-i), end, t0.Add(time.Duration(i)*time.Millisecond))
	}
	assert.Zero(t, hour.span.hi, "an hour away: the reset bounds nothing yet")
	answer(&hour, 50, end, end.Add(-5*time.Minute))
	assert.NotZero(t, hour.span.hi, "within spanFar of its end, the window's first answer known: learned")

	// The next window turns while its end is far: not learned.
	next := end.Add(time.Hour)
	answer(&hour, 99, next, end.Add(time.Second))
	assert.True(t, hour.span.openAt.IsZero(), "a window turned far from its end: its opening is not learned")
	answer(&hour, 40, next, next.Add(-5*time.Minute))
	assert.True(t, hour.span.openAt.IsZero())

	var minute quota
	for i := range 5 {
		answer(&minute, int64(99-i), t0.Add(time.Minute), t0.Add(time.Duration(i)*time.Millisecond))
	}
	assert.False(t, minute.span.openAt.IsZero(), "a minute's window is learned")
	assert.NotZero(t, minute.span.hi)
}

// TestQuotaFellIsALog: a count that falls while the reset stays where it
// was is no fixed window's (whose count only grows until its end, the
// next writing another reset): a request sent after the answer that
// said none remained finds two, with the same reset in whole seconds —
// a sliding log (koa-ratelimit's over Redis), taken for one, paced by
// what it said remains. An answer to a request sent before that one came
// back, or one with a new reset, shows no fall.
func TestQuotaFellIsALog(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	reset := at(2000)
	window := func(q *quota) {
		for i := range 5 { // a burst of five, the first answered first
			q.apply(&headers.Quota{Limit: 5, Remaining: int64(4 - i), Reset: reset, Window: 2 * time.Second}, false, true, reset, false, true, int64(i+1), at(0), at(20))
		}
		require.False(t, q.sliding())
		require.Zero(t, q.rmin)
	}

	var q quota
	window(&q)
	q.apply(&headers.Quota{Limit: 5, Remaining: 2, Reset: reset, Window: 2 * time.Second}, false, true, reset, false, true, 6, at(2050), at(2070))
	assert.True(t, q.sliding())
	assert.True(t, q.log)
	assert.Equal(t, 2*time.Second, q.window)
	q.claim(at(2080), 1, false)
	assert.Zero(t, q.pace(at(2080), 1, 1), "what a log says remains is free now: one more fits")
	q.claim(at(2080), 1, false)
	assert.Positive(t, q.pace(at(2080), 1, 2), "spent: the next is paced")

	var early quota // sent before the answer that said none remain came back
	window(&early)
	early.apply(&headers.Quota{Limit: 5, Remaining: 2, Reset: reset, Window: 2 * time.Second}, false, true, reset, false, true, 6, at(10), at(2070))
	assert.False(t, early.sliding())

	var next quota // a new window's reset
	window(&next)
	next.apply(&headers.Quota{Limit: 5, Remaining: 4, Reset: at(4000), Window: 2 * time.Second}, false, true, at(4000), false, true, 6, at(2050), at(2070))
	assert.False(t, next.sliding())
}

// TestQuotaFellReadsResetsDown: a count that falls at the same reset
// when span's bounds, its resets read as rounded up, leave no whole
// second between them (a probe of the first window's end, delayed into
// the next by the way there, showed no crossing): the resets are read
// as rounded down, the window is the whole second that allows, and the
// quota slides without being taken for a log (a sliding counter's count
// falls so too). Without it, koa-ratelimit's log over Redis stayed a
// fixed window to the quota and drew 18 refusals per 40 units under
// 200 ms of jitter (TestSlidingLogUnderJitter).
func TestQuotaFellReadsResetsDown(t *testing.T) {
	var q quota
	q.heard, q.limit, q.rmin, q.known, q.at = 2, 5, 0, true, t0
	q.said = wallOf(t0.Add(1700 * time.Millisecond).Truncate(time.Second))
	q.span = span{openAt: t0, lo: 1684 * time.Millisecond, hi: 1700 * time.Millisecond}
	require.Zero(t, q.span.guess(true), "no whole second between the bounds")
	reset := q.said.time()
	w, log := q.fell(&headers.Quota{Limit: 5, Remaining: 2, Reset: reset}, t0.Add(1900*time.Millisecond))
	assert.Equal(t, 2*time.Second, w)
	assert.False(t, log, "a log or a sliding counter: its next resets tell")
	assert.True(t, q.span.down())
	assert.Equal(t, 2700*time.Millisecond, q.span.hi, "a second more, read as rounded down")

	q.span = span{openAt: t0, lo: 1500 * time.Millisecond, hi: 2100 * time.Millisecond}
	w, log = q.fell(&headers.Quota{Limit: 5, Remaining: 2, Reset: reset}, t0.Add(1900*time.Millisecond))
	assert.Equal(t, 2*time.Second, w)
	assert.True(t, log, "a window span could tell: a log, as before")
	assert.False(t, q.span.down())
}

// TestSlidingLogUnderJitter: koa-ratelimit's log over Redis at 5 per 2 s
// with way times that vary by up to 200 ms (a loaded machine: one
// real-server run beside a CPU hog drew 26 refusals per 40 units
// there), in fake time, at a phase and seed that drew 18 before
// TestQuotaFellReadsResetsDown's mend (now 9).
func TestSlidingLogUnderJitter(t *testing.T) {
	b := modelBehaviourOf(t, "i/koa-ratelimit redis")
	r := runModel(t, b, modelRun{rate: 5, window: 2 * time.Second, workers: 10, total: 40, method: b.method,
		latency: 5 * time.Millisecond, jitter: 200 * time.Millisecond, phase: 1300 * time.Millisecond, seed: 1})
	r.holds(t, 11, 1.35)
}

// TestSpanTrustsAnOpeningOverAFloor: bounds with no whole second between
// them, the lower past the one under the upper, guess the upper's whole
// second: a window's opening set the upper, and a reset read as rounded
// up may have floored the lower too high. Flask-Limiter's moving window
// (its reset: when its log will be empty, plus a second) 50 ms ± 25 ms
// away, its first request 725 ms into the clock's second: its floor put
// a window of one second at 1.060-1.174 s, and every window was waited
// out to that reset, two seconds (1.82x; one fresh-clone CI run failed on
// the real server's, 1.86x).
func TestSpanTrustsAnOpeningOverAFloor(t *testing.T) {
	p := span{lo: 1060 * time.Millisecond, hi: 1174 * time.Millisecond, floored: true}
	assert.Equal(t, time.Second, p.guess(true))
	p.floored = false
	assert.Zero(t, p.guess(true), "a request the window counted set the lower: it holds")
	p = span{lo: 1900 * time.Millisecond, hi: 2100 * time.Millisecond}
	assert.Equal(t, 2*time.Second, p.guess(true), "a whole second between: as before")
	p = span{lo: 600 * time.Millisecond, hi: 900 * time.Millisecond}
	assert.Zero(t, p.guess(true), "no whole second under hi: no guess")

	b := modelBehaviourOf(t, "j/flask-limiter moving window")
	for _, seed := range []uint64{1, 3} {
		r := runModel(t, b, modelRun{rate: 10, window: time.Second, workers: 10, total: 80, method: b.method,
			latency: 50 * time.Millisecond, jitter: 25 * time.Millisecond, phase: 725 * time.Millisecond, seed: seed})
		r.holds(t, 5, 1.3) // measured 0, 1.08x and 1.22x
	}
}

// TestShortWindowsAreNotSpread: the last tenth of a window of ten seconds
// or less is not spread until its end (spreadMin), where spreading gains
// nothing, and a log, whose entries each stay a window, loses what it
// holds in the next window too. At 20 per 10 s, 10 goroutines 20 ms away:
// this project's sliding log took 1.54x spread (the first answer's reset,
// told to the millisecond, lies just beyond ten seconds),
// koa-ratelimit's log over Redis drew 43 refusals, express's fixed window
// took 1.06x.
func TestShortWindowsAreNotSpread(t *testing.T) {
	holdEach(t, modelRun{rate: 20, window: 10 * time.Second, workers: 10, total: 240,
		latency: 20 * time.Millisecond, jitter: 10 * time.Millisecond}, []behaviourBound{
		{"f/own sliding_log", 5, 1.05},     // measured 0, 1.007 (0, 1.535 spread)
		{"i/koa-ratelimit redis", 5, 1.05}, // 1, 1.012 (43, 1.056)
		{"a/express draft-7", 5, 1.05},     // 0, 1.003 (0, 1.057)
	})
}

// TestBucketFound: a quota whose time until full, told to the
// millisecond, grows with what is spent at one time a unit (a token or
// leaky bucket, GCRA: this project's server.New writes such resets) is
// found to refill once an answer that says twice as much spent agrees
// with an earlier one, and from then on a unit comes back every time a
// unit; a fixed window's reset, the same for every answer of a window,
// never makes it one.
func TestBucketFound(t *testing.T) {
	per := 100 * time.Millisecond // 10 a second, burst 5
	answer := func(q *quota, used int64, now time.Time) {
		q.apply(&headers.Quota{Limit: 5, Remaining: 5 - used, Reset: now.Add(time.Duration(used) * per)}, false, true, now.Add(time.Duration(used)*per), false, false, 1, now, now)
	}
	var b quota
	answer(&b, 1, t0)
	assert.False(t, b.refill, "one answer shows nothing")
	answer(&b, 2, t0.Add(time.Millisecond))
	assert.True(t, b.refill, "twice as much spent, twice as long until full")
	answer(&b, 5, t0.Add(2*time.Millisecond)) // spent: full half a second on
	now := t0.Add(2*time.Millisecond + 250*time.Millisecond)
	assert.Equal(t, int64(2), b.avail(now, 0), "a unit back every 100 ms")

	var f quota // a fixed window: every answer of it ends at the same time
	end := t0.Add(800 * time.Millisecond)
	for i, used := range []int64{1, 2, 4, 5} {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		f.apply(&headers.Quota{Limit: 5, Remaining: 5 - used, Reset: end}, false, true, end, false, false, 1, now, now)
	}
	assert.False(t, f.refill, "a fixed window is not a bucket")
	assert.Zero(t, f.avail(t0.Add(500*time.Millisecond), 0), "nothing back before its end")
}

// TestBucketNotFoundAcrossWindows: a fixed window of 20 a second whose
// resets are told relative to each answer (X-RateLimit-Reset-After) on a
// loaded machine. The sample (1 spent, 393 ms left, read 10 ms after it
// was sent) puts the window's end 10 ms late; the window is spent; and the
// next window's answers, back a millisecond before that end and out of
// their order, say 2, 5, 4 and 3 spent with a second left — the last,
// 333 ms a unit, within a quarter of the sample's 393 ms. They are a new
// window's: a bucket of 393 ms a unit that had none left 380 ms before
// cannot have 17 now. (Before: the window taken for a bucket full in
// 5.5 s, and bench's TestTransportAgainstOurServer at 6.2 s where 4.2 s
// were enough.) A bucket whose answers come back as late is still found.
func TestBucketNotFoundAcrossWindows(t *testing.T) {
	answer := func(q *quota, used int64, reset, sent, now time.Time) {
		q.apply(&headers.Quota{Limit: 20, Remaining: 20 - used, Reset: reset}, false, true, reset, false, true, 1, sent, now)
	}
	var q quota
	end := t0.Add(403 * time.Millisecond) // 393 ms after the answer at 10 ms
	answer(&q, 1, end, t0, t0.Add(10*time.Millisecond))
	answer(&q, 20, end, t0.Add(12*time.Millisecond), t0.Add(20*time.Millisecond))
	next := t0.Add(1401 * time.Millisecond) // the server's window turned at 401 ms
	sent := t0.Add(401 * time.Millisecond)
	for _, used := range []int64{2, 5, 4, 3} {
		answer(&q, used, next, sent, sent.Add(time.Millisecond))
	}
	assert.False(t, q.refill, "a new window's answers are not a bucket's")

	var b quota
	per := 100 * time.Millisecond
	for i, used := range []int64{1, 2} {
		sent := t0.Add(time.Duration(i) * 15 * time.Millisecond) // after the first came back
		now := sent.Add(10 * time.Millisecond)
		answer(&b, used, now.Add(time.Duration(used)*per), sent, now)
	}
	assert.True(t, b.refill, "twice as much spent, twice as long until full")
}

// TestRisingRemainingIsNotSpread: a quota told to the millisecond whose
// later answer, to a request sent after the last, says more remains with
// the same end (a weighted sliding window that says when its count is
// all gone) gets back what it counts before that end: what is left is
// not spread until it, as a fixed window's last tenth is.
func TestRisingRemainingIsNotSpread(t *testing.T) {
	end := t0.Add(15*time.Second + 437*time.Millisecond) // told to the millisecond
	var q quota
	q.apply(&headers.Quota{Limit: 150, Remaining: 10, Reset: end}, false, true, end, false, false, 1, t0, t0)
	assert.Positive(t, q.pace(t0, 1, 0), "a tenth left, fifteen seconds from the end: spread")
	later := t0.Add(900 * time.Millisecond)
	q.apply(&headers.Quota{Limit: 150, Remaining: 25, Reset: end}, false, true, end, false, false, 2, later, later)
	assert.True(t, q.known)
	later = later.Add(time.Millisecond)
	q.apply(&headers.Quota{Limit: 150, Remaining: 10, Reset: end}, false, true, end, false, false, 3, later, later)
	assert.Zero(t, q.pace(later, 1, 0), "what remains comes back before the end: not spread")

	var f quota // a fixed window: more remains only in the next one, whose end is a window later
	f.apply(&headers.Quota{Limit: 150, Remaining: 10, Reset: end}, false, true, end, false, false, 1, t0, t0)
	next := end.Add(30 * time.Second)
	f.apply(&headers.Quota{Limit: 150, Remaining: 149, Reset: next}, false, true, next, false, false, 2, end, end)
	f.apply(&headers.Quota{Limit: 150, Remaining: 10, Reset: next}, false, true, next, false, false, 3, end, end.Add(time.Second))
	assert.Positive(t, f.pace(end.Add(time.Second), 1, 0), "a fixed window's last tenth is spread")
}

// TestAIMDSlowStartProvesThePaceItSends: slow start doubles the rate only
// on a run of answers to requests sent since the last change; answers to
// requests sent at the old pace prove nothing of the new one.
func TestAIMDSlowStartProvesThePaceItSends(t *testing.T) {
	var a aimd
	a.refused(t0.Add(30*time.Millisecond), t0, 1, 2, 0, true) // one through, then refused: slow start
	require.True(t, a.slow)
	step, changed := a.step, t0.Add(30*time.Millisecond)
	for i := range 10 {
		a.succeeded(changed.Add(time.Duration(i+1)*time.Millisecond), changed.Add(-time.Millisecond))
	}
	assert.Equal(t, step, a.step, "answers to requests sent before the refusal prove nothing")
	for i := range aimdStartRun {
		a.succeeded(changed.Add(time.Second+time.Duration(i)*time.Millisecond), changed.Add(time.Millisecond))
	}
	assert.Equal(t, step/2, a.step, "a run sent at the pace doubles the rate")
	for i := range aimdStartRun {
		a.succeeded(changed.Add(2*time.Second+time.Duration(i)*time.Millisecond), changed.Add(time.Millisecond))
	}
	assert.Equal(t, step/2, a.step, "sent before the doubling: nothing")
}

// TestAIMDHalvedSearchesBack: a refusal of a pace no run proved halves
// the rate, and the runs after it search halfway back up to the rate
// refused rather than creep a percent a run from half.
func TestAIMDHalvedSearchesBack(t *testing.T) {
	late := t0.Add(time.Hour)
	var a aimd
	a.refused(t0.Add(30*time.Millisecond), t0, 10, 10, 0, true) // a burst: 10 a second
	a.refused(t0.Add(3*time.Second), t0.Add(2*time.Second), 2, 1, 0, true)
	require.Zero(t, a.safe, "the pace after the cut is not proven yet")
	refused := a.step
	a.refused(t0.Add(4*time.Second), t0.Add(3*time.Second), 1, 1, 0, true)
	require.Equal(t, 2*refused, a.step, "refused again before a run: half the rate")
	for range aimdRun {
		a.succeeded(late, late)
	}
	assert.Equal(t, time.Duration(2/(1/float64(2*refused)+1/float64(refused))), a.step, "halfway back up in one run")
}

// TestAIMDNearMissSearchesBackFromNearBy: a pace no run proved, refused
// only after a run of its own successes long enough to measure (the pace
// came near the server's rate), steps back by aimdSearch, not half the
// rate; a refusal after fewer successes, or a shorter run, still halves.
func TestAIMDNearMissSearchesBackFromNearBy(t *testing.T) {
	late := t0.Add(time.Hour)
	start := func() *aimd {
		var a aimd
		a.refused(t0.Add(30*time.Millisecond), t0, 10, 10, 0, true) // a burst: 10 a second
		a.refused(t0.Add(3*time.Second), t0.Add(2*time.Second), 2, 1, 0, true)
		require.Zero(t, a.safe, "the pace after the cut is not proven yet")
		return &a
	}
	a := start()
	refused := a.step
	for range aimdSamples * 3 { // a run of a second and more at this pace
		a.succeeded(late, late)
	}
	require.GreaterOrEqual(t, time.Duration(a.good)*a.step, aimdSpan)
	a.refused(late, late.Add(-time.Second), aimdSamples*3, 1, 0, true)
	assert.Equal(t, time.Duration(float64(refused)*aimdSearch), a.step, "near the rate: a step back, not half")
	assert.Equal(t, refused, a.tight, "and a search back up to the pace refused")

	a = start()
	for range aimdSamples - 1 {
		a.succeeded(late, late)
	}
	a.refused(late, late.Add(-time.Second), aimdSamples-1, 1, 0, true)
	assert.Equal(t, 2*refused, a.step, "too few successes to say: half the rate")
}

// TestAIMDReopenedPacesTheDebt: a burst of 20 taught 20 a second; its
// window reopened between 7.7 s and 14.1 s after it opened, so the pace
// starts halfway (in rate) between 20 a 14.1 s and 20 a 7.7 s and
// searches up towards the faster; a window under aimdHold, a pace
// already slower, or too small a quota changes nothing.
func TestAIMDReopenedPacesTheDebt(t *testing.T) {
	burst := func() aimd {
		var a aimd
		a.refused(t0.Add(10*time.Millisecond), t0, 20, 10, 0, true)
		require.False(t, a.slow)
		return a
	}
	a := burst()
	now := t0.Add(14200 * time.Millisecond)
	a.reopened(now, 20, 7700*time.Millisecond, 14100*time.Millisecond)
	hi, lo := 14100*time.Millisecond/20, 7700*time.Millisecond/20
	assert.Equal(t, lo, a.tight, "searched up towards the rate lo says")
	assert.Equal(t, time.Duration(2/(1/float64(hi)+1/float64(lo))), a.step, "from halfway")
	assert.Zero(t, a.safe)
	assert.Equal(t, now, a.since, "proven only by requests sent from now")

	for _, c := range []struct {
		name      string
		quota     int
		lo, hi    time.Duration
		unchanged bool
	}{
		{"a window under aimdHold", 20, time.Second, 1900 * time.Millisecond, true},
		{"too few to say", aimdSamples - 1, 7 * time.Second, 14 * time.Second, true},
		{"a pace already slower", 20, 0, 10 * time.Millisecond, true},
	} {
		a := burst()
		was := a
		a.reopened(now, c.quota, c.lo, c.hi)
		assert.Equal(t, was, a, c.name)
	}
}

// TestAIMDRunOutlastsTheBurst: in slow start a run proves a doubled pace
// only past the burst the server showed (counted until the first
// refusal's pause ends), or as many as the pace sends in
// aimdShownSpan if fewer.
func TestAIMDRunOutlastsTheBurst(t *testing.T) {
	late := t0.Add(time.Hour)
	var a aimd
	a.refused(t0.Add(20*time.Millisecond), t0, 12, 50, 0, false) // a first wave of 50, 12 through so far
	a.settleWave(20)                                             // 20 of the wave through in all
	require.True(t, a.slow)
	require.Equal(t, 20, a.shown)
	guess := time.Second / 24
	guess = time.Duration(float64(guess) * aimdCut)
	require.Equal(t, guess, a.step,
		"twice the 12 through, not the 50 sent: a guess of 48 a second drew 57 refusals and 1.21x from 50 goroutines")
	for range int(aimdShownSpan / a.step) { // 24 a second: a run of 21 would take 0.9 s, half a second is 11
		a.succeeded(late, late)
	}
	step := a.step // doubled: 48 a second, a run of 21 takes under half a second
	require.Equal(t, guess/2, step)
	for range 20 {
		a.succeeded(late, late)
	}
	assert.Equal(t, step, a.step, "20, the window's burst, prove nothing")
	a.succeeded(late, late)
	assert.Equal(t, step/2, a.step, "the 21st does")

	var b aimd
	b.refused(t0.Add(20*time.Millisecond), t0, 0, 2, 0, false) // 2 in flight: 2 a second
	b.settleWave(40)
	step = b.step // 2 a second: half a second is one request
	for range aimdStartRun {
		b.succeeded(late, late)
	}
	assert.Equal(t, step/2, b.step, "a slow pace: the usual run of two")
}

// TestRoundTripJitter: the round trip is kept as TCP keeps it (RFC 6298),
// and its jitter, four mean deviations, is at most jitterMax.
func TestRoundTripJitter(t *testing.T) {
	var rt roundTrip
	rt.sample(20 * time.Millisecond)
	assert.Equal(t, 20*time.Millisecond, rt.srtt)
	assert.Equal(t, jitterMax, rt.jitter(), "the first sample's deviation is half of it: 40 ms, capped")
	for i := range 200 {
		rt.sample(time.Duration(20+i%2*4) * time.Millisecond) // 20, 24, 20, 24...
	}
	assert.InDelta(t, float64(22*time.Millisecond), float64(rt.srtt), float64(time.Millisecond))
	assert.InDelta(t, float64(8*time.Millisecond), float64(rt.jitter()), float64(time.Millisecond), "±2 ms: four deviations of 2 ms")
	for range 200 {
		rt.sample(time.Second + time.Duration(rand.IntN(400))*time.Millisecond) // a server's slow work
	}
	assert.Equal(t, jitterMax, rt.jitter())
}

// TestSpanEndsAheadOfTheAnswers: 100 ms each way. A window that opened
// when its first request arrived, 100 ms before its answer did, ends a
// second later by the server's clock; a request sent a length after that
// answer reaches the next window 200 ms late. Once spanTimed answers are
// timed, the end is brought forward by the shortest round trip less a
// margin (a quarter of it at that distance, 50 ms): a request sent then
// reaches the next window 50 ms after it opens. Before, it is not: the
// first answers are few, and a connection's first carries its setup.
func TestSpanEndsAheadOfTheAnswers(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	p.learn(true, true, false, false, true, at(0), time.Time{}, at(200)) // arrived at 100; its window ends at 1100
	for i := range spanTimed - 2 {
		p.learn(false, false, false, false, true, at(10+i), time.Time{}, at(210+i)) // the rest of the wave, with no room to tell
	}
	assert.Zero(t, p.ways(), "one answer short of spanTimed: not yet")
	p.learn(false, false, false, false, true, at(900), time.Time{}, at(1100)) // arrived at 1000, counted: the window lasted 900 ms at least
	assert.Equal(t, 200*time.Millisecond, p.ways())
	assert.Equal(t, 900*time.Millisecond, p.lo, "700 ms after the opener's answer, and the 200 ms of the two ways")
	p.learn(true, true, false, false, true, at(1300), time.Time{}, at(1500)) // arrived at 1400, in the next window
	assert.Equal(t, time.Second, p.guess(false))
	assert.Equal(t, at(2350), p.end(false), "the window opened at 1400 by the server's clock ends at 2400; sent at 2350, a request arrives at 2450")
}

// TestSpanDistrustsTheWays: the shortest round trip bounds the two ways
// only if the server counts a request as it arrives. One that spends
// 20 ms before it counts (authentication before the limiter), 10 ms
// each way, counts the probe sent at the end brought forward in the
// spent window: that halves the ways the end is brought forward by from
// then on (the length's lower bound still counts them whole: read too
// long there, they put the next probe later, never earlier).
func TestSpanDistrustsTheWays(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	p.learn(true, true, false, false, true, at(0), time.Time{}, at(40)) // counted at 30, answered at 40
	for i := range spanTimed {
		p.learn(false, false, false, false, true, at(40+i), time.Time{}, at(80+i))
	}
	p.learn(true, true, false, false, true, at(1000), time.Time{}, at(1040)) // the next window opens at 1030
	p.learn(true, true, false, false, true, at(2000), time.Time{}, at(2040)) // and the next at 2030
	require.Equal(t, time.Second, p.guess(false))
	assert.Equal(t, 40*time.Millisecond, p.ways())
	end := p.end(false)
	assert.Equal(t, at(3010), end, "40 ms brought forward but a quarter")

	roomy := p
	roomy.learn(false, false, false, false, true, end, time.Time{}, end.Add(40*time.Millisecond)) // a request of a window with room: tells nothing of the ways
	assert.Zero(t, roomy.distrust)
	p.learn(false, false, false, true, true, end, time.Time{}, end.Add(40*time.Millisecond)) // a probe of the spent window, which the server (20 ms late to count) counted in it
	assert.Equal(t, uint8(1), p.distrust)
	assert.Equal(t, 20*time.Millisecond, p.ways())
	assert.Equal(t, 40*time.Millisecond, p.shortest())
}

// TestSpanLoopbackWays: round trips under spanWaysMin are mostly the
// server's own time, not the ways: nothing is brought forward.
func TestSpanLoopbackWays(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var p span
	for i := range spanTimed + 1 {
		p.learn(false, false, false, false, true, at(i), time.Time{}, at(i+12))
	}
	assert.Zero(t, p.ways(), "12 ms: a loaded loopback")
}

// TestQuotaAskAgain: a window quota whose reset has passed is asked about
// again at once when it has no room left, or when its reset is the
// server's; when span brought its reset forward and it has room, only
// once the way back its reset was brought forward by has passed too: the
// requests sent meanwhile open the next window, and their answers say
// what it holds.
func TestQuotaAskAgain(t *testing.T) {
	q := quota{name: "requests", limit: 10}
	q.known, q.rmin, q.reset = true, 4, t0
	assert.True(t, q.stale(t0))
	assert.True(t, q.askAgain(t0, 1), "nothing timed: the reset is the server's")
	q.span.least, q.span.timed = int32((200*time.Millisecond)/time.Microsecond), spanTimed
	assert.True(t, q.askAgain(t0, 1), "no length guessed: the reset is the server's")
	q.span.openAt, q.span.lo, q.span.hi = t0.Add(-time.Second), 500*time.Millisecond, 1100*time.Millisecond
	require.Equal(t, time.Second, q.span.guess(true))
	assert.False(t, q.askAgain(t0, 1), "room for 3 more: the answers on their way will say")
	assert.False(t, q.askAgain(t0.Add(145*time.Millisecond), 1))
	assert.True(t, q.askAgain(t0.Add(150*time.Millisecond), 1), "the way back has passed (150 ms: the round trip less a quarter)")
	assert.True(t, q.askAgain(t0, 4), "no room: probe at once")
}

// TestStillCountedFindsALog: once a window whose end its server told to
// the millisecond has passed with nothing left, the first request sent
// after that end comes back. Most of the limit still counted, at another
// end than the one said before: a log (this project's sliding log, whose
// answer at zero says when its oldest entry leaves). The same end: a
// fixed window the request reached too early. Said, before, to be whole
// again further ahead than a window and a quarter: a sliding counter
// (whole two windows after its last count). Never said to be whole a
// window on: a bucket whose quota is stated as its rate (this project's
// policies: 10 a second, burst 5, q=10;w=1), which never has more than
// half of it. Most of it free: a fixed window that started over.
func TestStillCountedFindsALog(t *testing.T) {
	end := t0.Add(time.Second)
	spent := func() *quota {
		q := &quota{limit: 10}
		q.known, q.fine, q.heard, q.reset, q.said = true, true, 12, end, wallOf(end)
		// A log's: whole a window after its newest entry.
		q.reachTo(&headers.Quota{Limit: 10, Remaining: 9, Reset: t0.Add(1050 * time.Millisecond)}, t0.Add(50*time.Millisecond))
		q.span = span{openAt: t0, lo: 950 * time.Millisecond, hi: 1040 * time.Millisecond}
		return q
	}
	after := end.Add(2 * time.Millisecond)
	next := &headers.Quota{Limit: 10, Remaining: 0, Reset: end.Add(45 * time.Millisecond)}
	assert.Equal(t, time.Second, spent().stillCounted(next, after), "a log: span's window")

	told := *next
	told.Window = 2 * time.Second
	long := spent()
	long.reachTo(&headers.Quota{Limit: 10, Remaining: 9, Reset: t0.Add(2050 * time.Millisecond)}, t0.Add(50*time.Millisecond))
	assert.Equal(t, 2*time.Second, long.stillCounted(&told, after), "the window the server says")

	same := *next
	same.Reset = end
	assert.Zero(t, spent().stillCounted(&same, after), "the end said before: a fixed window reached too early")
	assert.Zero(t, spent().stillCounted(next, end.Add(-time.Millisecond)), "sent before the end")

	free := *next
	free.Remaining = 9
	assert.Zero(t, spent().stillCounted(&free, after), "a fixed window that started over")

	counter := spent()
	counter.reachTo(&headers.Quota{Limit: 10, Remaining: 3, Reset: t0.Add(1900 * time.Millisecond)}, t0.Add(60*time.Millisecond))
	assert.Zero(t, counter.stillCounted(next, after), "said to be whole 1.84 s ahead: a sliding counter of 1 s")

	bucket := spent()
	bucket.slack = 0
	bucket.reachTo(&headers.Quota{Limit: 10, Remaining: 4, Reset: t0.Add(150 * time.Millisecond)}, t0.Add(50*time.Millisecond))
	assert.Zero(t, bucket.stillCounted(next, after), "never said to be whole a window on: a bucket stated as its rate")

	whole := spent()
	whole.fine = false
	assert.Zero(t, whole.stillCounted(next, after), "an end in whole seconds is no exact word (fell reads those)")
}

// TestOwnSlidingLogIsTimedByItsSends: this project's sliding log (server.New
// over limiters.NewSlidingLog) says, at zero, when its oldest entry
// leaves, and otherwise that it is whole again a window on: taken for a
// fixed window, each window's end was probed alone, the probe's answer
// waited for, and the windows drifted a round trip late, every window
// (1.37x at 100 ms ± 50 ms each way, 1.80x at 200 ms). Found to be a log
// (stillCounted), its requests are timed by the send log: a window after
// the one of ours whose place each takes.
func TestOwnSlidingLogIsTimedByItsSends(t *testing.T) {
	own := []behaviourBound{{"f/own sliding_log", 0, 1.25}} // measured 0, 1.168 (0, 1.368 before)
	holdEach(t, modelRun{rate: 10, workers: 10, total: 100, latency: 100 * time.Millisecond, jitter: 50 * time.Millisecond}, own)
	t.Run("200ms", func(t *testing.T) {
		// 0, 1.324 (0, 1.798 before)
		holdEach(t, modelRun{rate: 10, workers: 10, total: 100, latency: 200 * time.Millisecond, jitter: 100 * time.Millisecond},
			[]behaviourBound{{"f/own sliding_log", 0, 1.45}})
	})
	t.Run("30 per 3s", func(t *testing.T) {
		// Its resets step where its entries fall, not by windows: they
		// do not shorten the window (0, 1.034; 7 refusals, 1.064 while
		// they could).
		holdEach(t, modelRun{rate: 30, window: 3 * time.Second, workers: 20, total: 250, latency: 60 * time.Millisecond, jitter: 30 * time.Millisecond},
			[]behaviourBound{{"f/own sliding_log", 2, 1.06}})
	})
}

// TestLargeLogsAreTimed: sliding logs of 250 per 5 s, 50 goroutines 200
// ms ± 100 ms away, timed by the send log (sendLogSize holds a window of
// up to 255): Flask-Limiter's moving window 27 refusals and 1.59x while
// the log held 128 (its window then read from its resets, paced as a
// bucket), 0 and 1.25x now; koa-ratelimit's Redis log 38 and 1.21x, now
// 1 and 1.20x — and 10 while its window could still be shortened by the
// steps between its resets, which fall where its entries do (a log's
// window is never read from them).
func TestLargeLogsAreTimed(t *testing.T) {
	holdEach(t, modelRun{rate: 250, window: 5 * time.Second, workers: 50, total: 1000,
		latency: 200 * time.Millisecond, jitter: 100 * time.Millisecond, seed: 7}, []behaviourBound{
		{"j/flask-limiter moving window", 3, 1.35},
		{"i/koa-ratelimit redis", 5, 1.30},
	})
}

// TestRatedFindsABucketStatedAsItsRate: this project's server, under a
// policy, states a token bucket of 10 a second, burst 5, as q=10;w=1,
// and says when one more is free (a tenth of a second). Every answer's
// reset a unit ahead at most, the last one's passed, and the answer a
// round trip longer than a unit: a bucket of that rate. Not so a fixed
// window whose first answers came in its last tenth (the same end), a
// log or counter whose resets once lay a window ahead, nor one answered
// within a unit (read as a window, probed at each end, it loses less).
func TestRatedFindsABucketStatedAsItsRate(t *testing.T) {
	unit := 100 * time.Millisecond
	answer := func(q *quota, r int64, reset, now time.Time) *headers.Quota {
		s := &headers.Quota{Limit: 10, Remaining: r, Reset: reset, Window: time.Second}
		q.apply(s, false, true, reset, false, true, 1, now.Add(-2*unit), now)
		q.reachTo(s, now)
		return s
	}
	bucket := func() *quota {
		q := &quota{}
		for i, now := 0, t0; i < 3; i, now = i+1, now.Add(unit/2) {
			answer(q, 3, now.Add(unit-time.Millisecond), now)
		}
		return q
	}
	now := t0.Add(2 * unit)
	next := &headers.Quota{Limit: 10, Remaining: 2, Reset: now.Add(unit - 3*time.Millisecond), Window: time.Second}
	assert.True(t, bucket().rated(next, time.Second, now.Add(-2*unit), now), "a unit ahead each time, a round trip of two")
	assert.False(t, bucket().rated(next, time.Second, now.Add(-unit/2), now), "answered within a unit")
	assert.False(t, bucket().rated(next, 0, now.Add(-2*unit), now), "no window stated")

	window := &quota{} // its first answers in its last tenth: one end
	end := t0.Add(80 * time.Millisecond)
	for i, at := 0, t0; i < 3; i, at = i+1, at.Add(10*time.Millisecond) {
		answer(window, int64(6-i), end, at)
	}
	assert.False(t, window.rated(&headers.Quota{Limit: 10, Remaining: 2, Reset: end, Window: time.Second}, time.Second, t0, t0.Add(70*time.Millisecond)),
		"the same end, not passed: a fixed window")

	log := bucket()
	log.reachTo(&headers.Quota{Limit: 10, Remaining: 9, Reset: t0.Add(time.Second)}, t0)
	assert.False(t, log.rated(next, time.Second, now.Add(-2*unit), now), "once said to be whole a window on: a log or counter")
}

// TestRatedBucketIsPaced: this project's server under a policy, 200 ms
// ± 100 ms away each way, 10 goroutines: its token bucket (q=10;w=1,
// burst 5) 1.595x and its leaky bucket 1.518x, read as windows of a
// second whose ends are a tenth away and probed alone; paced as buckets
// of the rate they state, 1.280x and 1.080x, no more refusals than the
// first wave's (1.111x and 1.075x with each level read as of the
// server's decision: TestFarBucketReadAsOfItsDecision).
func TestRatedBucketIsPaced(t *testing.T) {
	holdEach(t, modelRun{rate: 10, workers: 10, total: 100, latency: 200 * time.Millisecond, jitter: 100 * time.Millisecond}, []behaviourBound{
		{"l/own policy token_bucket", 5, 1.20},
		{"l/own policy leaky_bucket", 4, 1.20},
	})
}

// TestFarBucketReadAsOfItsDecision: a bucket found by its answers (this
// project's token bucket and GCRA, spec-less, 10 a second, burst 5) 200
// ms ± 100 ms away each way, 10 goroutines: read as of each answer's
// arrival it lost what refilled on the way back, 1.244x; read as of the
// server's decision (half the shortest round trip earlier), with the
// units taken by requests whose answers are not learned from counted
// (spent), 1.114x, no more refusals than the first wave's. (As of the
// decision but without spent, 3 of 30 random settings drew 3-6 more.)
func TestFarBucketReadAsOfItsDecision(t *testing.T) {
	holdEach(t, modelRun{rate: 10, workers: 10, total: 100, latency: 200 * time.Millisecond, jitter: 100 * time.Millisecond}, []behaviourBound{
		{"f/own token_bucket", 5, 1.18},
		{"f/own gcra", 5, 1.18},
		{"l/own policy token_bucket", 5, 1.18},
	})
}

// TestSpentCountsWhatNoAnswerSays: a unit taken by a request sent after
// the one whose answer the bucket's level is, and whose own answer is
// not learned from, is taken from the level (and the bucket is full a
// unit later); one sent before it is in that level already.
func TestSpentCountsWhatNoAnswerSays(t *testing.T) {
	q := &quota{limit: 5}
	q.rmin, q.at, q.known, q.refill, q.reach = 2, t0, true, true, 100*time.Millisecond
	q.full = t0.Add(300 * time.Millisecond)
	q.span.openAt = t0.Add(-200 * time.Millisecond) // the anchor's request
	q.spent(1, t0.Add(-300*time.Millisecond))
	assert.Equal(t, int64(2), q.rmin, "sent before the anchor's request: in its level")
	q.spent(1, t0.Add(-100*time.Millisecond))
	assert.Equal(t, int64(1), q.rmin)
	assert.Equal(t, t0.Add(400*time.Millisecond), q.full, "a unit more to refill")
	w := &quota{limit: 5}
	w.rmin, w.known = 2, true
	w.spent(1, t0)
	assert.Equal(t, int64(2), w.rmin, "a window's count is the server's alone")
}

// TestQuotaLingersIsALog: the probe of a spent window's end, its resets
// in whole seconds, let through with most of the limit still counted is
// a log's answer (@nestjs/throttler's); a fixed window that turned counts
// the probe alone, one that had not would have refused it, and a request
// that went with others, or a quota not spent, or one told finer than
// the second, or a reset in epoch seconds, shows nothing.
func TestQuotaLingersIsALog(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	spent := func() *quota {
		q := &quota{limit: -1}
		for i := range 10 {
			q.apply(&headers.Quota{Limit: 10, Remaining: int64(9 - i), Reset: at(1000 + 2*i)}, false, true, at(1000), false, true, int64(i+1), at(0), at(2*i))
		}
		require.Zero(t, q.rmin)
		require.False(t, q.fine)
		return q
	}
	probe := func(remaining int64) *headers.Quota {
		return &headers.Quota{Limit: 10, Remaining: remaining, Reset: at(2010)}
	}
	assert.True(t, spent().lingers(probe(0), true), "nine of ten still counted")
	assert.True(t, spent().lingers(probe(5), true), "half still counted")
	assert.False(t, spent().lingers(probe(9), true), "a fixed window that turned counts the probe alone")
	assert.False(t, spent().lingers(probe(8), true), "or the probe and one more: not clearly a log")
	assert.False(t, spent().lingers(probe(0), false), "not the probe: others went with it")

	notSpent := spent()
	notSpent.rmin = 3
	assert.False(t, notSpent.lingers(probe(0), true), "a window not spent")
	fine := spent()
	fine.fine = true
	assert.False(t, fine.lingers(probe(0), true), "told finer than the second: stillCounted's")
	big := spent()
	assert.False(t, big.lingers(&headers.Quota{Limit: sendLogSize, Remaining: 0, Reset: at(2010)}, true), "a limit the send log cannot time")
	assert.False(t, spent().lingers(&headers.Quota{Limit: 10, Remaining: 0, Reset: at(3000)}, true), "epoch seconds: a sliding counter's fixed window, maybe")
}

// TestAIMDWaveWiderThanTheWindow: a refusal within the first wave, after
// aimdSamples or more of it got through, is a bucket's whose burst is
// smaller than the wave or a window's that the wave emptied; the first
// success after it tells them apart. A bucket refills within a step of
// the guess: a success soon after is a bucket's, and slow start goes on.
// A window turns only when it turns: a success after half a second or
// more of refused probes makes the wave a burst, its quota a second the
// pace, with no slow start — as a burst sent one by one would.
func TestAIMDWaveWiderThanTheWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cut := func(d time.Duration) time.Duration { return time.Duration(float64(d) * aimdCut) }
	wave := func() *aimd {
		a := new(aimd)
		a.refused(t0.Add(20*time.Millisecond), t0, 10, 20, 0, false)
		a.settleWave(10) // the first pause ends: all ten successes counted
		require.True(t, a.slow)
		require.Equal(t, waveWithin, a.wave)
		return a
	}

	bucket := wave()
	guess := bucket.step
	assert.False(t, bucket.turned(t0.Add(170*time.Millisecond), t0.Add(150*time.Millisecond)),
		"let through 130 ms after the refusal: a bucket refilling")
	assert.True(t, bucket.slow, "slow start goes on")
	assert.Equal(t, guess, bucket.step)
	assert.Equal(t, waveNone, bucket.wave, "decided once")
	assert.False(t, bucket.turned(t0.Add(2*time.Second), t0.Add(2*time.Second)))

	window := wave()
	assert.True(t, window.turned(t0.Add(1070*time.Millisecond), t0.Add(time.Second+50*time.Millisecond)),
		"every probe refused for a second: a window the wave emptied")
	assert.False(t, window.slow, "a burst: no slow start")
	assert.Equal(t, 100*time.Millisecond, window.ceil, "ten a second, as the wave showed")
	assert.Equal(t, window.plateau(), window.step, "paced just under it")
	assert.Equal(t, window.step, window.safe)
	assert.Equal(t, waveNone, window.wave)

	// A success that came before the refusal's pause ended (sent before
	// it) decides nothing.
	early := wave()
	assert.False(t, early.turned(t0.Add(30*time.Millisecond), t0.Add(10*time.Millisecond)))
	assert.Equal(t, waveWithin, early.wave)

	// A wave of which fewer than aimdSamples got through says too little.
	few := new(aimd)
	few.refused(t0.Add(20*time.Millisecond), t0, 2, 20, 0, false)
	few.settleWave(2)
	assert.False(t, few.turned(t0.Add(2*time.Second), t0.Add(2*time.Second)))
	assert.True(t, few.slow)

	// A real server answers refusals without the work, and they may all
	// come back before the wave's successes: two of ten counted when the
	// first refusal of fifty came back. What the wave showed is counted
	// when its pause ends, and bounds the guess as it would have then.
	late := new(aimd)
	late.refused(t0.Add(20*time.Millisecond), t0, 2, 48, 0, false)
	assert.Equal(t, cut(time.Second/48), late.step, "48 on the wire")
	late.settleWave(10)
	assert.Equal(t, cut(time.Second/20), late.step, "twice the ten that got through")
	assert.True(t, late.turned(t0.Add(time.Second+70*time.Millisecond), t0.Add(time.Second+50*time.Millisecond)))
	assert.Equal(t, 100*time.Millisecond, late.ceil)
}

// TestSpanKeepsALowerBoundARequestSet: koa-ratelimit's log over Redis
// at 5 per 2 s, its resets rounded down, 10 goroutines 5 ms away (the
// answers out of order by up to 10 ms), the first request on the clock's
// second. A probe a second into the second window was refused (a lower
// bound of 1 s), the third window's reset, read as rounded up, bounded
// the length at 1.98 s, and with no whole second between, guess fell back
// to the second under the upper bound, as for a floor a reset put too
// high: a probe a second into every window, each refused (11 refusals
// per 40 units, 5 of them the first wave's). A lower bound set by a
// request the window counted holds: 6.
func TestSpanKeepsALowerBoundARequestSet(t *testing.T) {
	b := modelBehaviourOf(t, "i/koa-ratelimit redis")
	for _, back := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprint(back), func(t *testing.T) {
			r := runModel(t, b, modelRun{rate: 5, window: 2 * time.Second, workers: 10, total: 40, method: b.method,
				latency: 5 * time.Millisecond, back: back, seed: 1})
			r.holds(t, 6, 1.05)
		})
	}
}

// TestLogFoundBeforeAStepNarrowsIt: koa-ratelimit's log over Redis at 5
// per 2 s, 20 ms away, answers out of order by up to 40 ms, the first
// request 0.7 s into the clock's second. Taken for a sliding counter of
// 2 s when its count fell at a new reset, its resets then stepped a
// second (where its entries fell): the step narrowed the window to a
// second before it was asked whether the step was off the window — and a
// step of a second is off no window of a second. Paced as a counter of 5
// a second: 16 refusals per 40 units. Asked first: a log, 9.
func TestLogFoundBeforeAStepNarrowsIt(t *testing.T) {
	b := modelBehaviourOf(t, "i/koa-ratelimit redis")
	r := runModel(t, b, modelRun{rate: 5, window: 2 * time.Second, workers: 10, total: 40, method: b.method,
		latency: 20 * time.Millisecond, back: 40 * time.Millisecond, phase: 700 * time.Millisecond, seed: 1})
	r.holds(t, 10, 1.15)
}
