package throttle

import "time"

// aimd learns a pace for a server that refuses without saying when or how
// much (a bare 429 or 503, an overloaded 529): multiplicative decrease on
// a refusal, down to the rate the server was seen to accept, and additive
// increase after each run of successes, as TCP does and as Google's SRE
// book recommends for client-side throttling — so one unlucky refusal never
// pins the pace for the life of the Transport. A refusal to a request sent
// before the last decrease took effect says nothing new and changes
// nothing (the gate checks that). Its zero value does not pace.
type aimd struct {
	step time.Duration // the interval between requests; 0: no pace
	base time.Duration // step at the last decrease: the increase is a share of its rate
	good int           // successes since the last change
	bare bool          // learned from bare refusals: probe upwards
	// calibrated: a refusal measured the server's rate; until then the
	// rate grows by aimdProbeGain.
	calibrated bool
	// slow: slow start. The first guess rests on fewer than
	// aimdStartBelow requests (a client sending a few at a time), so it
	// may be far below the server's rate: the rate doubles after every
	// aimdStartRun successes until a refusal, which goes back to prev,
	// the last interval a run got through at.
	slow bool
	prev time.Duration
	// tight is an interval the server refused, when the pace the refusal
	// left is well below it (aimdSearch): runs of successes then search
	// halfway up to it rather than creeping by aimdGain.
	tight time.Duration
}

const (
	// aimdRun is the successes after which the rate grows by aimdGain of
	// the rate at the last decrease.
	aimdRun       = 20
	aimdGain      = 0.01
	aimdProbeGain = 0.2
	// aimdStartRun is the successes after which slow start doubles the
	// rate; a first guess from fewer than aimdStartBelow requests starts
	// slow start.
	aimdStartRun   = 2
	aimdStartBelow = 8
	// aimdSearch: a pace this much slower than a refused one is searched
	// upwards (see tight).
	aimdSearch = 1.25
	// aimdCut multiplies the interval on a refusal, on top of the interval
	// the server was seen to accept.
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
)

// refused applies a fresh refusal at now and returns how long the gate
// should hold the partition at least (0: one step of the pace, growing
// with each refused probe, is enough). ok successes came back since
// resumed, the end of the last pause, and inflight requests were on the
// wire, the refused one included.
//
// If the refusal ends a run of successes long enough to measure what the
// server accepted (aimdSamples over aimdSpan), the interval becomes the
// larger of the current one and the measured one — the time since resumed
// over the requests sent in it that it did not refuse: the successes and
// the others still on the wire, which it took too — times aimdCut. A
// refusal with no success since the last pause changes nothing (the gate's
// backoff grows instead).
//
// On a first refusal, with nothing measured, the interval is a guess —
// that the server takes per second what it took before it refused
// (accepted, or on the wire then) — times aimdCut, so that a guess that
// happens to be exact does not sit on the limit. If that refusal ends a
// burst (aimdSamples successes or more, in less than aimdSpan), the server
// let a quota through at once and then stopped: a window, or a bucket,
// that is empty. The requests already on the wire will be refused too, and
// a server that counts refusals against the caller (as OpenAI's does)
// debits them from its next window; so the gate holds the partition for
// two windows of aimdSpan (aimdHold) rather than probing into the debt,
// and the quota the burst showed counts as measured: the rate grows by
// aimdGain, not aimdProbeGain. Otherwise the rate grows fast
// (aimdProbeGain) until a refusal measures it — or, when the guess rests
// on fewer than aimdStartBelow requests, doubles in slow start (see slow).
func (a *aimd) refused(now, resumed time.Time, ok, inflight int) (hold time.Duration) {
	switch {
	case a.slow && a.step > 0 && ok > 0:
		// Slow start overshot: back to the last interval a run got
		// through at, just under it, and search up to the refused one.
		a.tight = a.step
		a.step = time.Duration(float64(max(a.prev, a.step)) * aimdCut)
		a.slow, a.calibrated = false, true
	case ok >= aimdSamples && now.Sub(resumed) >= aimdSpan:
		a.step = time.Duration(float64(max(a.step, now.Sub(resumed)/time.Duration(ok+max(inflight-1, 0)))) * aimdCut)
		a.calibrated, a.tight = true, 0
	case a.step > 0 && ok == 0:
		return 0
	case a.step > 0:
		a.step = time.Duration(float64(a.step) * aimdCut)
	default:
		a.step = time.Duration(float64(time.Second/time.Duration(max(ok, inflight, 1))) * aimdCut)
		switch {
		case ok >= aimdSamples:
			hold, a.calibrated = aimdHold, true
		case max(ok, inflight) < aimdStartBelow:
			a.slow, a.prev = true, a.step
		}
	}
	a.base, a.good, a.bare = a.step, 0, true
	return hold
}

// measured sets the pace to what a server that said when to come back
// accepted since the last pause: a fresh measurement, not a guess, so it
// replaces the pace (either way) and is not probed upwards: the next
// refusal measures again.
func (a *aimd) measured(step time.Duration) {
	a.step, a.base, a.good, a.bare, a.calibrated = step, step, 0, false, true
}

// succeeded applies a fresh success: after every aimdRun of them the rate
// grows by aimdGain of the rate at the last decrease.
func (a *aimd) succeeded() {
	if !a.bare {
		return
	}
	run := aimdRun
	if a.slow {
		run = aimdStartRun
	}
	if a.good++; a.good < run {
		return
	}
	a.good = 0
	switch {
	case a.slow:
		a.prev, a.step = a.step, a.step/2
	case a.tight > 0 && float64(a.step) > aimdSearch*float64(a.tight):
		// Halfway, in rate, up to the interval refused.
		a.step = time.Duration(2 / (1/float64(a.step) + 1/float64(a.tight)))
	default:
		gain := aimdGain
		if !a.calibrated {
			gain = aimdProbeGain
		}
		a.step = time.Duration(1 / (1/float64(a.step) + gain/float64(a.base)))
	}
	if a.step < aimdFloor {
		*a = aimd{}
	}
}
