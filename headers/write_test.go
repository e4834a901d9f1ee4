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
			"X-Ratelimit-Limit":       {"100"},
			"X-Ratelimit-Remaining":   {"42"},
			"X-Ratelimit-Reset":       {"30"},
			"X-Ratelimit-Reset-After": {"29.500"},
		}},
		{"legacy denied", denied, Legacy, http.Header{
			"Retry-After":             {"1"},
			"X-Ratelimit-Limit":       {"100"},
			"X-Ratelimit-Remaining":   {"0"},
			"X-Ratelimit-Reset":       {"1"},
			"X-Ratelimit-Reset-After": {"0.600"},
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
			"X-Ratelimit-Limit":       {"100"},
			"X-Ratelimit-Remaining":   {"42"},
			"X-Ratelimit-Reset":       {"30"},
			"X-Ratelimit-Reset-After": {"29.500"},
			"Ratelimit-Policy":        {`"default";q=100`},
			"Ratelimit":               {`"default";r=42;t=30`},
		}},
		{"zero style allowed", allowed, 0, http.Header{}},
		{"zero style denied", denied, 0, http.Header{"Retry-After": {"1"}}},
		{"exhausted but allowed advertises the full reset",
			limiters.Decision{Allowed: true, Limit: 10, ResetAfter: 5 * time.Second}, Legacy, http.Header{
				"X-Ratelimit-Limit":       {"10"},
				"X-Ratelimit-Remaining":   {"0"},
				"X-Ratelimit-Reset":       {"5"},
				"X-Ratelimit-Reset-After": {"5.000"},
			}},
		{"IETF t is the time until more quota when an allowed decision says it",
			limiters.Decision{Allowed: true, Limit: 10, ResetAfter: 5 * time.Second, RetryAfter: 500 * time.Millisecond}, Both, http.Header{
				"X-Ratelimit-Limit":       {"10"},
				"X-Ratelimit-Remaining":   {"0"},
				"X-Ratelimit-Reset":       {"5"},
				"X-Ratelimit-Reset-After": {"5.000"},
				"Ratelimit-Policy":        {`"default";q=10`},
				"Ratelimit":               {`"default";r=0;t=1`},
			}},
		{"denied with no RetryAfter still says 1",
			limiters.Decision{Limit: 10}, 0, http.Header{"Retry-After": {"1"}}},
		{"whole seconds are not rounded up",
			limiters.Decision{Limit: 10, RetryAfter: 3 * time.Second}, 0, http.Header{"Retry-After": {"3"}}},
		{"negative counts are written as zero",
			limiters.Decision{Allowed: true, Limit: -1, Remaining: -5, ResetAfter: -time.Second}, Legacy, http.Header{
				"X-Ratelimit-Limit":       {"0"},
				"X-Ratelimit-Remaining":   {"0"},
				"X-Ratelimit-Reset":       {"0"},
				"X-Ratelimit-Reset-After": {"0.000"},
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
		// The legacy triple's X-RateLimit-Reset-After says the same wait
		// to the millisecond, and Parse reads it.
		reset, wait := ceilSeconds(d.ResetAfter), d.ResetAfter
		if !d.Allowed {
			reset, wait = max(ceilSeconds(d.RetryAfter), 1), d.RetryAfter
		}
		want := Quota{
			Limit:     int64(d.Limit),
			Remaining: int64(d.Remaining),
			Reset:     now.Add(wait.Round(time.Millisecond)),
		}
		wantIETF := want
		wantIETF.Name, wantIETF.Unit = "default", "requests"
		wantIETF.Reset = now.Add(time.Duration(reset) * time.Second)

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

func TestWriteLimits(t *testing.T) {
	minute := Limit{Name: "POST /api/ask 10/1m", Quota: 10, Window: time.Minute, Remaining: 0, Reset: 1500 * time.Millisecond,
		Refused: true, RetryAfter: 1500 * time.Millisecond}
	day := Limit{Name: "POST /api/ask 1000/1d", Quota: 1000, Window: 24 * time.Hour, Remaining: 990, Reset: 81166 * time.Second}
	h := http.Header{}
	WriteLimits(h, []Limit{day, minute}, Both)
	assert.Equal(t, http.Header{
		"Retry-After":             {"2"},
		"Retry-After-Ms":          {"1500"},
		"X-Ratelimit-Limit":       {"10"},
		"X-Ratelimit-Remaining":   {"0"},
		"X-Ratelimit-Reset":       {"2"},
		"X-Ratelimit-Reset-After": {"1.500"},
		"Ratelimit-Policy":        {`"POST /api/ask 1000/1d";q=1000;w=86400, "POST /api/ask 10/1m";q=10;w=60`},
		"Ratelimit":               {`"POST /api/ask 1000/1d";r=990;t=81166, "POST /api/ask 10/1m";r=0;t=2`},
	}, h)

	info := Parse(h, now)
	assert.Equal(t, 1500*time.Millisecond, info.RetryAfter, "retry-after-ms wins over whole seconds")
	assert.Equal(t, []Quota{
		{Name: "POST /api/ask 1000/1d", Limit: 1000, Remaining: 990, Window: 24 * time.Hour, Reset: now.Add(81166 * time.Second), Unit: "requests"},
		{Name: "POST /api/ask 10/1m", Limit: 10, Remaining: 0, Window: time.Minute, Reset: now.Add(2 * time.Second), Unit: "requests"},
		{Limit: 10, Remaining: 0, Reset: now.Add(1500 * time.Millisecond)}, // Reset-After, to the millisecond
	}, info.Quotas)

	// Allowed: the legacy triple is the limit with the least left, all
	// three numbers its own.
	minute.Refused, minute.Remaining, minute.Reset = false, 3, 6*time.Second
	h = http.Header{}
	WriteLimits(h, []Limit{day, minute}, Legacy)
	assert.Equal(t, http.Header{
		"X-Ratelimit-Limit":       {"10"},
		"X-Ratelimit-Remaining":   {"3"},
		"X-Ratelimit-Reset":       {"6"},
		"X-Ratelimit-Reset-After": {"6.000"},
	}, h)

	// Final: no Retry-After; units, no window and no t are written so.
	h = http.Header{}
	WriteLimits(h, []Limit{
		{Name: "cap", Quota: 1000, Window: time.Hour, Unit: "cost", Remaining: 1000, Reset: -1, Refused: true, Final: true},
		{Name: "in flight \"x\" é", Quota: 5, Unit: "concurrent-requests", Remaining: 4, Reset: -1},
	}, Both)
	assert.Equal(t, http.Header{
		"X-Ratelimit-Limit":       {"1000"},
		"X-Ratelimit-Remaining":   {"1000"},
		"X-Ratelimit-Reset":       {"3600"},
		"X-Ratelimit-Reset-After": {"3600.000"},
		"Ratelimit-Policy":        {`"cap";q=1000;qu="cost";w=3600, "in flight \"x\" %C3%A9";q=5;qu="concurrent-requests"`},
		"Ratelimit":               {`"cap";r=1000, "in flight \"x\" %C3%A9";r=4`},
	}, h)
	qs := Parse(h, now).Quotas
	require.Len(t, qs, 3)
	assert.Equal(t, Quota{Name: "cap", Limit: 1000, Remaining: 1000, Window: time.Hour, Unit: "cost"}, qs[0])
	assert.Equal(t, Quota{Name: `in flight "x" %C3%A9`, Limit: 5, Remaining: 4, Unit: "concurrent-requests"}, qs[1])

	h = http.Header{}
	WriteLimits(h, nil, Both)
	assert.Empty(t, h)
}

func TestBinding(t *testing.T) {
	assert.Equal(t, -1, Binding(nil))
	ls := []Limit{
		{Quota: 100, Remaining: 50},
		{Quota: 10, Remaining: 4}, // the least left: refuses first
		{Quota: 1000, Remaining: 900},
	}
	assert.Equal(t, 1, Binding(ls))
	assert.Equal(t, 1, Binding([]Limit{{Quota: 20, Remaining: 19}, {Quota: 1000, Remaining: 19}}), "ties: the least share")
	assert.Equal(t, 0, Binding([]Limit{{Quota: 20, Remaining: 19}, {Quota: 1000, Remaining: 880}}), "not the least share: 19 refuses before 880")
	ls[2].Refused, ls[2].RetryAfter = true, time.Second
	assert.Equal(t, 2, Binding(ls), "a refusing limit binds")
	ls[0].Refused, ls[0].RetryAfter = true, time.Minute
	assert.Equal(t, 0, Binding(ls), "the longest refusal binds")
	ls[2].Final = true
	assert.Equal(t, 2, Binding(ls), "a final refusal binds")
}

// FuzzWriteLimits: whatever the limits, the fields Parse reads back are
// each limit's own q, r and w, rounded as documented, and never a panic.
func FuzzWriteLimits(f *testing.F) {
	f.Add("a", int64(10), int64(60), int64(3), int64(1500), "b", int64(5), int64(0), int64(0), int64(-1), true)
	f.Fuzz(func(t *testing.T, n1 string, q1, w1, r1, t1 int64, n2 string, q2, w2, r2, t2 int64, refused bool) {
		if n1 == n2 {
			return
		}
		clamp := func(v, hi int64) int64 { return max(min(v, hi), -1) }
		mk := func(n string, q, w, r, tt int64) Limit {
			return Limit{Name: n, Quota: clamp(q, 1<<40), Window: time.Duration(clamp(w, 1<<20)) * time.Millisecond * 1000,
				Remaining: clamp(r, 1<<40), Reset: time.Duration(clamp(tt, 1<<30)) * time.Millisecond}
		}
		ls := []Limit{mk(n1, q1, w1, r1, t1), mk(n2, q2, w2, r2, t2)}
		ls[1].Refused, ls[1].RetryAfter = refused, max(ls[1].Reset, 0)
		h := http.Header{}
		WriteLimits(h, ls, Both)
		info := Parse(h, now)
		if refused {
			require.True(t, info.HasRetryAfter)
			require.GreaterOrEqual(t, info.RetryAfter, ls[1].RetryAfter, "never earlier than the limit says")
		}
		for _, q := range info.Quotas {
			for _, l := range ls {
				if l.Name == "" || l.Name != q.Name {
					continue // or escaped: TestWriteLimits checks that
				}
				require.Equal(t, max(l.Quota, 0), q.Limit)
				require.Equal(t, max(l.Remaining, 0), q.Remaining)
				if !q.Reset.IsZero() {
					require.GreaterOrEqual(t, q.Reset.Sub(now), l.Reset)
				}
			}
		}
	})
}
