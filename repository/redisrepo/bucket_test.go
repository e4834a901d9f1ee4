package redisrepo

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// interval is b's emission interval in µs, exactly.
func (b bucket) interval() *big.Rat {
	return new(big.Rat).Add(new(big.Rat).SetInt64(b.us), big.NewRat(b.fr, b.den))
}

// trueInterval is r's emission interval in µs, exactly.
func trueInterval(r limiters.Rate) *big.Rat {
	return big.NewRat(int64(r.Per), int64(r.N)*1000)
}

// checkBucket holds b, made of r and burst, to newBucket's promises: the
// scripts' products stay below maxExact, the burst is the local limiter's,
// and the interval is exact, or rounded up by less than 1/d µs, the rate
// slower by less than burst/2^49 when the interval is a µs or more.
func checkBucket(t *testing.T, r limiters.Rate, burst int, b bucket) {
	t.Helper()
	lim, err := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: burst, Rate: r}.New()
	require.NoError(t, err)
	want := lim.TryAcquire(0).Limit
	lim.Close()
	require.Equal(t, int64(want), b.burst, "the burst, saturated as the local limiter's")
	num := new(big.Int).Add(new(big.Int).Mul(big.NewInt(b.us), big.NewInt(b.den)), big.NewInt(b.fr))
	most := big.NewInt(maxExact)
	assert.LessOrEqual(t, new(big.Int).Mul(num, big.NewInt(b.burst)).Cmp(most), 0, "burst × numerator (%+v)", b)
	assert.LessOrEqual(t, new(big.Int).Mul(big.NewInt(b.den), big.NewInt(b.burst)).Cmp(most), 0, "burst × denominator (%+v)", b)
	assert.True(t, b.fr >= 0 && b.fr < b.den, "%+v", b)
	iv, exact := b.interval(), trueInterval(r)
	if exact.Cmp(new(big.Rat).SetInt64(horizon/1000)) >= 0 {
		exact = new(big.Rat).SetFrac64(horizon, 1000) // package limiters' longest interval
	}
	if b.exact {
		assert.Equal(t, exact.String(), iv.String(), "%v burst %d", r, burst)
		return
	}
	over := new(big.Rat).Sub(iv, exact)
	require.GreaterOrEqual(t, over.Sign(), 0, "%v burst %d: rounded down", r, burst)
	us := new(big.Int).Quo(exact.Num(), exact.Denom()).Int64()
	d := maxExact / (b.burst * (us + 1))
	assert.Equal(t, -1, over.Cmp(big.NewRat(1, d)), "%v burst %d: rounded up by %v µs, 1/d = 1/%d", r, burst, over.FloatString(9), d)
	if us >= 1 {
		rel := new(big.Rat).Quo(over, exact)
		assert.Equal(t, -1, rel.Cmp(big.NewRat(b.burst, 1<<49)), "%v burst %d: the rate is slower by %v", r, burst, rel.FloatString(12))
	}
}

// TestBucketArithmetic: every bucket spec in the range (bursts up
// to 10^9, rates from one per 31 days to 10^6 per second) is accepted,
// exact where its products fit, and otherwise within the documented bound;
// saturated as the local limiter saturates it.
func TestBucketArithmetic(t *testing.T) {
	const day = 24 * time.Hour
	cases := []struct {
		r     limiters.Rate
		burst int
		exact bool
	}{
		{limiters.PerSecond(10), 20, true},
		{limiters.Rate{N: 3, Per: time.Second}, 1_000_000_000, true},
		{limiters.Rate{N: 1_000_000, Per: time.Second}, 1_000_000_000, true},
		{limiters.Rate{N: 1, Per: 31 * day}, 1_000_000_000, true}, // saturated: 430
		{limiters.Rate{N: 7, Per: 31 * day}, 1_000_000_000, false},
		{limiters.Rate{N: 999_999, Per: day}, 1_000_000, false},
		{limiters.Rate{N: 999_999_937, Per: 31 * day}, 1_000_000_000, false},
		{limiters.Rate{N: 1, Per: 1500 * time.Nanosecond}, 10, true}, // not whole µs
		{limiters.Rate{N: 1, Per: 100 * 365 * day}, 5, false},        // past the horizon
		{limiters.Rate{N: 1_000_000_000, Per: time.Second}, 1 << 40, true},
		{limiters.Rate{N: 999_999_999, Per: time.Second}, 1 << 40, false},
	}
	for _, c := range cases {
		b, err := newBucket(c.r, c.burst)
		require.NoError(t, err, "%v burst %d", c.r, c.burst)
		assert.Equal(t, c.exact, b.exact, "%v burst %d: %+v", c.r, c.burst, b)
		checkBucket(t, c.r, c.burst, b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		// a period from 1µs to 31 days, N events in it: 1 per 31 days to 10^6/s
		per := time.Duration(1+rng.Int64N(int64(31*day/time.Microsecond))) * time.Microsecond
		if rng.IntN(4) == 0 {
			per += time.Duration(rng.IntN(1000)) // and some not whole µs
		}
		maxN := max(int64(per/time.Microsecond), 1)
		r := limiters.Rate{N: int(1 + rng.Int64N(maxN)), Per: per}
		burst := 1 + rng.IntN(1_000_000_000)
		if rng.IntN(2) == 0 {
			burst = 1 + rng.IntN(1000)
		}
		b, err := newBucket(r, burst)
		require.NoError(t, err, "%v burst %d", r, burst)
		checkBucket(t, r, burst, b)
	}
	// beyond doubles: a burst past 2^51 at a rate faster than 10^6/s
	_, err := newBucket(limiters.Rate{N: 1 << 40, Per: time.Second}, 1<<60)
	assert.ErrorContains(t, err, "redisrepo: spec limit")
}

// FuzzNewBucket: any valid bucket spec gives fields within the scripts'
// bounds and the documented error, or an error; never a panic.
func FuzzNewBucket(f *testing.F) {
	f.Add(int64(10), int64(time.Second), 20)
	f.Add(int64(999_999), int64(24*time.Hour), 1_000_000)
	f.Add(int64(1), int64(1<<62), 1<<62)
	f.Add(int64(1<<40), int64(time.Second), 1<<60)
	f.Fuzz(func(t *testing.T, n, per int64, burst int) {
		r := limiters.Rate{N: int(n), Per: time.Duration(per)}
		if (limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: burst, Rate: r}).Validate() != nil {
			return
		}
		b, err := newBucket(r, burst)
		if err != nil {
			return
		}
		checkBucket(t, r, burst, b)
	})
}
