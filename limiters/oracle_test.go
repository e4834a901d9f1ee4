package limiters

import (
	"math/rand/v2"
	"testing"
	"time"
)

// tokenBucket is the classic credit form of the token bucket: the bucket's
// content kept as the time it would take to refill it from empty. It is
// not used by the package: it is the oracle that gcra, which TokenBucket,
// GCRA and GCRAParams all run on, must agree with on every trace.
type tokenBucket struct {
	bucket
	credit fine
	last   int64
}

func (b *tokenBucket) refill(now int64) {
	if now <= b.last {
		return
	}
	dt := now - b.last
	b.last = now
	if dt >= b.tol.ns+2 { // credit ≥ 0, so the bucket has been full for ≥ 1ns
		b.credit = b.tol
		return
	}
	b.credit = b.capFull(b.iv.add(b.credit, fine{ns: dt}))
}

// capFull caps credit at a full bucket, except that a bucket that became full
// less than a nanosecond ago keeps the fraction (gcra.base makes the same
// choice).
func (b *tokenBucket) capFull(credit fine) fine {
	if less(credit, b.iv.add(b.tol, fine{ns: 1})) {
		return credit
	}
	return b.tol
}

func (b *tokenBucket) wait(now int64, n int) int64 {
	b.refill(now)
	need := b.iv.times(n)
	if !less(b.credit, need) {
		return 0
	}
	return b.iv.sub(need, b.credit).ceil()
}

func (b *tokenBucket) take(now int64, n int) {
	b.refill(now)
	b.credit = b.iv.sub(b.credit, b.iv.times(n))
}

func (b *tokenBucket) refund(now int64, n int) {
	b.refill(now)
	b.credit = b.capFull(b.iv.add(b.credit, b.iv.times(n)))
}

func (b *tokenBucket) state(now int64) (int, int64) {
	b.refill(now)
	return min(b.iv.count(b.credit), b.burst), max(b.iv.sub(b.tol, b.credit).ceil(), 0)
}

// TestBucketMatchesCreditOracle: on random traces of waits, takes, refunds
// and state reads, the one bucket arithmetic and the classic credit form
// make identical decisions, including at fractional-nanosecond edges and
// for saturated buckets.
func TestBucketMatchesCreditOracle(t *testing.T) {
	rates := []Rate{
		PerSecond(3),
		{N: 7, Per: 3 * time.Second},
		PerSecond(1000),
		PerMinute(7),
		{N: 13, Per: time.Millisecond},
		{N: 1_000_000_007, Per: time.Second}, // an interval under 1ns
		Every(333 * time.Millisecond),
		{N: 1, Per: 24 * time.Hour}, // with a burst of 1e8: saturated
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range rates {
		t.Run(r.String(), func(t *testing.T) {
			for trace := range 100 {
				burst := 1 + rng.IntN(10)
				if trace%10 == 9 {
					burst = 100_000_000
				}
				b := newBucket(r, burst)
				iv := b.iv.ns + 1
				start := monoNow()
				g := gcra{bucket: b}
				o := tokenBucket{bucket: b, credit: b.tol, last: start}
				now := start
				for i := range 300 {
					switch rng.IntN(4) {
					case 0: // a few ns: the fractional edges
						now += rng.Int64N(3)
					case 1:
						now += rng.Int64N(iv + 2)
					case 2:
						now += rng.Int64N(min(int64(b.burst), 20)*iv + 2)
					}
					n := 1 + rng.IntN(min(b.burst, 12))
					gw, ow := g.wait(now, n), o.wait(now, n)
					if gw != ow {
						t.Fatalf("trace %d step %d: wait(%d, %d) = %d, oracle %d", trace, i, now, n, gw, ow)
					}
					switch {
					case gw == 0:
						g.take(now, n)
						o.take(now, n)
					case rng.IntN(8) == 0: // grant at the due time, then abandon it
						now += gw
						g.take(now, n)
						o.take(now, n)
						g.refund(now, n)
						o.refund(now, n)
					}
					_, grem, greset := g.state(now, 0)
					orem, oreset := o.state(now)
					if grem != orem || greset != oreset {
						t.Fatalf("trace %d step %d: state = %d, %d; oracle %d, %d", trace, i, grem, greset, orem, oreset)
					}
				}
			}
		})
	}
}
