package limiters_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

func TestRateConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  limiters.Rate
		want limiters.Rate
		str  string
		iv   time.Duration
	}{
		{"PerSecond", limiters.PerSecond(10), limiters.Rate{N: 10, Per: time.Second}, "10/s", 100 * time.Millisecond},
		{"PerMinute", limiters.PerMinute(5), limiters.Rate{N: 5, Per: time.Minute}, "5/m", 12 * time.Second},
		{"PerHour", limiters.PerHour(100), limiters.Rate{N: 100, Per: time.Hour}, "100/h", 36 * time.Second},
		{"Every", limiters.Every(250 * time.Millisecond), limiters.Rate{N: 1, Per: 250 * time.Millisecond}, "1/250ms", 250 * time.Millisecond},
		{"non-divisible", limiters.PerSecond(3), limiters.Rate{N: 3, Per: time.Second}, "3/s", 333333333},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
			assert.Equal(t, tt.str, tt.got.String())
			assert.Equal(t, tt.iv, tt.got.Interval())
		})
	}
	assert.Zero(t, limiters.Rate{}.Interval(), "the zero Rate")
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want limiters.Rate
		str  string // String of the result
	}{
		{"10/s", limiters.PerSecond(10), "10/s"},
		{"600/m", limiters.PerMinute(600), "600/m"},
		{"1000/h", limiters.PerHour(1000), "1000/h"},
		{"5000/d", limiters.Rate{N: 5000, Per: 24 * time.Hour}, "5000/d"},
		{"100/30s", limiters.Rate{N: 100, Per: 30 * time.Second}, "100/30s"},
		{"1/500ms", limiters.Every(500 * time.Millisecond), "1/500ms"},
		{"7/2d", limiters.Rate{N: 7, Per: 48 * time.Hour}, "7/2d"},
		{"3/90m", limiters.Rate{N: 3, Per: 90 * time.Minute}, "3/1h30m0s"},
		{"2/1m", limiters.PerMinute(2), "2/m"},
		{"2/60s", limiters.PerMinute(2), "2/m"},
		{" 5 / sec ", limiters.PerSecond(5), "5/s"},
		{"5/Minute", limiters.PerMinute(5), "5/m"},
		{"1/hour", limiters.PerHour(1), "1/h"},
		{"1/day", limiters.Rate{N: 1, Per: 24 * time.Hour}, "1/d"},
		// The longest day count a Duration holds still round-trips.
		{"1/2400024h", limiters.Rate{N: 1, Per: 100001 * 24 * time.Hour}, "1/100001d"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := limiters.ParseRate(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, r)
			assert.Equal(t, tt.str, r.String())
			back, err := limiters.ParseRate(r.String())
			require.NoError(t, err, "String must round-trip")
			assert.Equal(t, r, back)
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, in := range []string{
		"", "10", "/s", "0/s", "-1/s", "x/s", "1.5/s", "10/", "10/0s", "10/-1s",
		"10/lightyear", "1/0d", "1/-2d", "1/9999999d", "10/s/s", "99999999999999999999/s",
	} {
		t.Run(in, func(t *testing.T) {
			_, err := limiters.ParseRate(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "limiters: invalid rate")
		})
	}
}

func TestRateText(t *testing.T) {
	var v struct {
		R limiters.Rate `json:"r"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"r":"100/30s"}`), &v))
	assert.Equal(t, limiters.Rate{N: 100, Per: 30 * time.Second}, v.R)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	assert.JSONEq(t, `{"r":"100/30s"}`, string(b))
	require.Error(t, json.Unmarshal([]byte(`{"r":"fast"}`), &v))
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10/s", "600/m", "1/h", "5/d", "100/30s", "1/500ms", "7/2d", "3/1h30m0s", " 5 / sec", "0/s", "1/0d", "/", "1/1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := limiters.ParseRate(s)
		if err != nil {
			return
		}
		if r.N <= 0 || r.Per <= 0 {
			t.Fatalf("ParseRate(%q) = %+v: not positive", s, r)
		}
		back, err := limiters.ParseRate(r.String())
		if err != nil {
			t.Fatalf("ParseRate(%q) = %+v, but its String %q does not parse: %v", s, r, r.String(), err)
		}
		if back != r {
			t.Fatalf("ParseRate(%q) = %+v, String %q parses as %+v", s, r, r.String(), back)
		}
	})
}
