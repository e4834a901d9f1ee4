package headers

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		h      http.Header
		body   string
		want   Classification
	}{
		{
			// docs.github.com, "Rate limits for the REST API": a secondary
			// limit, no Retry-After, so wait at least a minute.
			name:   "GitHub secondary limit, 403",
			status: 403,
			h:      hdr("Content-Type", "application/json; charset=utf-8", "X-RateLimit-Remaining", "4990"),
			body:   `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID ABCD:1234.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`,
			want:   Classification{Signal: RateLimited, Code: "secondary_rate_limit", MinWait: SecondaryLimitWait, Limit: -1, Requested: -1},
		},
		{
			name:   "GitHub secondary limit, 429",
			status: 429,
			body:   `{"message":"You have exceeded a secondary rate limit and have been temporarily blocked from content creation."}`,
			want:   Classification{Signal: RateLimited, Code: "secondary_rate_limit", MinWait: SecondaryLimitWait, Limit: -1, Requested: -1},
		},
		{
			name:   "GitHub secondary limit with Retry-After",
			status: 403,
			h:      hdr("Retry-After", "30"),
			body:   `{"message":"You have exceeded a secondary rate limit."}`,
			want:   Classification{Signal: RateLimited, Code: "secondary_rate_limit", Limit: -1, Requested: -1},
		},
		{
			name:   "GitHub primary limit: 403 with remaining 0",
			status: 403,
			h:      hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1704211200"),
			body:   `{"message":"API rate limit exceeded for 192.0.2.1."}`,
			want:   Classification{Signal: RateLimited, Limit: -1, Requested: -1},
		},
		{
			name:   "403 with Retry-After",
			status: 403,
			h:      hdr("Retry-After", "Tue, 02 Jan 2024 15:01:00 GMT"),
			want:   Classification{Signal: RateLimited, Limit: -1, Requested: -1},
		},
		{
			name:   "a plain 403 is a permission error",
			status: 403,
			h:      hdr("X-RateLimit-Remaining", "4999"),
			body:   `{"message":"Resource not accessible by integration"}`,
			want:   Classification{Limit: -1, Requested: -1},
		},
		{
			// platform.openai.com/docs/guides/error-codes: billing.
			name:   "OpenAI insufficient_quota",
			status: 429,
			h:      hdr("x-should-retry", "false"),
			body:   `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			want:   Classification{Signal: QuotaExhausted, Code: "insufficient_quota", ShouldRetry: RetryNo, Limit: -1, Requested: -1},
		},
		{
			name:   "OpenAI request too large",
			status: 429,
			body:   `{"error":{"message":"Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45411. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			want:   Classification{Signal: TooLarge, Code: "rate_limit_exceeded", Limit: 30000, Requested: 45411},
		},
		{
			// A rate limit names numbers too, but is not too large.
			name:   "OpenAI rate limit reached",
			status: 429,
			h:      hdr("x-should-retry", "true"),
			body:   `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			want:   Classification{Signal: RateLimited, Code: "rate_limit_exceeded", ShouldRetry: RetryYes, Limit: -1, Requested: -1},
		},
		{
			// docs.anthropic.com/en/api/errors.
			name:   "Anthropic overloaded",
			status: 529,
			h:      hdr("x-should-retry", "true"),
			body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`,
			want:   Classification{Signal: Overloaded, Code: "overloaded_error", ShouldRetry: RetryYes, Limit: -1, Requested: -1},
		},
		{
			name:   "Anthropic overloaded_error under another status",
			status: 503,
			body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			want:   Classification{Signal: Overloaded, Code: "overloaded_error", Limit: -1, Requested: -1},
		},
		{
			name:   "529 without a body",
			status: 529,
			want:   Classification{Signal: Overloaded, Limit: -1, Requested: -1},
		},
		{
			name:   "Anthropic rate limit",
			status: 429,
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 10,000 input tokens per minute."}}`,
			want:   Classification{Signal: RateLimited, Code: "rate_limit_error", Limit: -1, Requested: -1},
		},
		{
			name:   "Anthropic spend limit",
			status: 429,
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified spend limit.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			want:   Classification{Signal: QuotaExhausted, Code: "enforced_spend_limit_reached", Limit: -1, Requested: -1},
		},
		{
			name:   "Anthropic request too large",
			status: 413,
			body:   `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
			want:   Classification{Signal: TooLarge, Code: "request_too_large", Limit: -1, Requested: -1},
		},
		{
			name:   "413 from a proxy, in HTML",
			status: 413,
			body:   `<html><body>Request Entity Too Large</body></html>`,
			want:   Classification{Signal: TooLarge, Limit: -1, Requested: -1},
		},
		{
			// draft-ietf-httpapi-ratelimit-headers, section 5.
			name:   "IETF quota-exceeded",
			status: 429,
			h:      hdr("Content-Type", "application/problem+json"),
			body:   `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","violated-policies":["daily","bandwidth"]}`,
			want:   Classification{Signal: RateLimited, Code: ProblemTypeQuotaExceeded, ViolatedPolicies: []string{"daily", "bandwidth"}, Limit: -1, Requested: -1},
		},
		{
			name:   "IETF temporary-reduced-capacity",
			status: 503,
			body:   `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Request cannot be satisfied due to temporary server capacity constraints","violated-policies":["hourly"]}`,
			want:   Classification{Signal: Overloaded, Code: ProblemTypeTemporaryReducedCapacity, ViolatedPolicies: []string{"hourly"}, Limit: -1, Requested: -1},
		},
		{
			name:   "IETF abnormal-usage-detected",
			status: 429,
			body:   `{"type":"https://iana.org/assignments/http-problem-types#abnormal-usage-detected","title":"Request not satisifed due to detection of abnormal request pattern","violated-policies":["hourly"]}`,
			want:   Classification{Signal: RateLimited, Code: ProblemTypeAbnormalUsageDetected, ViolatedPolicies: []string{"hourly"}, Limit: -1, Requested: -1},
		},
		{
			name:   "this project's request-exceeds-limit is final",
			status: 429,
			body:   `{"type":"https://github.com/throttlekit/throttle#a-request-that-can-never-fit","title":"Request Exceeds Limit","status":429,"violated-policies":["POST /api/ask cost 1000/1h"]}`,
			want:   Classification{Signal: TooLarge, Code: ProblemTypeRequestExceedsLimit, ViolatedPolicies: []string{"POST /api/ask cost 1000/1h"}, Limit: -1, Requested: -1},
		},
		{
			name:   "request-exceeds-limit in a body cut short by the peek",
			status: 429,
			body:   `{"type":"https://github.com/throttlekit/throttle#a-request-that-can-never-fit","ti`,
			want:   Classification{Signal: TooLarge, Code: ProblemTypeRequestExceedsLimit, Limit: -1, Requested: -1},
		},
		{
			name:   "problem type in a body cut short by the peek",
			status: 503,
			body:   `{"type": "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Requ`,
			want:   Classification{Signal: Overloaded, Code: ProblemTypeTemporaryReducedCapacity, Limit: -1, Requested: -1},
		},
		{
			name:   "insufficient_quota in a body cut short",
			status: 429,
			body:   `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","par`,
			want:   Classification{Signal: QuotaExhausted, Code: "insufficient_quota", Limit: -1, Requested: -1},
		},
		{
			name:   "a bare 429",
			status: 429,
			want:   Classification{Signal: RateLimited, Limit: -1, Requested: -1},
		},
		{
			name:   "a bare 503",
			status: 503,
			body:   "upstream connect error",
			want:   Classification{Signal: Overloaded, Limit: -1, Requested: -1},
		},
		{
			name:   "success says nothing, even with a scary body",
			status: 200,
			body:   `{"error":{"type":"insufficient_quota"}}`,
			want:   Classification{Limit: -1, Requested: -1},
		},
		{
			name:   "x-should-retry on a 500",
			status: 500,
			h:      http.Header{"x-should-retry": {" TRUE "}},
			want:   Classification{ShouldRetry: RetryYes, Limit: -1, Requested: -1},
		},
		{
			name:   "x-should-retry garbage",
			status: 500,
			h:      hdr("X-Should-Retry", "maybe"),
			want:   Classification{Limit: -1, Requested: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			if h == nil {
				h = http.Header{}
			}
			assert.Equal(t, tt.want, Classify(tt.status, h, []byte(tt.body)))
		})
	}
}

func TestSignal(t *testing.T) {
	for s, want := range map[Signal]struct {
		name  string
		final bool
	}{
		NoSignal:       {"none", false},
		RateLimited:    {"rate limited", false},
		Overloaded:     {"overloaded", false},
		QuotaExhausted: {"quota exhausted", true},
		TooLarge:       {"request too large", true},
		Signal(200):    {"unknown", false},
	} {
		assert.Equal(t, want.name, s.String())
		assert.Equal(t, want.final, s.Final(), s.String())
	}
}

func TestNumberAfter(t *testing.T) {
	for _, tc := range []struct {
		s     string
		label string
		want  int64
	}{
		{"Limit 30000, Requested 45411.", "Limit ", 30000},
		{"Limit 30000, Requested 45411.", "Requested ", 45411},
		{"Limit 1,000,000, Requested 2", "Limit ", 1000000},
		{"Limit , Requested", "Limit ", -1},
		{"no numbers", "Limit ", -1},
		{"Limit 99999999999999999999999", "Limit ", 999999999999999999},
	} {
		assert.Equal(t, tc.want, numberAfter(tc.s, tc.label), tc.s)
	}
}
