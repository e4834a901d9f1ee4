package throttle

import "time"

// aimd learns a pace for a server that refuses without saying when or how
// much (a bare 429 or 503, an overloaded 529): additive increase of the
// rate after a run of successes, multiplicative decrease on a refusal, as
// TCP does and as Google's SRE book recommends for client-side throttling.
// A refusal to a request sent before the last decrease took effect says
// nothing new and changes nothing. Its zero value does not pace.
type aimd struct {
	step time.Duration // the interval between requests; 0: no pace
	base time.Duration // step at the last decrease: the increase is a share of its rate
	good int           // successes since the last change
	bare bool          // learned from bare refusals: probe upwards
}

const (
	// aimdRun is the successes after which the rate grows by aimdGain of
	// the rate at the last decrease.
	aimdRun  = 50
	aimdGain = 0.02
	// aimdCut multiplies the interval on a refusal (the rate by 1/aimdCut).
	aimdCut = 1.15
	// aimdFloor: a pace this fast is no pace.
	aimdFloor = time.Millisecond
	// firstPace is the pace after a first refusal when nothing was
	// measured yet.
	firstPace = 100 * time.Millisecond
)

// refused applies a fresh refusal: the interval grows by aimdCut, to at
// least measured, the interval between the requests the server accepted
// from the last pause to the end of this one (0: unknown).
func (a *aimd) refused(measured time.Duration) {
	a.step = max(time.Duration(float64(a.step)*aimdCut), measured)
	if a.step == 0 {
		a.step = firstPace
	}
	a.base, a.good, a.bare = a.step, 0, true
}

// measured sets the pace to what a server that said when to come back
// accepted since the last pause: a fresh measurement, not a guess, so it
// replaces the pace (either way) and is not probed upwards: the next
// refusal measures again.
func (a *aimd) measured(step time.Duration) {
	*a = aimd{step: step, base: step}
}

// succeeded applies a success: after every aimdRun of them the rate grows
// by aimdGain of the rate at the last decrease, so a pace never stays
// pinned by an old refusal.
func (a *aimd) succeeded() {
	if !a.bare {
		return
	}
	if a.good++; a.good < aimdRun {
		return
	}
	a.good = 0
	rate := 1/float64(a.step) + aimdGain/float64(a.base)
	a.step = time.Duration(1 / rate)
	if a.step < aimdFloor {
		*a = aimd{}
	}
}
