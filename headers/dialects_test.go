package headers

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestParseDialects holds one case per dialect, each from the examples in
// the provider's own documentation, asserting every field Parse reports.
// dialectCases are headers of the less common dialects.
func dialectCases() []parseCase {
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	return []parseCase{
		{
			// docs.docker.com/docker-hub/usage/pulls: the window rides on
			// both fields; remaining used to parse as unknown.
			name: "Docker Hub",
			h: hdr(
				"ratelimit-limit", "100;w=21600",
				"ratelimit-remaining", "76;w=21600",
				"docker-ratelimit-source", "192.0.2.1",
			),
			quotas: []Quota{{Limit: 100, Remaining: 76, Window: 6 * time.Hour}},
		},
		{
			name:   "Docker Hub, window on remaining only",
			h:      hdr("RateLimit-Remaining", "0;w=21600"),
			quotas: []Quota{{Limit: -1, Remaining: 0, Window: 6 * time.Hour}},
		},
		{
			// linear.app/developers/rate-limiting: resets are UTC epoch
			// milliseconds; X-Complexity is the cost of this query.
			name: "Linear",
			h: hdr(
				"X-RateLimit-Requests-Limit", "5000",
				"X-RateLimit-Requests-Remaining", "4999",
				"X-RateLimit-Requests-Reset", ms(59*time.Minute+1500*time.Millisecond),
				"X-Complexity", "25",
				"X-RateLimit-Complexity-Limit", "3000000",
				"X-RateLimit-Complexity-Remaining", "0",
				"X-RateLimit-Complexity-Reset", ms(90*time.Second),
				"X-RateLimit-Endpoint-Name", "issueCreate",
				"X-RateLimit-Endpoint-Requests-Limit", "1000",
				"X-RateLimit-Endpoint-Requests-Remaining", "950",
				"X-RateLimit-Endpoint-Requests-Reset", ms(30*time.Minute),
			),
			quotas: []Quota{
				{Name: "complexity", Limit: 3000000, Remaining: 0, Reset: after(90 * time.Second), Unit: "complexity"},
				{Name: "endpoint-requests", Limit: 1000, Remaining: 950, Reset: after(30 * time.Minute), Unit: "requests"},
				{Name: "requests", Limit: 5000, Remaining: 4999, Reset: after(59*time.Minute + 1500*time.Millisecond), Unit: "requests"},
			},
			delay: 90 * time.Second,
		},
		{
			// developers.hubspot.com/docs/developer-tooling/platform/usage-guidelines:
			// the daily limit resets at midnight in the account's time
			// zone, which no header says.
			name: "HubSpot, API key",
			h: hdr(
				"X-HubSpot-RateLimit-Daily", "500000",
				"X-HubSpot-RateLimit-Daily-Remaining", "499995",
				"X-HubSpot-RateLimit-Interval-Milliseconds", "10000",
				"X-HubSpot-RateLimit-Max", "190",
				"X-HubSpot-RateLimit-Remaining", "0",
				"X-HubSpot-RateLimit-Secondly", "19",
				"X-HubSpot-RateLimit-Secondly-Remaining", "18",
			),
			quotas: []Quota{
				{Name: "daily", Limit: 500000, Remaining: 499995, Window: 24 * time.Hour, Unit: "requests"},
				{Name: "interval", Limit: 190, Remaining: 0, Window: 10 * time.Second, Unit: "requests"},
				{Name: "secondly", Limit: 19, Remaining: 18, Window: time.Second, Unit: "requests"},
			},
		},
		{
			// OAuth apps get no daily headers.
			name: "HubSpot, OAuth",
			h: hdr(
				"X-HubSpot-RateLimit-Interval-Milliseconds", "10000",
				"X-HubSpot-RateLimit-Max", "100",
				"X-HubSpot-RateLimit-Remaining", "99",
			),
			quotas: []Quota{{Name: "interval", Limit: 100, Remaining: 99, Window: 10 * time.Second, Unit: "requests"}},
		},
		{
			// developer.salesforce.com REST API, "Limit Info Header".
			name: "Salesforce",
			h:    hdr("Sforce-Limit-Info", "api-usage=18/5000"),
			quotas: []Quota{
				{Name: "api-usage", Limit: 5000, Remaining: 4982, Window: 24 * time.Hour, Unit: "requests"},
			},
		},
		{
			name: "Salesforce, per connected app",
			h:    hdr("Sforce-Limit-Info", "api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)"),
			quotas: []Quota{
				{Name: "api-usage", Limit: 5000, Remaining: 4975, Window: 24 * time.Hour, Unit: "requests"},
				{Name: "per-app-api-usage", Limit: 250, Remaining: 233, Unit: "requests", Partition: "sample-connected-app"},
			},
		},
		{
			// Usage beyond the limit (bursts) is nothing left, not a
			// negative count; api-bursts counts no requests.
			name: "Salesforce, bursting",
			h:    hdr("Sforce-Limit-Info", "api-usage=110018/100000; api-bursts=1/750"),
			quotas: []Quota{
				{Name: "api-usage", Limit: 100000, Remaining: 0, Window: 24 * time.Hour, Unit: "requests"},
			},
		},
		{
			// apisix.apache.org/docs/apisix/plugins/ai-rate-limiting: a 429
			// once both instances' token quotas are spent; Reset is the
			// seconds left in the window.
			name: "APISIX ai-rate-limiting, refused",
			h: hdr(
				"X-AI-RateLimit-Limit-openai-instance", "100",
				"X-AI-RateLimit-Remaining-openai-instance", "0",
				"X-AI-RateLimit-Reset-openai-instance", "0",
				"X-AI-RateLimit-Limit-deepseek-instance", "100",
				"X-AI-RateLimit-Remaining-deepseek-instance", "0",
				"X-AI-RateLimit-Reset-deepseek-instance", "0",
			),
			quotas: []Quota{
				{Name: "deepseek-instance", Limit: 100, Remaining: 0, Reset: now, Unit: "tokens"},
				{Name: "openai-instance", Limit: 100, Remaining: 0, Reset: now, Unit: "tokens"},
			},
		},
		{
			name: "APISIX ai-rate-limiting, mid-window",
			h: hdr(
				"X-AI-RateLimit-Limit-openai-primary", "100000",
				"X-AI-RateLimit-Remaining-openai-primary", "99153",
				"X-AI-RateLimit-Reset-openai-primary", "42",
			),
			quotas: []Quota{{Name: "openai-primary", Limit: 100000, Remaining: 99153, Reset: after(42 * time.Second), Unit: "tokens"}},
		},
		{
			// draft-ietf-httpapi-ratelimit-headers-11, sections 3.2 and 4.2.
			name: "IETF, quota unit and partition key",
			h: hdr(
				"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:c2RmakxKVU9VSA==:`,
				"RateLimit", `"peruser";r=300;t=3`,
			),
			quotas: []Quota{{
				Name: "peruser", Limit: 65535, Remaining: 300, Reset: after(3 * time.Second),
				Window: 10 * time.Second, Unit: "content-bytes", Partition: "sdfjLJUOUH",
			}},
		},
		{
			name:   "IETF, partition key without a time window",
			h:      hdr("RateLimit", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`),
			quotas: []Quota{{Name: "default", Limit: -1, Remaining: 999, Partition: "trial121323"}},
		},
		{
			// A partition key tells two buckets of one policy apart.
			name: "IETF, two partitions of one policy",
			h: hdr(
				"RateLimit-Policy", `"peruser";q=10;w=60;pk=:YQ==:, "peruser";q=20;w=60;pk=:Yg==:`,
				"RateLimit", `"peruser";r=0;t=5;pk=:Yg==:`,
			),
			quotas: []Quota{
				{Name: "peruser", Limit: 10, Remaining: -1, Window: time.Minute, Unit: "requests", Partition: "a"},
				{Name: "peruser", Limit: 20, Remaining: 0, Reset: after(5 * time.Second), Window: time.Minute, Unit: "requests", Partition: "b"},
			},
			delay: 5 * time.Second,
		},
		{
			name:   "IETF, concurrency",
			h:      hdr("RateLimit-Policy", `"inflight";q=10;qu="concurrent-requests"`),
			quotas: []Quota{{Name: "inflight", Limit: 10, Remaining: -1, Unit: "concurrent-requests"}},
		},
	}
}

func TestParseDialects(t *testing.T) {
	for _, tt := range dialectCases() {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(tt.h, now)
			assert.Equal(t, tt.quotas, info.Quotas)
			assert.Equal(t, tt.delay, info.Delay(now), "Delay")
		})
	}
}

// TestParseCached: the draft says rate-limit fields on a response from a
// cache (a positive Age) are stale and ignored; Retry-After is counted from
// when the response is received, so it stays.
func TestParseCached(t *testing.T) {
	fields := []string{
		"X-RateLimit-Limit", "60",
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "30",
		"RateLimit-Policy", `"p";q=60;w=60`,
		"RateLimit", `"p";r=0;t=30`,
		"Retry-After", "5",
	}
	for _, tc := range []struct {
		age    string
		quotas int
	}{
		{"", 2}, {"0", 2}, {"junk", 2}, {"-3", 2},
		{"1", 0}, {"3600", 0},
	} {
		h := hdr(fields...)
		if tc.age != "" {
			h.Set("Age", tc.age)
		}
		info := Parse(h, now)
		assert.Len(t, info.Quotas, tc.quotas, "Age %q", tc.age)
		assert.True(t, info.HasRetryAfter, "Age %q", tc.age)
		assert.Equal(t, 5*time.Second, info.RetryAfter, "Age %q", tc.age)
	}
	// Raw lower-case key, as a map literal may have it.
	info := Parse(http.Header{"age": {"10"}, "x-ratelimit-remaining": {"0"}}, now)
	assert.Empty(t, info.Quotas)
}

func TestParseDialectsRawKeys(t *testing.T) {
	h := http.Header{
		"x-ratelimit-requests-remaining":      {"3"},
		"X-HUBSPOT-RATELIMIT-DAILY-REMAINING": {"7"},
		"sforce-limit-info":                   {"api-usage=1/10"},
		"x-ai-ratelimit-remaining-Inst":       {"5"},
	}
	assert.Equal(t, []Quota{
		{Name: "requests", Limit: -1, Remaining: 3, Unit: "requests"},
		{Name: "inst", Limit: -1, Remaining: 5, Unit: "tokens"},
		{Name: "daily", Limit: -1, Remaining: 7, Window: 24 * time.Hour, Unit: "requests"},
		{Name: "api-usage", Limit: 10, Remaining: 9, Window: 24 * time.Hour, Unit: "requests"},
	}, Parse(h, now).Quotas)
}
