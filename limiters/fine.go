package limiters

import (
	"math"
	"math/bits"
	"time"
)

// never is the delay reported when no amount of waiting alone will grant a
// request (a Concurrency limiter waits for Release, not for time).
const never = int64(math.MaxInt64)

// fine is a point in time or a duration in nanoseconds plus a fraction fr/den
// of a nanosecond, where den comes from the interval it belongs to. Rates
// such as 3/s have an emission interval of 333333333⅓ ns; keeping the third
// exactly is what lets the bucket algorithms agree with each other on every
// trace and never drift.
type fine struct {
	ns, fr int64
}

// interval is the exact emission interval Per/N of a Rate, reduced so that
// den is as small as possible (den is 1 for every rate that divides its
// period evenly, e.g. 1000/s).
type interval struct {
	ns  int64 // whole nanoseconds
	fr  int64 // plus fr/den of a nanosecond
	den int64
	per int64 // the interval in units of 1/den ns: ns*den + fr
}

// horizon is the longest span the bucket algorithms represent: 2^60 ns,
// about 36 years. An interval longer than that is cut to it, and a bucket
// holds at most the permits that refill within it, so that every timestamp
// (now plus twice the horizon at most) stays well inside an int64 next to
// monoOffset. A limit that refills once in 36 years or once in 300 is the
// same limit to any process that uses it.
const horizon = 1 << 60

// maxDen bounds an interval's denominator, so that sums of fractions cannot
// overflow. A rate with a larger one (more than 2^62 events per reduced
// period) has its interval rounded up to a multiple of 1/maxDen ns.
const maxDen = 1 << 62

// newInterval returns r's exact interval, saturated at the horizon. r must
// be valid.
func newInterval(r Rate) interval {
	n, p := int64(r.N), int64(r.Per)
	g := gcd(n, p)
	n, p = n/g, p/g
	if p/n >= horizon {
		return interval{ns: horizon, den: 1, per: horizon}
	}
	iv := interval{ns: p / n, fr: p % n, den: n, per: p}
	if n > maxDen { // then p < 2n: the interval is under 2 ns
		fr := mulDiv(iv.fr, maxDen, n)
		if mulDiv(fr, n, maxDen) < iv.fr {
			fr++ // round up: never a faster rate than asked
		}
		g := gcd(fr, maxDen)
		iv.fr, iv.den = fr/g, maxDen/g
		if iv.fr == iv.den {
			iv.ns, iv.fr = iv.ns+1, 0
		}
		if iv.fr == 0 {
			iv.den = 1
		}
		iv.per = iv.ns*iv.den + iv.fr
	}
	return iv
}

// float is the interval in nanoseconds, approximately.
func (iv *interval) float() float64 { return float64(iv.ns) + float64(iv.fr)/float64(iv.den) }

// rate is the Rate the interval stands for: one event per interval, in
// lowest terms (a saturated interval stands for the saturated rate).
func (iv *interval) rate() Rate { return Rate{N: int(iv.den), Per: time.Duration(iv.per)} }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// times returns n intervals. n intervals must fit in the horizon (n is at
// most the limit derived from it).
func (iv *interval) times(n int) fine {
	if iv.fr == 0 {
		return fine{ns: int64(n) * iv.ns}
	}
	hi, lo := bits.Mul64(uint64(n), uint64(iv.fr))
	q, r := bits.Div64(hi, lo, uint64(iv.den))
	return fine{int64(n)*iv.ns + int64(q), int64(r)}
}

// timesSat returns n intervals (n ≥ 0) and true, or false when they span
// more than 2^62 ns: a projection over a queue of any length stays in
// range.
func (iv *interval) timesSat(n int) (fine, bool) {
	if n < 0 || iv.ns > 0 && int64(n) > (1<<62)/iv.ns {
		return fine{}, false
	}
	d := iv.times(n)
	return d, d.ns <= 1<<62
}

func (iv *interval) add(a, b fine) fine {
	s := fine{a.ns + b.ns, a.fr + b.fr}
	if s.fr >= iv.den {
		s.fr -= iv.den
		s.ns++
	}
	return s
}

func (iv *interval) sub(a, b fine) fine {
	s := fine{a.ns - b.ns, a.fr - b.fr}
	if s.fr < 0 {
		s.fr += iv.den
		s.ns--
	}
	return s
}

// count is how many whole intervals fit in d (d ≥ 0).
func (iv *interval) count(d fine) int {
	if d.ns < 0 {
		return 0
	}
	if iv.den == 1 {
		return int(d.ns / iv.per)
	}
	hi, lo := bits.Mul64(uint64(d.ns), uint64(iv.den))
	lo, c := bits.Add64(lo, uint64(d.fr), 0)
	hi += c
	if hi == 0 {
		return int(min(lo/uint64(iv.per), math.MaxInt64))
	}
	if hi >= uint64(iv.per) {
		return math.MaxInt
	}
	q, _ := bits.Div64(hi, lo, uint64(iv.per))
	if q > math.MaxInt64 {
		return math.MaxInt
	}
	return int(q)
}

func less(a, b fine) bool { return a.ns < b.ns || (a.ns == b.ns && a.fr < b.fr) }

// ceil rounds d up to whole nanoseconds.
func (d fine) ceil() int64 {
	if d.fr > 0 {
		return d.ns + 1
	}
	return d.ns
}

// origin anchors the monotonic clock of the bucket algorithms: monoNow is
// time.Since(origin), which reads only the monotonic clock (cheaper than
// time.Now, and immune to wall-clock steps). Inside a testing/synctest bubble
// it follows the bubble's fake clock.
var origin = time.Now()

func monoNow() int64 { return int64(time.Since(origin)) + monoOffset }

// monoOffset keeps monoNow far from zero and positive (inside a synctest
// bubble time.Since(origin) can be negative), so that a zero timestamp —
// the zero GCRAState — is always long past. It leaves 2^62 ns (146 years)
// of headroom below MaxInt64, twice the horizon the buckets saturate at.
const monoOffset = 1 << 62

// wallNow is nanoseconds since the Unix epoch, for the window algorithms,
// whose windows every process must agree on.
func wallNow() int64 { return time.Now().UnixNano() }

// mulDiv returns a*b/c for non-negative operands without overflowing the
// product, saturating at MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi == 0 {
		return int64(min(lo/uint64(c), math.MaxInt64))
	}
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, math.MaxInt64))
}

// mulLE reports whether a*b <= c*d for non-negative operands.
func mulLE(a, b, c, d int64) bool {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 < h2 || (h1 == h2 && l1 <= l2)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
