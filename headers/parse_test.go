package headers

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// now is the moment every test response arrives: 2024-01-02 15:00:00 UTC.
var now = time.Date(2024, 1, 2, 15, 0, 0, 0, time.UTC)

// hdr builds a header with canonical keys, one line per pair; a key given
// twice becomes two field lines.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func after(d time.Duration) time.Time { return now.Add(d) }

// parseCase is a header and what Parse makes of it.
type parseCase struct {
	name       string
	h          http.Header
	quotas     []Quota
	retryAfter time.Duration
	hasRetry   bool
	delay      time.Duration
}

// realWorldCases are headers real servers send.
func realWorldCases() []parseCase {
	return []parseCase{
		{
			name: "GitHub",
			h: hdr(
				"X-RateLimit-Limit", "5000",
				"X-RateLimit-Remaining", "0",
				"X-RateLimit-Used", "5000",
				"X-RateLimit-Reset", "1704207660",
				"X-RateLimit-Resource", "core",
			),
			quotas: []Quota{{Name: "core", Limit: 5000, Remaining: 0, Reset: after(time.Minute)}},
			delay:  time.Minute,
		},
		{
			name: "GitHub without Remaining",
			h: hdr(
				"X-RateLimit-Limit", "60",
				"X-RateLimit-Used", "58",
				"X-RateLimit-Reset", "1704211200",
				"X-RateLimit-Resource", "search",
			),
			quotas: []Quota{{Name: "search", Limit: 60, Remaining: 2, Reset: after(time.Hour)}},
		},
		{
			name: "OpenAI",
			h: hdr(
				"x-ratelimit-limit-requests", "60",
				"x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "0",
				"x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s",
				"x-ratelimit-reset-tokens", "6m0s",
			),
			quotas: []Quota{
				{Name: "requests", Limit: 60, Remaining: 0, Reset: after(time.Second), Unit: "requests"},
				{Name: "tokens", Limit: 150000, Remaining: 149984, Reset: after(6 * time.Minute), Unit: "tokens"},
			},
			delay: time.Second,
		},
		{
			name: "OpenAI odd durations",
			h: hdr(
				"x-ratelimit-remaining-requests", "0",
				"x-ratelimit-reset-requests", "1h2m3.5s",
				"x-ratelimit-remaining-tokens", "0",
				"x-ratelimit-reset-tokens", "20ms",
			),
			quotas: []Quota{
				{Name: "requests", Limit: -1, Remaining: 0, Reset: after(time.Hour + 2*time.Minute + 3500*time.Millisecond), Unit: "requests"},
				{Name: "tokens", Limit: -1, Remaining: 0, Reset: after(20 * time.Millisecond), Unit: "tokens"},
			},
			delay: time.Hour + 2*time.Minute + 3500*time.Millisecond,
		},
		{
			name: "Azure OpenAI",
			h: hdr(
				"x-ratelimit-remaining-requests", "0",
				"x-ratelimit-remaining-tokens", "1000",
				"x-ms-retry-after-ms", "1500",
				"Retry-After", "2",
			),
			quotas: []Quota{
				{Name: "requests", Limit: -1, Remaining: 0, Unit: "requests"},
				{Name: "tokens", Limit: -1, Remaining: 1000, Unit: "tokens"},
			},
			retryAfter: 1500 * time.Millisecond, hasRetry: true,
			delay: 1500 * time.Millisecond,
		},
		{
			name: "Kong",
			h: hdr(
				"X-RateLimit-Limit-Minute", "10",
				"X-RateLimit-Remaining-Minute", "0",
				"X-RateLimit-Limit-Hour", "100",
				"X-RateLimit-Remaining-Hour", "90",
				"RateLimit-Limit", "10",
				"RateLimit-Remaining", "0",
				"RateLimit-Reset", "20",
				"Retry-After", "20",
			),
			quotas: []Quota{
				{Limit: 10, Remaining: 0, Reset: after(20 * time.Second)},
				{Name: "hour", Limit: 100, Remaining: 90, Window: time.Hour},
				{Name: "minute", Limit: 10, Remaining: 0, Window: time.Minute},
			},
			retryAfter: 20 * time.Second, hasRetry: true,
			delay: 20 * time.Second,
		},
		{
			name: "Anthropic",
			h: hdr(
				"anthropic-ratelimit-requests-limit", "50",
				"anthropic-ratelimit-requests-remaining", "49",
				"anthropic-ratelimit-requests-reset", "2024-01-02T15:00:01Z",
				"anthropic-ratelimit-tokens-limit", "100000",
				"anthropic-ratelimit-tokens-remaining", "0",
				"anthropic-ratelimit-tokens-reset", "2024-01-02T15:00:30Z",
				"anthropic-ratelimit-input-tokens-limit", "80000",
				"anthropic-ratelimit-input-tokens-remaining", "0",
				"anthropic-ratelimit-input-tokens-reset", "2024-01-02T15:00:30.5Z",
				"anthropic-ratelimit-output-tokens-limit", "20000",
				"anthropic-ratelimit-output-tokens-remaining", "19000",
				"anthropic-ratelimit-output-tokens-reset", "2024-01-02T16:00:00+01:00",
				"retry-after", "30",
			),
			quotas: []Quota{
				{Name: "input-tokens", Limit: 80000, Remaining: 0, Reset: after(30500 * time.Millisecond), Unit: "tokens"},
				{Name: "output-tokens", Limit: 20000, Remaining: 19000, Reset: now, Unit: "tokens"},
				{Name: "requests", Limit: 50, Remaining: 49, Reset: after(time.Second), Unit: "requests"},
				{Name: "tokens", Limit: 100000, Remaining: 0, Reset: after(30 * time.Second), Unit: "tokens"},
			},
			retryAfter: 30 * time.Second, hasRetry: true,
			delay: 30500 * time.Millisecond,
		},
		{
			name: "Discord",
			h: hdr(
				"X-RateLimit-Limit", "5",
				"X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "1704207601.123",
				"X-RateLimit-Reset-After", "1.25",
				"X-RateLimit-Bucket", "abcd1234",
			),
			// Reset-After wins: it is relative, so clock skew cannot hurt.
			quotas: []Quota{{Name: "abcd1234", Limit: 5, Remaining: 0, Reset: after(1250 * time.Millisecond)}},
			delay:  1250 * time.Millisecond,
		},
		{
			name: "Discord fractional epoch",
			h: hdr(
				"X-RateLimit-Limit", "5",
				"X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "1704207601.123",
			),
			quotas: []Quota{{Limit: 5, Remaining: 0, Reset: after(1123 * time.Millisecond)}},
			delay:  1123 * time.Millisecond,
		},
		{
			name: "X",
			h: hdr(
				"x-rate-limit-limit", "900",
				"x-rate-limit-remaining", "899",
				"x-rate-limit-reset", "1704208500",
			),
			quotas: []Quota{{Limit: 900, Remaining: 899, Reset: after(15 * time.Minute)}},
		},
		{
			name: "epoch milliseconds",
			h: hdr(
				"X-RateLimit-Limit", "10",
				"X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "1704207602500",
			),
			quotas: []Quota{{Limit: 10, Remaining: 0, Reset: after(2500 * time.Millisecond)}},
			delay:  2500 * time.Millisecond,
		},
		{
			name: "Reddit",
			h: hdr(
				"X-Ratelimit-Used", "2",
				"X-Ratelimit-Remaining", "598.0",
				"X-Ratelimit-Reset", "540",
			),
			quotas: []Quota{{Limit: -1, Remaining: 598, Reset: after(9 * time.Minute)}},
		},
		{
			name:   "Shopify",
			h:      hdr("X-Shopify-Shop-Api-Call-Limit", "32/40"),
			quotas: []Quota{{Limit: 40, Remaining: 8}},
		},
		{
			name: "GitLab",
			h: hdr(
				"RateLimit-Name", "throttle_authenticated_api",
				"RateLimit-Limit", "60",
				"RateLimit-Observed", "67",
				"RateLimit-Remaining", "0",
				"RateLimit-Reset", "1704207660",
				"RateLimit-ResetTime", "Tue, 02 Jan 2024 15:01:00 GMT",
				"Retry-After", "60",
			),
			quotas:     []Quota{{Name: "throttle_authenticated_api", Limit: 60, Remaining: 0, Reset: after(time.Minute)}},
			retryAfter: time.Minute, hasRetry: true,
			delay: time.Minute,
		},
		{
			name: "GitLab ResetTime only",
			h: hdr(
				"RateLimit-Limit", "60",
				"RateLimit-Observed", "60",
				"RateLimit-ResetTime", "Tue, 02 Jan 2024 15:01:00 GMT",
			),
			quotas: []Quota{{Limit: 60, Remaining: 0, Reset: after(time.Minute)}},
			delay:  time.Minute,
		},
		{
			name: "Azure Resource Manager",
			h: hdr(
				"x-ms-ratelimit-remaining-subscription-reads", "11999",
				"x-ms-ratelimit-remaining-subscription-writes", "0",
				"x-ms-ratelimit-remaining-resource", "Microsoft.Compute/HighCostGet3Min;159,Microsoft.Compute/HighCostGet30Min;799",
			),
			quotas: []Quota{
				{Name: "Microsoft.Compute/HighCostGet3Min", Limit: -1, Remaining: 159},
				{Name: "Microsoft.Compute/HighCostGet30Min", Limit: -1, Remaining: 799},
				{Name: "subscription-reads", Limit: -1, Remaining: 11999},
				{Name: "subscription-writes", Limit: -1, Remaining: 0},
			},
		},
		{
			name: "Jira",
			h: hdr(
				"X-RateLimit-Limit", "100",
				"X-RateLimit-Remaining", "0",
				"X-RateLimit-FillRate", "10",
				"X-RateLimit-Interval-Seconds", "1",
				"X-RateLimit-Reset", "2024-01-02T15:04Z",
				"Retry-After", "5",
			),
			// Window is the time to refill Limit: 100 tokens at 10/s.
			quotas:     []Quota{{Limit: 100, Remaining: 0, Reset: after(4 * time.Minute), Window: 10 * time.Second}},
			retryAfter: 5 * time.Second, hasRetry: true,
			delay: 4 * time.Minute,
		},
		{
			name: "IETF latest, several policies",
			h: hdr(
				"RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`,
				"RateLimit", `"burst";r=50;t=30, "daily";r=0;t=3600`,
			),
			quotas: []Quota{
				{Name: "burst", Limit: 100, Remaining: 50, Reset: after(30 * time.Second), Window: time.Minute, Unit: "requests"},
				{Name: "daily", Limit: 1000, Remaining: 0, Reset: after(time.Hour), Window: 24 * time.Hour, Unit: "requests"},
			},
			delay: time.Hour,
		},
		{
			name: "IETF latest, tokens, partition keys, lines, unknown policy",
			h: hdr(
				"RateLimit-Policy", `day;q=1000;w=86400;pk=:Y2xpZW50:`,
				"RateLimit-Policy", `"minute";q=10;w=60;qu="concurrent-requests"`,
				"RateLimit", `minute;r=0;t=10`,
				"RateLimit", `"day";r=990;t=7200;pk=:Y2xpZW50:, "other";r=3;pk=:b3RoZXI=:`,
			),
			quotas: []Quota{
				{Name: "day", Limit: 1000, Remaining: 990, Reset: after(2 * time.Hour), Window: 24 * time.Hour, Unit: "requests", Partition: "client"},
				{Name: "minute", Limit: 10, Remaining: 0, Reset: after(10 * time.Second), Window: time.Minute, Unit: "concurrent-requests"},
				{Name: "other", Limit: -1, Remaining: 3, Partition: "other"},
			},
			delay: 10 * time.Second,
		},
		{
			name: "IETF latest, policy only",
			h:    hdr("RateLimit-Policy", `"default";q=100`),
			quotas: []Quota{
				{Name: "default", Limit: 100, Remaining: -1, Unit: "requests"},
			},
		},
		{
			name: "IETF draft 07 dictionary",
			h: hdr(
				"RateLimit", "limit=100, remaining=0, reset=30",
				"RateLimit-Policy", "10;w=1, 100;w=60",
			),
			quotas: []Quota{{Limit: 100, Remaining: 0, Reset: after(30 * time.Second), Window: time.Minute}},
			delay:  30 * time.Second,
		},
		{
			name: "IETF early drafts, separate fields with inline policy",
			h: hdr(
				"RateLimit-Limit", "100, 100;w=60",
				"RateLimit-Remaining", "50",
				"RateLimit-Reset", "30",
			),
			quotas: []Quota{{Limit: 100, Remaining: 50, Reset: after(30 * time.Second), Window: time.Minute}},
		},
		{
			name: "IETF early drafts, several inline policies",
			h: hdr(
				"RateLimit-Limit", "10, 10;w=1, 50;w=60",
				"RateLimit-Remaining", "0",
				"RateLimit-Reset", "1",
			),
			quotas: []Quota{{Limit: 10, Remaining: 0, Reset: after(time.Second), Window: time.Second}},
			delay:  time.Second,
		},
		{
			name: "IETF draft 06, separate RateLimit-Policy",
			h: hdr(
				"RateLimit-Limit", "100",
				"RateLimit-Remaining", "99",
				"RateLimit-Reset", "59",
				"RateLimit-Policy", "100;w=60",
			),
			quotas: []Quota{{Limit: 100, Remaining: 99, Reset: after(59 * time.Second), Window: time.Minute}},
		},
		{
			name: "nothing",
			h:    hdr("Content-Type", "text/plain"),
		},
	}
}

func TestParseRealWorld(t *testing.T) {
	for _, tt := range realWorldCases() {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(tt.h, now)
			assert.Equal(t, tt.quotas, info.Quotas)
			assert.Equal(t, tt.hasRetry, info.HasRetryAfter, "HasRetryAfter")
			assert.Equal(t, tt.retryAfter, info.RetryAfter, "RetryAfter")
			assert.Equal(t, tt.delay, info.Delay(now), "Delay")
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		value string
		want  time.Duration
		ok    bool
	}{
		{"seconds", "Retry-After", "120", 2 * time.Minute, true},
		{"zero", "Retry-After", "0", 0, true},
		{"whole decimal", "Retry-After", "2.0", 2 * time.Second, true},
		{"fraction", "Retry-After", "1.5", 1500 * time.Millisecond, true},
		{"spaces", "Retry-After", " 7 ", 7 * time.Second, true},
		{"IMF-fixdate", "Retry-After", "Tue, 02 Jan 2024 15:00:30 GMT", 30 * time.Second, true},
		{"RFC 850", "Retry-After", "Tuesday, 02-Jan-24 15:00:30 GMT", 30 * time.Second, true},
		{"asctime", "Retry-After", "Tue Jan  2 15:00:30 2024", 30 * time.Second, true},
		{"RFC 1123 with UTC", "Retry-After", "Tue, 02 Jan 2024 15:00:30 UTC", 30 * time.Second, true},
		{"RFC 1123 with offset", "Retry-After", "Tue, 02 Jan 2024 16:00:30 +0100", 30 * time.Second, true},
		{"RFC 1123 with EST", "Retry-After", "Tue, 02 Jan 2024 10:00:30 EST", 30 * time.Second, true},
		{"past date", "Retry-After", "Tue, 02 Jan 2024 14:00:00 GMT", 0, true},
		{"retry-after-ms", "Retry-After-Ms", "250", 250 * time.Millisecond, true},
		{"fractional ms", "Retry-After-Ms", "0.5", 500 * time.Microsecond, true},
		{"x-ms-retry-after-ms", "X-Ms-Retry-After-Ms", "1500", 1500 * time.Millisecond, true},
		{"X-Retry-In (Traefik)", "X-Retry-In", "95.238095ms", 95238095 * time.Nanosecond, true},
		{"X-Retry-In in seconds", "X-Retry-In", "1.5s", 1500 * time.Millisecond, true},
		{"X-Retry-In minutes", "X-Retry-In", "2m0.5s", 2*time.Minute + 500*time.Millisecond, true},
		{"X-Retry-In negative", "X-Retry-In", "-95ms", 0, false},
		{"X-Retry-In without unit", "X-Retry-In", "95", 0, false},
		{"negative", "Retry-After", "-5", 0, false},
		{"garbage", "Retry-After", "soon", 0, false},
		{"empty", "Retry-After", "", 0, false},
		{"exponent", "Retry-After", "1e3", 0, false},
		{"infinity", "Retry-After", "Inf", 0, false},
		{"hex", "Retry-After", "0x10", 0, false},
		{"trailing dot", "Retry-After", "5.", 0, false},
		{"366 days", "Retry-After", "31622400", 366 * 24 * time.Hour, true},
		{"beyond 366 days", "Retry-After", "31622401", 0, false},
		{"huge", "Retry-After", "99999999999999999999999", 0, false},
		{"far date", "Retry-After", "Tue, 02 Jan 2124 15:00:30 GMT", 0, false},
		{"ms beyond 366 days", "Retry-After-Ms", "31622400001", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(hdr(tt.key, tt.value), now)
			assert.Equal(t, tt.ok, info.HasRetryAfter)
			assert.Equal(t, tt.want, info.RetryAfter)
			assert.Equal(t, tt.want, info.Delay(now))
			assert.Empty(t, info.Quotas)
		})
	}

	t.Run("repeated lines take the longest", func(t *testing.T) {
		info := Parse(hdr("Retry-After", "5", "Retry-After", "junk", "Retry-After", "9"), now)
		assert.True(t, info.HasRetryAfter)
		assert.Equal(t, 9*time.Second, info.RetryAfter)
	})
	t.Run("Traefik's X-Retry-In wins over its Retry-After, rounded up", func(t *testing.T) {
		// Traefik's rate limiter (x/time/rate underneath) answers a request
		// it would have to delay too long with both: the exact wait, and
		// the same rounded up to whole seconds.
		info := Parse(hdr("Retry-After", "1", "X-Retry-In", "95.238095ms"), now)
		assert.True(t, info.HasRetryAfter)
		assert.Equal(t, 95238095*time.Nanosecond, info.RetryAfter)
	})
	t.Run("garbage X-Retry-In falls back to Retry-After", func(t *testing.T) {
		info := Parse(hdr("X-Retry-In", "soon", "Retry-After", "3"), now)
		assert.Equal(t, 3*time.Second, info.RetryAfter)
	})
	t.Run("garbage milliseconds fall back to Retry-After", func(t *testing.T) {
		info := Parse(hdr("Retry-After-Ms", "x", "Retry-After", "3"), now)
		assert.Equal(t, 3*time.Second, info.RetryAfter)
	})
}

func TestParseResetForms(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Time // zero: dropped
	}{
		{"delta seconds", "30", after(30 * time.Second)},
		{"fractional delta", "0.25", after(250 * time.Millisecond)},
		{"epoch seconds", "1704207630", after(30 * time.Second)},
		{"epoch seconds in the past", "1704207500", after(-100 * time.Second)},
		{"fractional epoch seconds", "1704207630.5", after(30500 * time.Millisecond)},
		{"epoch milliseconds", "1704207630250", after(30250 * time.Millisecond)},
		{"HTTP-date", "Tue, 02 Jan 2024 15:00:30 GMT", after(30 * time.Second)},
		{"RFC 1123 with UTC", "Tue, 02 Jan 2024 15:00:30 UTC", after(30 * time.Second)},
		{"RFC 3339", "2024-01-02T15:00:30Z", after(30 * time.Second)},
		{"RFC 3339 with fraction", "2024-01-02T15:00:30.75Z", after(30750 * time.Millisecond)},
		{"ISO without seconds", "2024-01-02T15:04Z", after(4 * time.Minute)},
		{"ISO without seconds, offset", "2024-01-02T16:04+01:00", after(4 * time.Minute)},
		{"Go duration", "1m30s", after(90 * time.Second)},
		{"zero Go duration", "0s", now},
		{"negative", "-30", time.Time{}},
		{"negative duration", "-1s", time.Time{}},
		{"garbage", "later", time.Time{}},
		{"far epoch", "1904207630", time.Time{}},
		{"far epoch ms", "9999999999999", time.Time{}},
		{"far date", "2030-01-02T15:00:30Z", time.Time{}},
		{"too long", "1234567890123456789012", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", tt.value), now)
			require.Len(t, info.Quotas, 1)
			assert.True(t, tt.want.Equal(info.Quotas[0].Reset), "got %v, want %v", info.Quotas[0].Reset, tt.want)
			assert.GreaterOrEqual(t, info.Delay(now), time.Duration(0))
		})
	}
}

func TestParseRawKeys(t *testing.T) {
	h := http.Header{
		"x-ratelimit-limit":              {"100"},
		"x-RATELIMIT-remaining":          {"0"},
		"x-ratelimit-reset":              {"30"},
		"retry-after":                    {"10"},
		"X-RATELIMIT-REMAINING-REQUESTS": {"5"},
		"ratelimit-policy":               {`"p";q=9`},
	}
	info := Parse(h, now)
	assert.Equal(t, []Quota{
		{Name: "p", Limit: 9, Remaining: -1, Unit: "requests"},
		{Limit: 100, Remaining: 0, Reset: after(30 * time.Second)},
		{Name: "requests", Limit: -1, Remaining: 5, Unit: "requests"},
	}, info.Quotas)
	assert.Equal(t, 10*time.Second, info.RetryAfter)
	assert.Equal(t, 30*time.Second, info.Delay(now))
}

func TestParseRepeated(t *testing.T) {
	gateway := Quota{Limit: 100, Remaining: 0, Reset: after(30 * time.Second)}
	origin := Quota{Limit: 1000, Remaining: 999, Reset: after(time.Hour)}

	t.Run("field lines", func(t *testing.T) {
		h := hdr(
			"X-RateLimit-Limit", "100", "X-RateLimit-Limit", "1000",
			"X-RateLimit-Remaining", "0", "X-RateLimit-Remaining", "999",
			"X-RateLimit-Reset", "30", "X-RateLimit-Reset", "3600",
		)
		info := Parse(h, now)
		assert.Equal(t, []Quota{gateway, origin}, info.Quotas)
		assert.Equal(t, 30*time.Second, info.Delay(now))
	})
	t.Run("list members", func(t *testing.T) {
		h := hdr(
			"X-RateLimit-Limit", "100, 1000",
			"X-RateLimit-Remaining", "0,999",
			"X-RateLimit-Reset", "30 , 3600",
		)
		assert.Equal(t, []Quota{gateway, origin}, Parse(h, now).Quotas)
	})
	t.Run("dates with commas", func(t *testing.T) {
		h := hdr(
			"X-RateLimit-Limit", "100, 1000",
			"X-RateLimit-Remaining", "0, 999",
			"X-RateLimit-Reset", "Tue, 02 Jan 2024 15:00:30 GMT, Tue, 02 Jan 2024 16:00:00 GMT",
		)
		assert.Equal(t, []Quota{gateway, origin}, Parse(h, now).Quotas)
	})
	t.Run("two spellings of one name", func(t *testing.T) {
		h := http.Header{
			"X-Ratelimit-Limit":     {"100"},
			"x-ratelimit-limit":     {"1000"},
			"X-Ratelimit-Remaining": {"0", "999"},
			"X-Ratelimit-Reset":     {"30", "3600"},
		}
		for range 20 { // map order must not matter
			assert.Equal(t, []Quota{gateway, origin}, Parse(h, now).Quotas)
		}
	})
	t.Run("garbage keeps its position", func(t *testing.T) {
		h := hdr(
			"X-RateLimit-Limit", "lots, 1000",
			"X-RateLimit-Remaining", "-1, 999",
			"X-RateLimit-Reset", "never, 3600",
		)
		assert.Equal(t, []Quota{origin}, Parse(h, now).Quotas)
	})
}

func TestParseGarbage(t *testing.T) {
	h := hdr(
		"X-RateLimit-Limit", "-5",
		"X-RateLimit-Remaining", "NaN",
		"X-RateLimit-Reset", "+Inf",
		"X-Shopify-Shop-Api-Call-Limit", "40",
		"RateLimit", `"x";r=-1;t=-5`,
		"RateLimit-Policy", `"x";q=-1;w=99999999999`,
		"Anthropic-Ratelimit-Requests-Limit", "1e9",
		"Anthropic-Ratelimit-", "1",
		"X-Ms-Ratelimit-Remaining-", "1",
		"Retry-After", "Tue, 32 Jan 2024 15:00:30 GMT",
	)
	info := Parse(h, now)
	assert.Equal(t, []Quota{{Name: "x", Limit: -1, Remaining: -1, Unit: "requests"}}, info.Quotas)
	assert.False(t, info.HasRetryAfter)
	assert.Zero(t, info.Delay(now))
}

func TestDelay(t *testing.T) {
	info := Info{
		Quotas: []Quota{
			{Remaining: 0, Reset: after(time.Minute)},
			{Remaining: 0},                          // no reset: says nothing about when
			{Remaining: 1, Reset: after(time.Hour)}, // not exhausted
			{Remaining: -1, Reset: after(time.Hour)},
		},
		RetryAfter: 2 * time.Minute, // ignored: HasRetryAfter is false
	}
	assert.Equal(t, time.Minute, info.Delay(now))
	info.HasRetryAfter = true
	assert.Equal(t, 2*time.Minute, info.Delay(now))
	assert.Equal(t, 2*time.Minute, info.Delay(now.Add(time.Hour)), "RetryAfter is relative")
	info.HasRetryAfter = false
	assert.Equal(t, time.Duration(0), info.Delay(now.Add(time.Hour)), "never negative")
	assert.Equal(t, time.Duration(0), Info{}.Delay(now))
}

// TestParseNamedRetryAfter: @nestjs/throttler names every field of a
// throttler other than its default after it, Retry-After included; a
// refusal's wait is the longest of those it carries.
func TestParseNamedRetryAfter(t *testing.T) {
	now := time.Unix(1_704_207_600, 0)
	h := http.Header{}
	h.Set("Retry-After-short", "1")
	info := Parse(h, now)
	if !info.HasRetryAfter || info.RetryAfter != time.Second {
		t.Errorf("Retry-After-short: 1 read as %v, %v; want 1s", info.RetryAfter, info.HasRetryAfter)
	}
	h.Set("Retry-After-long", "60")
	if info := Parse(h, now); info.RetryAfter != time.Minute {
		t.Errorf("Retry-After-short: 1 and Retry-After-long: 60 read as %v; want 1m0s", info.RetryAfter)
	}
	h = http.Header{"Retry-After-": {"5"}, "Retry-After-Ms": {"250"}}
	if info := Parse(h, now); info.RetryAfter != 250*time.Millisecond {
		t.Errorf("Retry-After- (no name) and retry-after-ms: 250 read as %v; want 250ms", info.RetryAfter)
	}
	h = http.Header{}
	h.Set("X-RateLimit-Limit-short", "10")
	h.Set("X-RateLimit-Remaining-short", "0")
	h.Set("X-RateLimit-Reset-short", "1")
	info = Parse(h, now)
	if len(info.Quotas) != 1 || info.Quotas[0].Name != "short" || info.Quotas[0].Limit != 10 || info.Quotas[0].Remaining != 0 || !info.Quotas[0].Reset.Equal(now.Add(time.Second)) {
		t.Errorf("NestJS's named fields read as %+v", info.Quotas)
	}
}
