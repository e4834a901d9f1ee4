package headers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The problem types draft-ietf-httpapi-ratelimit-headers registers for
// RFC 9457 problem details (application/problem+json). Each carries a
// "violated-policies" member: the names of the RateLimit-Policy items
// concerned.
const (
	// ProblemTypeQuotaExceeded: the client's requests exceed one or more
	// quota policies (recommended status 429).
	ProblemTypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemTypeTemporaryReducedCapacity: the server's capacity is
	// temporarily reduced (recommended status 503).
	ProblemTypeTemporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	// ProblemTypeAbnormalUsageDetected: the server saw a request pattern
	// it takes as unintentional or malicious (recommended status 429).
	ProblemTypeAbnormalUsageDetected = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
)

// ProblemTypeRequestExceedsLimit is this project's problem type for a
// refusal no wait can cure: the request asks for more than a limit ever
// admits at once (package server writes it). Classify reads it as
// TooLarge, with its violated-policies.
const ProblemTypeRequestExceedsLimit = "https://github.com/throttlekit/throttle#a-request-that-can-never-fit"

// SecondaryLimitWait is how long GitHub documents waiting after a
// secondary rate limit that carries neither Retry-After nor an exhausted
// x-ratelimit-remaining: "at least one minute".
const SecondaryLimitWait = time.Minute

// Signal is what a response means for the requests that follow it, beyond
// the quotas [Parse] reads.
type Signal uint8

const (
	// NoSignal: nothing about rate limits or capacity.
	NoSignal Signal = iota
	// RateLimited: a limit on this client. Wait (Retry-After, a quota's
	// reset, at least MinWait), pausing the partition, then retry.
	RateLimited
	// Overloaded: the server is short of capacity for everyone (a bare
	// 503, Anthropic's 529 overloaded_error, temporary-reduced-capacity).
	// Back off adaptively; no quota of this client is at zero.
	Overloaded
	// QuotaExhausted: a quota gone for good, such as OpenAI's
	// insufficient_quota (billing). Retrying cannot help, and other
	// requests to the partition are not paused for it.
	QuotaExhausted
	// TooLarge: this request alone exceeds a limit, such as OpenAI's
	// "Request too large" or a 413. Retrying it cannot help; smaller
	// requests may still pass.
	TooLarge
)

var signalNames = [...]string{"none", "rate limited", "overloaded", "quota exhausted", "request too large"}

// String returns the signal's name: "none", "rate limited", "overloaded",
// "quota exhausted" or "request too large".
func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return "unknown"
}

// Final reports whether retrying the same request cannot help:
// QuotaExhausted and TooLarge.
func (s Signal) Final() bool { return s == QuotaExhausted || s == TooLarge }

// Retry is a server's explicit word on retrying a request.
type Retry int8

const (
	// RetryUnsaid: the server did not say.
	RetryUnsaid Retry = iota
	// RetryYes: retry, even for a status the retry layer would not retry.
	RetryYes
	// RetryNo: do not retry, whatever the status.
	RetryNo
)

// Classification is what [Classify] makes of a response.
type Classification struct {
	// Signal is what the response means: NoSignal for anything but a
	// 403, 413, 429, 503 or 529.
	Signal Signal
	// ShouldRetry is the x-should-retry field OpenAI's and Anthropic's
	// servers send ("true" or "false"), which their SDKs obey over the
	// status.
	ShouldRetry Retry
	// MinWait is the least wait before retrying that the server's
	// documentation asks for when the response says none:
	// SecondaryLimitWait for a GitHub secondary rate limit without
	// Retry-After. Callers wait the larger of it and Info.Delay.
	MinWait time.Duration
	// Code is the provider's machine-readable reason, when there is one:
	// the error type or code ("insufficient_quota", "overloaded_error",
	// "rate_limit_exceeded", ...), "secondary_rate_limit" for GitHub's,
	// or the problem type URI.
	Code string
	// Limit and Requested are the numbers of a TooLarge refusal that says
	// them ("Limit 30000, Requested 45411"); -1 when it does not.
	Limit, Requested int64
	// ViolatedPolicies are the policies a problem details body names.
	ViolatedPolicies []string
}

// Classify says what a response means for the requests that follow it,
// from its status, its header and the start of its body (nil, or what
// [PeekBody] returns; a truncated body is fine). It is pure: it reads
// nothing else and keeps no state.
//
// It knows:
//   - the draft's problem types in a problem details body, and this
//     project's ProblemTypeRequestExceedsLimit (TooLarge);
//   - OpenAI's error objects ({"error": {"type", "code", "message"}}):
//     insufficient_quota is QuotaExhausted, "Request too large ... Limit
//     30000, Requested 45411" is TooLarge with both numbers;
//   - Anthropic's ({"type": "error", "error": {"type", "message"}}):
//     overloaded_error (and any 529) is Overloaded, request_too_large
//     (and any 413) TooLarge, a spend limit (error.details.error_code
//     enforced_spend_limit_reached) QuotaExhausted;
//   - GitHub's secondary rate limit, a 403 or 429 whose message says
//     "secondary rate limit", often without Retry-After (MinWait is then
//     SecondaryLimitWait), and its primary limit, a 403 with
//     x-ratelimit-remaining: 0; a 403 with Retry-After is RateLimited too;
//   - any other 429 is RateLimited and any other 503 Overloaded.
//
// x-should-retry is reported whatever the status.
func Classify(status int, h http.Header, body []byte) Classification {
	c := Classification{Limit: -1, Requested: -1, ShouldRetry: shouldRetry(get(h, "X-Should-Retry"))}
	refused := status == http.StatusForbidden || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == 529
	if !refused {
		return c
	}
	e := readError(body)
	switch e.problem {
	case ProblemTypeQuotaExceeded, ProblemTypeAbnormalUsageDetected:
		c.Signal, c.Code, c.ViolatedPolicies = RateLimited, e.problem, e.violated
		return c
	case ProblemTypeTemporaryReducedCapacity:
		c.Signal, c.Code, c.ViolatedPolicies = Overloaded, e.problem, e.violated
		return c
	case ProblemTypeRequestExceedsLimit:
		c.Signal, c.Code, c.ViolatedPolicies = TooLarge, e.problem, e.violated
		return c
	}
	if code, ok := e.has("insufficient_quota", "enforced_spend_limit_reached"); ok {
		c.Signal, c.Code = QuotaExhausted, code
		return c
	}
	if containsFold(e.message, "request too large") {
		c.Signal, c.Code = TooLarge, e.code()
		c.Limit = numberAfter(e.message, "Limit ")
		c.Requested = numberAfter(e.message, "Requested ")
		return c
	}
	if code, ok := e.has("request_too_large"); ok || status == http.StatusRequestEntityTooLarge {
		c.Signal, c.Code = TooLarge, code
		return c
	}
	if code, ok := e.has("overloaded_error"); ok || status == 529 {
		c.Signal, c.Code = Overloaded, code
		return c
	}
	retryAfter := hasRetryAfter(h)
	switch {
	case (status == http.StatusForbidden || status == http.StatusTooManyRequests) &&
		containsFold(e.message, "secondary rate limit"):
		c.Signal, c.Code = RateLimited, "secondary_rate_limit"
		if !retryAfter && parseCount(get(h, "X-RateLimit-Remaining")) != 0 {
			c.MinWait = SecondaryLimitWait
		}
	case status == http.StatusForbidden:
		if retryAfter || parseCount(get(h, "X-RateLimit-Remaining")) == 0 {
			c.Signal, c.Code = RateLimited, e.code()
		}
	case status == http.StatusTooManyRequests:
		c.Signal, c.Code = RateLimited, e.code()
	case status == http.StatusServiceUnavailable:
		c.Signal, c.Code = Overloaded, e.code()
	}
	return c
}

// errorBody is the union of the error bodies Classify reads: RFC 9457
// problem details, OpenAI's and Anthropic's error objects, GitHub's
// message.
type errorBody struct {
	Type             string          `json:"type"`
	Message          string          `json:"message"`
	ViolatedPolicies []string        `json:"violated-policies"`
	Error            json.RawMessage `json:"error"`
}

// errorObject is the "error" member of OpenAI's and Anthropic's bodies.
type errorObject struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"` // a string, a number or null
	Message string          `json:"message"`
	Details struct {
		ErrorCode string `json:"error_code"`
	} `json:"details"`
}

// bodyError is what readError found in a body.
type bodyError struct {
	problem  string   // a problem type URI
	violated []string // its violated-policies
	codes    [3]string
	message  string
	raw      []byte // the body when it is not JSON (or was cut short)
}

// readError reads the error a body describes. A body that does not decode
// (not JSON, or cut short by the peek) is searched as text.
func readError(body []byte) bodyError {
	var e bodyError
	var b errorBody
	if json.Unmarshal(body, &b) != nil {
		e.raw, e.message = body, string(body)
		if i := bytes.Index(body, []byte(`"type":`)); i >= 0 {
			// A problem type survives a cut body if the cut comes later.
			if s, ok := jsonStringAt(body[i+len(`"type":`):]); ok {
				e.problem = problemType(s)
			}
		}
		return e
	}
	e.problem, e.violated, e.message = problemType(b.Type), b.ViolatedPolicies, b.Message
	var o errorObject
	if len(b.Error) > 0 && b.Error[0] == '{' && json.Unmarshal(b.Error, &o) == nil {
		var code string
		_ = json.Unmarshal(o.Code, &code)
		e.codes = [3]string{o.Type, code, o.Details.ErrorCode}
		if o.Message != "" {
			e.message = o.Message
		}
	} else if len(b.Error) > 0 && b.Error[0] == '"' {
		_ = json.Unmarshal(b.Error, &e.message)
	}
	return e
}

// has reports whether the error carries one of codes, and which.
func (e *bodyError) has(codes ...string) (string, bool) {
	for _, want := range codes {
		if e.raw != nil {
			if bytes.Contains(e.raw, []byte(`"`+want+`"`)) {
				return want, true
			}
			continue
		}
		for _, c := range e.codes {
			if c == want {
				return want, true
			}
		}
	}
	return "", false
}

// code is the most specific code the error carries: OpenAI's code, then
// the error type, or "".
func (e *bodyError) code() string {
	return cmp.Or(e.codes[2], e.codes[1], e.codes[0])
}

// problemType returns s if it is one of the draft's problem types.
func problemType(s string) string {
	switch s {
	case ProblemTypeQuotaExceeded, ProblemTypeTemporaryReducedCapacity, ProblemTypeAbnormalUsageDetected,
		ProblemTypeRequestExceedsLimit:
		return s
	}
	return ""
}

// jsonStringAt reads the JSON string that b starts with, after optional
// spaces; only plain strings (no escapes), which the type URIs are.
func jsonStringAt(b []byte) (string, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '"' {
		return "", false
	}
	end := bytes.IndexAny(b[1:], `"\`)
	if end < 0 || b[1+end] != '"' {
		return "", false
	}
	return string(b[1 : 1+end]), true
}

// shouldRetry reads x-should-retry.
func shouldRetry(v string) Retry {
	switch v = trim(v); {
	case equalFold(v, "true"):
		return RetryYes
	case equalFold(v, "false"):
		return RetryNo
	}
	return RetryUnsaid
}

// hasRetryAfter reports whether h carries a Retry-After (or one of its
// millisecond forms) that parses.
func hasRetryAfter(h http.Header) bool {
	if _, ok := parseMillis(get(h, "Retry-After-Ms")); ok {
		return true
	}
	if _, ok := parseMillis(get(h, "X-Ms-Retry-After-Ms")); ok {
		return true
	}
	v := trim(get(h, "Retry-After"))
	if _, ok := parseSeconds(v); ok {
		return true
	}
	_, ok := parseDate(v)
	return ok
}

// get returns the first value of the field name in h, matching the name
// case-insensitively even under a raw, non-canonical map key.
func get(h http.Header, name string) string {
	if vs := h[http.CanonicalHeaderKey(name)]; len(vs) > 0 {
		return vs[0]
	}
	for k, vs := range h {
		if len(vs) > 0 && equalFold(k, name) {
			return vs[0]
		}
	}
	return ""
}

// containsFold reports whether s contains substr, ignoring ASCII case.
func containsFold(s, substr string) bool {
	for i := 0; i+len(substr) <= len(s); i++ {
		if equalFold(s[i:i+len(substr)], substr) {
			return true
		}
	}
	return false
}

// numberAfter returns the number that follows the first label in s
// ("Limit 30000", "Requested 1,000,000"), or -1.
func numberAfter(s, label string) int64 {
	i := strings.Index(s, label)
	if i < 0 {
		return -1
	}
	var n int64
	digits := 0
	for _, c := range []byte(s[i+len(label):]) {
		if c == ',' && digits > 0 {
			continue
		}
		if !isDigit(c) || digits == 18 {
			break
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	if digits == 0 {
		return -1
	}
	return n
}
