package throttle

import "time"

// A window every request restarts — Flask-Limiter's elastic window, whose
// expiry each hit, refused or not, sets a window from itself — ends a
// window after the last request reached it. Each of its answers says so:
// a reset R written in whole seconds, rounded up, to a request sent at
// sent and answered at now, puts the window's length in
// (R − 1 s − now, R − sent). Whether a quota is such a window is a
// hypothesis its answers test: while some whole second fits the bounds
// of all of them (windows are configured in seconds), it may be; the
// first answer that leaves none shows it is not, for good (a fixed
// window's refused probe, whose reset is the window's end, nearer than
// a window; a sliding window's grid end; a log's oldest entry's expiry).
//
// The hypothesis alone proves nothing — a fixed window its first wave
// spent at once, or a sliding log read in a burst, fits it too — so it
// only decides once a refusal pushed the reset on (gate.learnQuotas):
// that, and every answer before it, fitting such a window is what tells
// it from a sliding window, which would take its pace for one.

// stretch bounds the length of a window every request restarts, were a
// quota one. It keeps hundredths of a second, rounded outward, up to
// about five minutes (longer windows fit no hypothesis it keeps): four
// bytes in every quota of every partition.
type stretch struct {
	lo, hi int16 // the length is more than lo and less than hi; hi 0: no answer yet, hi < 0: no such window
}

// stretchUnit is what stretch counts in.
const stretchUnit = 10 * time.Millisecond

// learn applies an answer to a request sent at sent, come back at now,
// whose reset (whole seconds, rounded up) is reset.
func (e *stretch) learn(reset, sent, now time.Time) {
	if e.hi < 0 {
		return
	}
	lo := stretchUnits(reset.Sub(now) - time.Second - stretchUnit + 1)
	hi := stretchUnits(reset.Sub(sent) + stretchUnit - 1)
	if e.hi != 0 {
		lo, hi = max(e.lo, lo), min(e.hi, hi)
	}
	e.lo, e.hi = lo, hi
	if e.window() == 0 {
		e.hi = -1
	}
}

// window is the shortest whole number of seconds, one at least, that
// the bounds allow, or 0.
func (e *stretch) window() time.Duration {
	if e.hi <= 0 {
		return 0
	}
	w := max((time.Duration(e.lo)*stretchUnit).Truncate(time.Second)+time.Second, time.Second)
	if w >= time.Duration(e.hi)*stretchUnit {
		return 0
	}
	return w
}

// stretchUnits is d in stretchUnits (toward zero), within an int16.
func stretchUnits(d time.Duration) int16 {
	return int16(min(max(d/stretchUnit, -1<<15), 1<<15-1))
}
