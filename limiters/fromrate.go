package limiters

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// rateLimiter adapts a *rate.Limiter from golang.org/x/time/rate; FromRate
// returns one.
type rateLimiter struct {
	core
	s fromRate
}

type fromRate struct{ lim *rate.Limiter }

// FromRate adapts an existing golang.org/x/time/rate limiter, so code that
// already has one can use it wherever a Limiter is wanted: in a Transport, a
// repository or a Chain. Our FIFO queue, deadline fail-fast, Stats and Close
// work as for every other limiter.
//
// Where it differs from the native TokenBucket:
//   - The arithmetic is x/time/rate's, in float64 tokens: it does not agree
//     nanosecond for nanosecond with TokenBucket or GCRA.
//   - The *rate.Limiter stays shared: calls made on it directly (Allow, Wait,
//     SetLimit, SetBurst) bypass our queue, and changes to its limit or burst
//     take effect at once.
//   - A grant that its caller abandons as its context ends is not refunded
//     (x/time/rate has no way to put tokens back outside a Reservation).
//   - rate.Inf admits everything; a zero limit admits only the burst.
//   - It reads the wall clock, as x/time/rate's methods do.
func FromRate(l *rate.Limiter, opts ...Option) Limiter {
	if l == nil {
		panic("limiters: FromRate: nil *rate.Limiter")
	}
	r := &rateLimiter{}
	r.s.lim = l
	r.init(&r.s, newConfig(-1, opts))
	return r
}

// algName is what a *RejectedError calls a FromRate limiter without a name.
const algName = "x/time/rate"

func (f *fromRate) algorithm() string { return algName }
func (f *fromRate) now() int64        { return time.Now().UnixNano() }

func (f *fromRate) limit() int {
	if f.lim.Limit() == rate.Inf {
		return math.MaxInt
	}
	return f.lim.Burst()
}

func (f *fromRate) delay(tokens float64, n int) int64 {
	need := float64(n) - tokens
	if need <= 0 || f.lim.Limit() == rate.Inf {
		return 0
	}
	if f.lim.Limit() <= 0 {
		return never
	}
	d := math.Ceil(need / float64(f.lim.Limit()) * 1e9)
	if d >= float64(math.MaxInt64) {
		return never
	}
	return max(int64(d), 1)
}

func (f *fromRate) wait(now int64, n int) int64 {
	return f.delay(f.lim.TokensAt(time.Unix(0, now)), n)
}

func (f *fromRate) take(now int64, n int) { f.lim.AllowN(time.Unix(0, now), n) }

func (f *fromRate) refund(int64, int) {}

func (f *fromRate) state(now int64, _ int) (int, int, int64) {
	tokens := f.lim.TokensAt(time.Unix(0, now))
	lim := f.lim.Limit()
	if lim == rate.Inf {
		return f.limit(), math.MaxInt, 0
	}
	rem := max(int(math.Floor(tokens)), 0)
	var reset int64
	if lim > 0 {
		if missing := float64(f.lim.Burst()) - tokens; missing > 0 {
			reset = int64(math.Ceil(missing / float64(lim) * 1e9))
		}
	}
	return f.limit(), rem, reset
}

func (f *fromRate) project(now int64, ahead waiters, n int) int64 {
	return f.wait(now, ahead.permits+n)
}
