package throttle

import "time"

// aimd learns a pace for a server that refuses without saying when or how
// much (a bare 429 or 503, an overloaded 529). It knows nothing of the
// server's time scale (a request a minute or a hundred a second), so after
// a first guess it searches, as TCP does: slow start doubles the rate
// after each short run of successes until a refusal; from then on a
// refusal goes back to safe, the last interval a whole run of successes
// got through at, and each run moves halfway (in rate) from there up to
// tight, the interval refused, until the two are within aimdSearch of each
// other; then the rate creeps up by aimdGain a run, so that one unlucky
// refusal never pins the pace for the life of the Transport and a server
// that raised its limit is found again. As TCP CUBIC does, the creep stops
// just short of the rate last refused (or the rate a burst showed) and
// dwells there for aimdDwell runs before it probes beyond: a server whose
// limit has not moved is not refused again every few runs. A refusal to a
// request sent before the last change took effect says nothing new and
// changes nothing (the gate checks that). Its zero value does not pace.
type aimd struct {
	step  time.Duration // the interval between requests; 0: no pace
	base  time.Duration // the interval at the last decrease: the creep is a share of its rate
	safe  time.Duration // the last interval a whole run got through at; 0: none
	tight time.Duration // the interval last refused, while searching; 0: not searching
	ceil  time.Duration // the interval last refused, or a burst's: the creep dwells short of it; 0: none
	dwell int           // runs the creep has dwelt short of ceil
	// penalty is the wait the last refusal asked for (a Retry-After),
	// which each probe beyond ceil risks; 0 for bare refusals.
	penalty time.Duration
	good    int       // successes since the last change, of requests sent since
	since   time.Time // when the interval last changed (but for the creep): a run proves it only with requests sent since
	bare    bool      // learned from bare refusals: search upwards
	slow    bool      // slow start: doubling until a refusal
	twice   bool      // slow start has doubled at least twice: the guess was far off
	// shown is the most the server took at once before its first
	// refusal (counted until that refusal's pause ends: showing): a
	// window or a bucket lets that many through at any pace, so a run
	// that proves a doubled or searched pace must be longer.
	shown   int
	showing bool
	// wave: whether the first refusal may yet prove to have ended a
	// burst (waveAfter, waveWithin); waveNone once decided.
	wave waveKind
}

// waveKind is what is left to decide of a first refusal (aimd.wave).
type waveKind uint8

const (
	waveNone waveKind = iota
	// waveAfter: the refused request was sent after answers came back,
	// but came back before most of them had been counted (answers
	// arriving together are counted in any order); whether it ended a
	// burst is decided when the pause it began ends (settleWave).
	waveAfter
	// waveWithin: it was sent with the first wave: a bucket whose burst
	// is smaller than the wave, or, once aimdSamples or more of the wave
	// are counted through (shown, when its pause ends), a window the wave
	// emptied. Which, the first success after it tells (turned): a
	// bucket refills within a step of the guess, a window only when it
	// turns.
	waveWithin
)

const (
	// aimdRun is the successes that prove an interval; aimdStartRun, in
	// slow start, where a refusal costs little (the rate was just doubled
	// from one that got through).
	aimdRun      = 20
	aimdStartRun = 2
	// aimdSearch: safe and tight this close (as a ratio) end the search.
	aimdSearch = 1.25
	// aimdGain is the creep once the search has ended, a share of the
	// rate at the last decrease per run.
	aimdGain = 0.01
	// aimdDwell is how many runs the creep dwells half of aimdGain short
	// of the rate last refused before it probes beyond it, at least
	// (aimdDwellMin).
	aimdDwell = 5
	// aimdPenaltyDwell: the creep dwells this many times the wait a
	// refusal asked for before it probes beyond the rate refused (a
	// probe that costs a second is made after half a minute).
	aimdPenaltyDwell = 30
	// aimdDwellMin is the least time the creep dwells short of the rate
	// last refused before it probes beyond: a server that has not moved
	// its limit is refused by that probe once in that long at most.
	aimdDwellMin = 30 * time.Second
	// aimdCut multiplies the interval on a refusal that no run had
	// proven safe, and a guessed or measured interval, so that a guess
	// that happens to be exact does not sit on the limit.
	aimdCut = 1.05
	// aimdFloor: a pace this fast is no pace.
	aimdFloor = time.Millisecond
	// aimdSamples successes over at least aimdSpan, since the last pause,
	// measure the rate the server accepts.
	aimdSamples = 4
	aimdSpan    = time.Second
	// aimdHold is how long a refusal that ends a first burst holds the
	// partition: the window the burst emptied, and the next one, which a
	// server that counts refusals has put in debt.
	aimdHold = 2 * aimdSpan
	// aimdShownSpan bounds how long a run that must outlast the burst
	// the server showed takes at the pace it proves (succeeded).
	aimdShownSpan = aimdSpan / 2
)

// refused applies a fresh refusal at now and returns how long the gate
// should hold the partition at least (0: one step of the pace, growing
// with each refused probe, is enough). ok successes came back since
// resumed, the end of the last pause, and inflight requests were on the
// wire, the refused one included. A refusal with no success since the
// last pause changes nothing (the gate's backoff grows instead).
//
// On a first refusal the interval is a guess — that the server takes per
// second what it took before it refused (accepted, or on the wire then,
// but no more than twice what it accepted once that is aimdSamples or
// more: fifty sent at once of which ten got through say the server takes
// ten at once, not fifty a second) — times aimdCut, and slow start
// begins. Unless that refusal ends a burst
// (aimdSamples successes or more, and the refused request sent after
// answers came back: afterAnswers; a refusal of the first wave sent at
// once says only that the server's burst is smaller than the wave): then
// the server let a quota through at once and stopped, a window or a
// bucket that is empty; the requests on
// the wire will be refused too, and a server that counts refusals against
// the caller (as OpenAI's does) debits them from its next window. So the
// gate holds the partition for two windows of aimdSpan (aimdHold) rather
// than probing into the debt, and the quota the burst showed counts as the
// rate: it creeps, with no slow start.
//
// A refusal that ends slow start goes back to the last interval a run got
// through at, and searches up to the refused one if slow start doubled
// more than once (the guess was far off). Later refusals go back to safe,
// or, when safe itself was refused (the server slowed, or a burst it let
// through hid its rate), slow down by aimdCut. If the refusal ends a run
// at a creeping pace long enough to measure what the server accepted
// (aimdSamples over aimdSpan: a whole window of the usual fixed windows),
// the pace is at least that: the time since resumed over the requests
// sent in it that it did not refuse, times aimdCut. (While the pace grows
// fast, in slow start or a search, that average lags far behind it.)
func (a *aimd) refused(now, resumed time.Time, ok, inflight, held int, afterAnswers bool) (hold time.Duration) {
	if a.step > 0 && ok == 0 {
		return 0
	}
	// Creeping (neither in slow start nor searching): the pace sat near
	// the server's rate since the last pause, so what the server took
	// over that run measures it.
	creeping := a.step > 0 && !a.slow && a.tight == 0
	was := a.step
	a.ceil, a.dwell = a.step, 0
	switch {
	case a.step == 0:
		// A burst: the first wave got through whole (the refused request
		// went after some answers), aimdSamples or more of it. A refusal
		// within the first wave says the server's burst is smaller than
		// what was sent at once: a bucket, searched from the guess.
		a.slow = ok < aimdSamples || !afterAnswers
		n := max(ok, inflight, 1)
		if a.slow {
			// The requests held back only for the wave's answers count
			// as on the wire, where they would be but for the wait. Not
			// after a burst: what it showed is what got through and
			// what is on the wire (fifty goroutines, a first wave of ten,
			// waveMax: the forty held read as on the wire paced the
			// partition at twenty a second).
			n = max(n, inflight+held)
		}
		if ok >= aimdSamples {
			n = min(n, 2*ok)
		}
		a.step = time.Duration(float64(time.Second/time.Duration(n)) * aimdCut)
		a.shown, a.showing = ok, true
		a.safe, a.tight, a.twice = 0, 0, false
		switch {
		case a.slow && afterAnswers:
			a.wave = waveAfter
		case a.slow:
			a.wave = waveWithin
		default:
			a.wave = waveNone
		}
		switch {
		case !a.slow:
			hold, a.ceil = aimdHold, a.burst()
			a.step = a.plateau()
			a.safe = a.step
		case ok == 0 && inflight > 1:
			// Refused before any answer that got through: the server
			// answers refusals faster than what it takes (a capacity
			// limit, or slow work). Probe after twice the guess, not
			// into the requests it is still serving.
			hold = 2 * a.step
		}
	case a.slow:
		a.slow = false
		if a.twice {
			a.tight = a.step
		}
		switch {
		case a.safe == 0:
			// Refused before a run got through: the guess was too fast.
			// Half of it, and a search back up to the pace refused (as
			// below).
			a.tight = a.step
			a.step = 2 * a.base
		case a.twice:
			a.step = a.safe
		default:
			// The guess got through and its double did not: the guess
			// was about right, and the server near it. The guess is
			// already aimdCut under what the server took (a second
			// margin held nginx at 10 a second, no burst, to 9.1 a
			// second: 1.09-1.10x; 1.05x with one).
			a.step = a.safe
		}
	case a.safe > a.step:
		a.tight = a.step
		a.step = a.safe
	case a.safe == 0:
		// Nothing has got through since the last refusal but single
		// requests: half the rate, as TCP does, and a search back up
		// towards the rate refused, whatever the refusal asked to wait
		// (the wait sets the pause, never the pace): a creep from half
		// takes seventy runs to come back, and a sliding counter's
		// windows of 5 s with "Retry-After: 1" took 1.42× the ideal
		// (10 per 5 s; 1.07× with the search). But a pace refused only
		// after a run of its own successes (aimdSamples or more, over
		// aimdSpan) came near the rate: the search starts aimdSearch
		// under it, not at half (HAProxy's sliding counter of 10 per
		// 5 s, "Retry-After: 1", 21 goroutines 116 ms away: 14 through
		// in six seconds at 2.3 a second, then 1.2 a second searched
		// back in runs of 17 s, 0.68 of its rate; 0.88 from 1.9).
		a.tight = a.step
		if a.good >= aimdSamples && time.Duration(a.good)*a.step >= aimdSpan {
			a.step = time.Duration(float64(a.step) * aimdSearch)
		} else {
			a.step *= 2
		}
	default:
		a.safe, a.tight = 0, 0
		a.step = time.Duration(float64(a.step) * aimdCut)
	}
	if creeping && ok >= aimdSamples && now.Sub(resumed) >= aimdSpan {
		m := time.Duration(float64(now.Sub(resumed)/time.Duration(ok+max(inflight-1, 0))) * aimdCut)
		if m > a.step {
			// No slower than the pace refused, slowed by aimdCut three
			// times: the creep reached that pace, and the server's rate
			// is near it. What it took since the last pause is all the
			// run, its start too, and after a long pause the creep
			// starts far under the rate (HAProxy's http_req_rate over
			// 10 s, 20 allowed and refusals counted: 70 successes in 41
			// s of a creep from 1.2 a second made 1.6 a second of the 2
			// it had reached; the run 1.23 -> 1.16x).
			m = min(m, time.Duration(float64(was)*aimdCut*aimdCut*aimdCut))
		}
		if m > a.step {
			a.step, a.safe, a.tight = m, m, 0
		}
	}
	a.base, a.good, a.bare, a.since = a.step, 0, true, now
	return hold
}

// assume paces at step, a rate the server documents (Discord's global
// limit), as if a search had found it: the creep dwells just short of
// it, and a server that takes more is found as after any search; a
// refusal slows the pace as any other.
func (a *aimd) assume(step time.Duration, now time.Time) {
	*a = aimd{step: step, base: step, safe: step, ceil: step, bare: true, since: now}
}

// plateau is the interval the creep dwells at, just short of ceil: where
// a burst's pace starts (the burst showed the rate; only the window it
// was counted over is a guess, and a pace a twentieth under it would take
// ten seconds to creep back).
func (a *aimd) plateau() time.Duration {
	return time.Duration(float64(a.ceil) * (1 + aimdGain/2))
}

// burst is the rate a burst came up against, as an interval: the
// quota it showed a second, recovered from a first refusal's guess,
// a.step, before the pace is set at the plateau below it.
func (a *aimd) burst() time.Duration {
	return time.Duration(float64(a.step) / aimdCut)
}

// settleWave decides, when the pause a first refusal began ends, whether
// that refusal ended a burst after all (see wave): ok successes came back
// since the first request. If so the pace is the guess, with no slow
// start, and it returns how much longer to hold the partition (aimdHold,
// as refused would have); if not, slow start goes on.
func (a *aimd) settleWave(ok int) (hold time.Duration) {
	if a.showing {
		a.shown, a.showing = max(a.shown, ok), false
	}
	if a.wave == waveWithin && a.shown >= aimdSamples {
		// The wave's successes, all counted now (its refusals may come
		// back first: a real server answers them without the work),
		// bound the guess as refused would have had they been counted:
		// twice what got through a second, not all that was sent.
		if c := time.Duration(float64(time.Second/time.Duration(2*a.shown)) * aimdCut); c > a.step {
			a.step, a.base = c, c
		}
	}
	if a.wave != waveAfter {
		return 0
	}
	a.wave = waveNone
	if ok < aimdSamples {
		return 0
	}
	a.ceil = a.burst()
	a.step = a.plateau()
	a.slow, a.safe, a.good = false, a.step, 0
	return aimdHold
}

// recount sets the pace a burst taught (a first refusal's guess, or the
// wave's: settleWave) from ok, the successes of the whole burst, once
// they are all in: the first refusal may have been counted before many
// of them (answers that come back together are counted in any order),
// and its guess be slower than the burst. A faster rate is taken; the
// search goes on from there as before.
func (a *aimd) recount(ok int) {
	if a.slow || a.tight > 0 || ok < aimdSamples {
		return
	}
	if c := aimdSpan / time.Duration(ok); c < a.ceil {
		a.ceil = c
		a.step = a.plateau()
		a.base, a.safe = a.step, a.step
	}
}

// reopened paces a server whose window, once it reopened, let few
// through before refusing again: not a window that lets its quota
// through at each opening (a fixed window, a log a burst emptied at
// once), but a rate that the burst and its refusals put in debt (a
// sliding counter that counts refusals: HAProxy's http_req_rate). The
// burst let quota through, and the window reopened no sooner than lo and
// no later than hi after it opened (turn): its rate is quota a hi at
// least and quota a lo at most, not quota a second (aimdSpan), as the
// burst's guess had it. The pace starts halfway between the two (hi is
// long by the debt) and searches up towards lo's. A window shorter than
// aimdHold is the guess's to pace (the first burst's hold was made for
// it), and a pace already slower is left as it is. Only bare refusals
// are read so: a server that asks for a wait in whole seconds is probed
// every wait, and each refused probe adds to a debt that makes hi twice
// the window (HAProxy's 20 per 10 s with "Retry-After: 1": hi 16 s, a
// pace of one a second, 1.75x).
//
// HAProxy's documented example (20 per 10 s, refusals counted, a bare
// 429), 10 goroutines 1 ms away: the burst's guess of 20 a second was
// refused after each reopening and halved five times, 36 refusals and
// 1.22x; now 14-16 and 1.10x.
func (a *aimd) reopened(now time.Time, quota int, lo, hi time.Duration) {
	if a.step == 0 || a.slow || quota < aimdSamples || hi < aimdHold {
		return
	}
	step := hi / time.Duration(quota)
	if step <= a.step {
		return
	}
	a.ceil = 0
	a.step, a.base, a.safe, a.tight = step, step, 0, 0
	if t := lo / time.Duration(quota); t > step/2 && t < step {
		// Halfway between (in rate): hi is long by the debt the
		// burst's refusals, and the probes that found it, put the
		// server in.
		a.tight = t
		a.step = halfway(step, t)
	}
	a.good, a.since = 0, now
}

// halfway is the interval halfway in rate between intervals a and b
// (their harmonic mean): where a search between them goes next.
func halfway(a, b time.Duration) time.Duration {
	return time.Duration(2 / (1/float64(a) + 1/float64(b)))
}

// measured starts the pace at what a server that said when to come back
// accepted since the last pause, and searches on from there as from any
// interval a run got through at: it creeps up (a server that said when to
// come back once may have room to spare, or raise its limit), and a
// refusal brings it back (refused).
//
// The measured rate is what the server refused beyond: the creep dwells
// just short of it before it probes beyond, for longer the more a refusal
// costs (penalty: the wait the refusal asked for).
func (a *aimd) measured(step, penalty time.Duration) {
	*a = aimd{base: step, ceil: step, bare: true, penalty: penalty}
	a.step = a.plateau()
	a.safe = a.step
}

// turned decides a refusal within the first wave (waveWithin) at the
// first success after it, of a request sent at sent: if every probe for
// half a second or more was refused, no bucket refilling at the guess's
// rate (twice what the wave let through a second) refused them, but a
// window the wave emptied, which has turned. The wave was a burst, as
// if sent one by one (refused): its quota a second is the pace, no slow
// start. It reports whether it set the pace. (20 goroutines against a
// bare window of 10 a second: slow start, its runs spanning two windows,
// proved twice the rate, and 24 refusals followed, 1.14x.)
//
// A window longer than a second is found as a burst's is (turn, the
// refusals); reading it from how long the wave was refused (rounded up
// to whole seconds) paced HAProxy's http_req_rate, which counts the
// wave's refusals, at half its rate.
func (a *aimd) turned(now, sent time.Time) bool {
	if a.wave != waveWithin || !a.bare || sent.Before(a.since) {
		return false
	}
	a.wave = waveNone
	if !a.slow || a.good > 0 || a.shown < aimdSamples || sent.Sub(a.since) < aimdSpan/2 {
		return false
	}
	a.ceil = aimdSpan / time.Duration(a.shown)
	a.step = a.plateau()
	a.base, a.safe, a.slow, a.since, a.good = a.step, a.step, false, now, 0
	return true
}

// dwellRuns is how many runs the creep dwells short of the rate last
// refused: aimdDwell, or as many as last aimdDwellMin, or, when a refusal
// costs a wait the server asks for, as many as make the time dwelt
// aimdPenaltyDwell times that wait: a probe beyond the rate that may cost
// a second is made rarely, and one that costs a refusal at most every
// half minute (a server that has not moved its limit answers each with
// one: at 10 a second, five runs made it one in every 200 requests).
func (a *aimd) dwellRuns() int {
	n := aimdDwell
	if a.step > 0 {
		n = max(n, int(max(aimdPenaltyDwell*a.penalty, aimdDwellMin)/(time.Duration(aimdRun)*a.step)))
	}
	return n
}

// succeeded applies a fresh success at now, of a request sent at sent: a
// run of them, sent since the interval last changed by more than the
// creep, proves the interval safe, and moves the pace on: doubling in
// slow start, halfway up to tight while searching, a creep of aimdGain
// after. (Counted from requests sent before the change, a run would
// prove nothing: slow start doubled at every second answer of a queue
// sent at the old pace, down to no pace at all, and a queue of 50 was
// let through at once.)
func (a *aimd) succeeded(now, sent time.Time) {
	if !a.bare || sent.Before(a.since) {
		return
	}
	run := aimdRun
	if a.slow {
		run = aimdStartRun
	}
	if a.slow || a.tight > 0 {
		// A pace doubled or searched is proven only past what the
		// server lets through at once (shown), or by as many as it
		// sends in aimdShownSpan if fewer: against a window of 20,
		// runs of two doubled slow start to 190 a second at each
		// window's start, and a pace "proven" there was refused every
		// window (25 goroutines at 20 a second: 348 refusals); a
		// bucket whose burst is far below its rate (5, at 100 a
		// second) is still found in a few doublings.
		run = max(run, min(a.shown+1, int(aimdShownSpan/max(a.step, aimdFloor))))
	}
	if a.good++; a.good < run {
		return
	}
	a.good, a.safe = 0, a.step
	switch {
	case a.slow:
		a.twice = a.step < a.base
		a.step /= 2
		a.since = now
	case a.tight > 0 && float64(a.step) > aimdSearch*float64(a.tight):
		a.step = halfway(a.step, a.tight)
		a.since = now
	default:
		// The creep: a run at a pace a percent slower proves this one
		// as well, and requests on the wire count.
		a.tight = 0
		next := time.Duration(1 / (1/float64(a.step) + aimdGain/float64(a.base)))
		if short := a.plateau(); a.ceil > 0 && next < short {
			switch {
			case a.step > short:
				next = short // approach the rate last refused, no further
			case a.step == short && a.dwell < a.dwellRuns():
				a.dwell++
				next = a.step
			default:
				a.ceil = 0 // dwelt long enough, or past it already: probe beyond
			}
		}
		a.step = next
	}
	if a.step < aimdFloor {
		*a = aimd{}
	}
}
