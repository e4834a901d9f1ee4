package limiters

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle/internal/clip"
)

// Rate is N events per Per. The zero Rate is invalid; build one with
// PerSecond, PerMinute, PerHour, Every or ParseRate.
//
// A Rate is checked where it is made and where it is used: PerSecond,
// PerMinute, PerHour and Every panic on a count or period that is not
// positive (naming the function and the value), ParseRate returns an error,
// and every constructor that takes a Rate (NewTokenBucket, NewGCRA,
// NewLeakyBucket, repository.NewGCRA) panics on one built as a struct
// literal with N ≤ 0 or Per ≤ 0, naming its parameter. Spec.Validate
// returns an error for such a Rate, since a Spec comes from configuration.
type Rate struct {
	N   int
	Per time.Duration
}

// PerSecond returns a Rate of n per second. It panics if n ≤ 0.
func PerSecond(n int) Rate { return perUnit("PerSecond", n, time.Second) }

// PerMinute returns a Rate of n per minute. It panics if n ≤ 0.
func PerMinute(n int) Rate { return perUnit("PerMinute", n, time.Minute) }

// PerHour returns a Rate of n per hour. It panics if n ≤ 0.
func PerHour(n int) Rate { return perUnit("PerHour", n, time.Hour) }

// Every returns a Rate of one event every d. It panics if d ≤ 0.
func Every(d time.Duration) Rate {
	if d <= 0 {
		panic("limiters: Every: the period d must be positive, got " + d.String())
	}
	return Rate{N: 1, Per: d}
}

// perUnit is PerSecond, PerMinute and PerHour: a rate of n per unit, n > 0.
func perUnit(fn string, n int, unit time.Duration) Rate {
	if n <= 0 {
		panic(fmt.Sprintf("limiters: %s: the count n must be positive, got %d", fn, n))
	}
	return Rate{N: n, Per: unit}
}

// Interval is the average time between two events, rounded down to the
// nanosecond. The limiters themselves keep the exact fraction. It is 0
// for a Rate whose N is not positive.
func (r Rate) Interval() time.Duration {
	if r.N <= 0 {
		return 0
	}
	return r.Per / time.Duration(r.N)
}

// valid reports whether both N and Per are positive.
func (r Rate) valid() bool { return r.N > 0 && r.Per > 0 }

const day = 24 * time.Hour

// String formats r as ParseRate reads it: "10/s", "5/m", "100/h", "3/d", or
// "100/30s" when Per is not a whole unit.
func (r Rate) String() string {
	n := strconv.Itoa(r.N)
	switch r.Per {
	case time.Second:
		return n + "/s"
	case time.Minute:
		return n + "/m"
	case time.Hour:
		return n + "/h"
	case day:
		return n + "/d"
	}
	if r.Per > 0 && r.Per%day == 0 {
		return n + "/" + strconv.FormatInt(int64(r.Per/day), 10) + "d"
	}
	return n + "/" + r.Per.String()
}

// ParseRate reads a rate written as "N/unit": "10/s", "600/m", "1000/h",
// "5000/d", or with a duration as the unit: "100/30s", "1/500ms", "7/2d".
// The long unit names "sec", "second", "min", "minute", "hour" and "day" are
// accepted too.
func ParseRate(s string) (Rate, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("limiters: invalid rate %s: want N/unit, e.g. \"10/s\"", clip.Quote(s))
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 {
		return Rate{}, fmt.Errorf("limiters: invalid rate %s: count must be a positive integer", clip.Quote(s))
	}
	per, err := parsePer(strings.TrimSpace(unit))
	if err != nil {
		return Rate{}, fmt.Errorf("limiters: invalid rate %s: %w", clip.Quote(s), err)
	}
	return Rate{N: n, Per: per}, nil
}

func parsePer(u string) (time.Duration, error) {
	switch strings.ToLower(u) {
	case "s", "sec", "second":
		return time.Second, nil
	case "m", "min", "minute":
		return time.Minute, nil
	case "h", "hour":
		return time.Hour, nil
	case "d", "day":
		return day, nil
	}
	if strings.HasSuffix(u, "d") {
		k, err := strconv.Atoi(strings.TrimSuffix(u, "d"))
		if err != nil || k <= 0 || int64(k) > int64(math.MaxInt64/day) {
			return 0, errors.New("period must be a positive duration")
		}
		return time.Duration(k) * day, nil
	}
	d, err := time.ParseDuration(u)
	if err != nil || d <= 0 {
		return 0, errors.New("period must be a positive duration such as s, m, h, d or 30s")
	}
	return d, nil
}

// MarshalText implements encoding.TextMarshaler ("10/s").
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, reading what ParseRate reads.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
