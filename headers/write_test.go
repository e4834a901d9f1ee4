package headers

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/throttlekit/throttle/limiters"
)

func TestWrite(t *testing.T) {
	allowed := limiters.Decision{Allowed: true, Limit: 100, Remaining: 42, ResetAfter: 29500 * time.Millisecond}
	denied := limiters.Decision{Limit: 100, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 600 * time.Millisecond}

	tests := []struct {
		name  string
		d     limiters.Decision
		style Style
		want  http.Header
	}{
		{"legacy allowed", allowed, Legacy, http.Header{
			"X-Ratelimit-Limit":     {"100"},
			"X-Ratelimit-Remaining": {"42"},
			"X-Ratelimit-Reset":     {"30"},
		}},
		{"legacy denied", denied, Legacy, http.Header{
			"Retry-After":           {"1"},
			"X-Ratelimit-Limit":     {"100"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Reset":     {"1"},
		}},
		{"IETF allowed", allowed, IETF, http.Header{
			"Ratelimit-Policy": {`"default";q=100`},
			"Ratelimit":        {`"default";r=42;t=30`},
		}},
		{"IETF denied", denied, IETF, http.Header{
			"Retry-After":      {"1"},
			"Ratelimit-Policy": {`"default";q=100`},
			"Ratelimit":        {`"default";r=0;t=1`},
		}},
		{"both", allowed, Both, http.Header{
			"X-Ratelimit-Limit":     {"100"},
			"X-Ratelimit-Remaining": {"42"},
			"X-Ratelimit-Reset":     {"30"},
			"Ratelimit-Policy":      {`"default";q=100`},
			"Ratelimit":             {`"default";r=42;t=30`},
		}},
		{"zero style allowed", allowed, 0, http.Header{}},
		{"zero style denied", denied, 0, http.Header{"Retry-After": {"1"}}},
		{"exhausted but allowed advertises the full reset",
			limiters.Decision{Allowed: true, Limit: 10, ResetAfter: 5 * time.Second}, Legacy, http.Header{
				"X-Ratelimit-Limit":     {"10"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"5"},
			}},
		{"IETF t is the time until more quota when an allowed decision says it",
			limiters.Decision{Allowed: true, Limit: 10, ResetAfter: 5 * time.Second, RetryAfter: 500 * time.Millisecond}, Both, http.Header{
				"X-Ratelimit-Limit":     {"10"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"5"},
				"Ratelimit-Policy":      {`"default";q=10`},
				"Ratelimit":             {`"default";r=0;t=1`},
			}},
		{"denied with no RetryAfter still says 1",
			limiters.Decision{Limit: 10}, 0, http.Header{"Retry-After": {"1"}}},
		{"whole seconds are not rounded up",
			limiters.Decision{Limit: 10, RetryAfter: 3 * time.Second}, 0, http.Header{"Retry-After": {"3"}}},
		{"negative counts are written as zero",
			limiters.Decision{Allowed: true, Limit: -1, Remaining: -5, ResetAfter: -time.Second}, Legacy, http.Header{
				"X-Ratelimit-Limit":     {"0"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"0"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			Write(h, tt.d, tt.style)
			assert.Equal(t, tt.want, h)
		})
	}
}

func TestWriteReplaces(t *testing.T) {
	h := http.Header{}
	Write(h, limiters.Decision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: time.Second}, Both)
	Write(h, limiters.Decision{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: time.Second}, Both)
	assert.Equal(t, []string{"3"}, h["X-Ratelimit-Remaining"])
	assert.Equal(t, []string{`"default";r=3;t=1`}, h["Ratelimit"])
}

func TestWriteRoundTrip(t *testing.T) {
	decisions := []limiters.Decision{
		{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 10 * time.Second},
		{Allowed: true, Limit: 100, Remaining: 0, ResetAfter: 1500 * time.Millisecond},
		{Allowed: false, Limit: 100, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 2 * time.Second},
		{Allowed: false, Limit: 1, Remaining: 0, ResetAfter: time.Hour, RetryAfter: time.Hour},
	}
	for _, d := range decisions {
		// What the client should see as the reset: the wait until a permit
		// when denied, the time until full otherwise, in whole seconds.
		reset := ceilSeconds(d.ResetAfter)
		if !d.Allowed {
			reset = max(ceilSeconds(d.RetryAfter), 1)
		}
		want := Quota{
			Limit:     int64(d.Limit),
			Remaining: int64(d.Remaining),
			Reset:     now.Add(time.Duration(reset) * time.Second),
		}
		wantIETF := want
		wantIETF.Name, wantIETF.Unit = "default", "requests"

		for _, s := range []Style{0, Legacy, IETF, Both} {
			h := http.Header{}
			Write(h, d, s)
			info := Parse(h, now)

			var quotas []Quota
			if s&IETF != 0 {
				quotas = append(quotas, wantIETF)
			}
			if s&Legacy != 0 {
				quotas = append(quotas, want)
			}
			assert.Equal(t, quotas, info.Quotas, "style %d, %+v", s, d)
			if d.Allowed {
				assert.False(t, info.HasRetryAfter)
				continue
			}
			require.True(t, info.HasRetryAfter, "style %d: a denied decision always has Retry-After", s)
			assert.Equal(t, time.Duration(reset)*time.Second, info.RetryAfter)
			assert.GreaterOrEqual(t, info.Delay(now), d.RetryAfter, "waiting Delay must be enough")
		}
	}
}

func TestStyleFlags(t *testing.T) {
	assert.Equal(t, Style(1), Legacy)
	assert.Equal(t, Style(2), IETF)
	assert.Equal(t, Legacy|IETF, Both)
}
