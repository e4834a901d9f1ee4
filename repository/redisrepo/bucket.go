package redisrepo

import (
	"fmt"
	"math/big"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// horizon is package limiters': the longest span its bucket algorithms
// represent, 2^60 ns (about 36 years). An interval longer than that is cut
// to it, and a bucket holds at most the permits that refill within it; the
// scripts do the same, so that the Decisions agree.
const horizon = 1 << 60

// bucket is what the scripts know of a bucket algorithm's spec: its
// emission interval as us + fr/den microseconds, and its burst (or
// capacity), saturated as package limiters saturates it.
type bucket struct {
	us, fr, den int64
	burst       int64
	exact       bool // false: the interval was rounded up (see newBucket)
}

// newBucket returns the bucket of rate r and burst, exact when the
// scripts' products of a count and a fine duration stay below maxExact:
// the burst times the interval's numerator, and the burst times its
// denominator. Otherwise the interval is rounded up to a multiple of 1/d
// µs, d = ⌊maxExact / (burst·(us+1))⌋, the finest unit under which they
// do: it grows by less than 1/d µs, so the rate is slower by less than one
// part in d·interval > 2^49/burst for an interval of a microsecond or more
// (a rate of at most 10^6/s), and a burst refills less than burst/d µs
// later. Rates that divide their period into whole microseconds, or into
// fractions with a small denominator, stay exact at any burst; the
// rounding reaches only bursts of millions at rates such as 999,999 a day.
// A burst with burst·(us+1) above maxExact (a burst beyond 2^51 at a rate
// above 10^6/s) is refused.
func newBucket(r limiters.Rate, burst int) (bucket, error) {
	n, p := big.NewInt(int64(r.N)), big.NewInt(int64(r.Per))
	hz := new(big.Int).Lsh(big.NewInt(1), 60)
	if new(big.Int).Quo(p, n).Cmp(hz) >= 0 {
		p.Set(hz)
		n.SetInt64(1)
	}
	b := bucket{burst: int64(burst)}
	if fit := new(big.Int).Quo(new(big.Int).Mul(hz, n), p); fit.IsInt64() && fit.Int64() < b.burst {
		b.burst = fit.Int64() // ≥ 1: the interval is at most the horizon
	}
	// the interval in µs, p / 1000n, in lowest terms; its whole part is at
	// most 2^60/1000
	num, den := p, n.Mul(n, big.NewInt(1000))
	g := new(big.Int).GCD(nil, nil, num, den)
	num.Quo(num, g)
	den.Quo(den, g)
	us, fr := new(big.Int).QuoRem(num, den, new(big.Int))
	lim, most := big.NewInt(b.burst), big.NewInt(maxExact)
	if new(big.Int).Mul(num, lim).Cmp(most) <= 0 && new(big.Int).Mul(den, lim).Cmp(most) <= 0 {
		b.us, b.fr, b.den, b.exact = us.Int64(), fr.Int64(), den.Int64(), true
		return b, nil
	}
	d := new(big.Int).Quo(most, lim.Mul(lim, new(big.Int).Add(us, big.NewInt(1))))
	if d.Sign() == 0 {
		return bucket{}, fmt.Errorf("redisrepo: spec limit: %d at rate %v is beyond Redis's arithmetic (Lua's doubles): at most %d",
			burst, r, maxExact/(us.Int64()+1))
	}
	// fr/den rounded up to f/d: never a faster rate than asked
	f := new(big.Int).Mul(fr, d)
	f.Add(f, new(big.Int).Sub(den, big.NewInt(1))).Quo(f, den)
	if f.Cmp(d) == 0 {
		us.Add(us, big.NewInt(1))
		f.SetInt64(0)
	}
	if f.Sign() == 0 {
		d.SetInt64(1)
	} else {
		g.GCD(nil, nil, f, d)
		f.Quo(f, g)
		d.Quo(d, g)
	}
	b.us, b.fr, b.den = us.Int64(), f.Int64(), d.Int64()
	return b, nil
}

// rate is the rate the scripts decide at: one event per interval, in
// nanoseconds when that is exact (the local limiter of this rate and
// burst decides as the scripts do), and true; false when the interval is
// not a whole number of 1/den ns that fits.
func (b bucket) rate() (limiters.Rate, bool) {
	per := new(big.Int).Mul(big.NewInt(b.us), big.NewInt(b.den))
	per.Add(per, big.NewInt(b.fr)).Mul(per, big.NewInt(1000))
	if !per.IsInt64() || b.den > int64(^uint(0)>>1) {
		return limiters.Rate{}, false
	}
	return limiters.Rate{N: int(b.den), Per: time.Duration(per.Int64())}, true
}
