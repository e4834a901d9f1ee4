package throttle

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
)

// TestHintsBeyondTheHorizonPauseForMaxPause: a server that says "stop" for
// longer than headers.Parse reads (more than 366 days) pauses the partition
// for WithMaxPause, not for nothing (nor for a short backoff); garbage and
// quotas at zero that never said when are not such hints.
func TestHintsBeyondTheHorizonPauseForMaxPause(t *testing.T) {
	const maxPause = 10 * time.Minute
	cases := []struct {
		name   string
		status int
		kv     []string
		want   time.Duration // the pause; 0: none
	}{
		{"429, Retry-After in 3170 years", 429, []string{"Retry-After", "99999999999"}, maxPause},
		{"429, Retry-After overflowing int64 nanoseconds", 429, []string{"Retry-After", "9999999999"}, maxPause},
		{"429, Retry-After in year 9999", 429, []string{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}, maxPause},
		{"429, retry-after-ms far ahead", 429, []string{"Retry-After-Ms", "99999999999999"}, maxPause},
		{"503, Retry-After far ahead", 503, []string{"Retry-After", "99999999999"}, maxPause},
		{"200, nothing remains until far ahead", 200, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999"}, maxPause},
		{"200, nothing remains until year 9999", 200, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "9999-12-31T23:59:59Z"}, maxPause},
		{"429, garbage Retry-After: a bare refusal", 429, []string{"Retry-After", "soon"}, time.Duration(float64(time.Second) * aimdCut)},
		{"503, garbage Retry-After: overloaded, a bare refusal", 503, []string{"Retry-After", "soon"}, time.Duration(float64(time.Second) * aimdCut)},
		{"200, nothing remains, no reset said", 200, []string{"X-RateLimit-Remaining", "0"}, 0},
		{"200, far reset with some remaining", 200, []string{"X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "99999999999"}, 0},
		{"429, Retry-After within the horizon", 429, []string{"Retry-After", "120"}, 2 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for i := 0; i < len(tc.kv); i += 2 {
						w.Header().Add(tc.kv[i], tc.kv[i+1])
					}
					w.WriteHeader(tc.status)
				})
				var until time.Time
				tr := NewTransport(handlerTransport{h: h}, WithMaxPause(maxPause), WithObserver(func(e Event) {
					if e.Kind == EventPaused {
						until = e.Until
					}
				}))
				defer tr.Close()
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
				require.NoError(t, err)
				resp.Body.Close()
				if tc.want == 0 {
					assert.True(t, until.IsZero(), "no pause")
					return
				}
				assert.Equal(t, tc.want, time.Until(until))
			})
		})
	}
}

func TestTimeLike(t *testing.T) {
	for v, want := range map[string]bool{
		"12": true, " 1.5 ": true, "99999999999999999999999": true,
		"Fri, 31 Dec 9999 23:59:59 GMT": true, "Fri, 31 Dec 9999 23:59:59 UTC": true,
		"9999-12-31T23:59:59Z": true, "Friday, 31-Dec-99 23:59:59 GMT": true,
		"": false, "soon": false, "-5": false, "1.": false, "1.2.3": false, "1e9": false, "0x10": false, "Inf": false,
	} {
		assert.Equal(t, want, timeLike(v), "%q", v)
	}
}

// FuzzFarHints: whatever a server sends, farHints does not panic, and it
// never calls "beyond the horizon" a Retry-After that headers.Parse reads.
func FuzzFarHints(f *testing.F) {
	for _, s := range []string{"120", "99999999999", "9999999999", "Fri, 31 Dec 9999 23:59:59 GMT", "soon", "1.", "-1", "0"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Retry-After": {v}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {v}}
		far := farHints(h, now)
		if backoff := Backoff(time.Second, time.Minute, 3, &http.Response{Header: h}); backoff < time.Second || backoff > time.Minute {
			t.Fatalf("Backoff %v outside [1s, 1m] for %q", backoff, v)
		}
		if far.retry && headers.Parse(http.Header{"Retry-After": {v}}, now).HasRetryAfter {
			t.Fatalf("Retry-After %q is read by headers.Parse, yet far", v)
		}
		if far.any() && !timeLike(v) {
			t.Fatalf("%q is not a number or a date, yet far", v)
		}
	})
}

func TestIsResetField(t *testing.T) {
	for k, want := range map[string]bool{
		"X-Ratelimit-Reset": true, "x-rate-limit-reset": true, "RateLimit-Reset": true,
		"x-ratelimit-reset-tokens": true, "Anthropic-Ratelimit-Tokens-Reset": true, "X-RateLimit-Reset-After": true,
		"X-Ratelimit-Remaining": false, "Reset": false, "Retry-After": false, "": false,
	} {
		assert.Equal(t, want, isResetField(k), k)
	}
}

// TestTwins: a quota written in whole seconds whose twin in the same
// answer (the same limit and remaining) is written finer, within the
// second the whole one rounds up, ends at the twin's; one without such a
// twin keeps its reset; an answer of more quotas than a gate keeps finds
// twins among them all; and reading them allocates nothing.
func TestTwins(t *testing.T) {
	now := t0.Add(123 * time.Millisecond)
	whole := now.Add(2 * time.Second) // "2": relative to the answer
	fine := now.Add(1700 * time.Millisecond)
	qs := []headers.Quota{
		{Name: "ietf", Limit: 10, Remaining: 3, Reset: whole},
		{Name: "x", Limit: 10, Remaining: 3, Reset: fine},
		{Name: "other", Limit: 20, Remaining: 3, Reset: whole},
		{Name: "far", Limit: 10, Remaining: 3, Reset: now.Add(4 * time.Second)},
	}
	twins(qs, now)
	assert.Equal(t, fine, qs[0].Reset, "narrowed by its twin")
	assert.Equal(t, whole, qs[2].Reset, "another limit: no twin")
	assert.Equal(t, now.Add(4*time.Second), qs[3].Reset, "the twin lies outside its second")

	all := []headers.Quota{{Limit: 10, Remaining: 3, Reset: whole}, {Limit: 10, Remaining: 3, Reset: whole}}
	twins(all, now)
	assert.Equal(t, whole, all[0].Reset, "no reset finer than the second: nothing to narrow")

	many := make([]headers.Quota, maxQuotas+1)
	for i := range many {
		many[i] = headers.Quota{Limit: int64(100 + i), Remaining: 1, Reset: whole}
	}
	many[maxQuotas] = headers.Quota{Limit: 100, Remaining: 1, Reset: fine}
	twins(many, now)
	assert.Equal(t, fine, many[0].Reset, "a twin past the quotas a gate keeps still counts")

	assert.Zero(t, testing.AllocsPerRun(100, func() { twins(qs, now) }))
}
