package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// The problem types of draft-ietf-httpapi-ratelimit-headers, each with the
// violated-policies member.
const (
	// ProblemTypeQuotaExceeded: the client exceeded its quota (429). The
	// type of every rejection unless a Rule's Problem or WithProblemType
	// says otherwise.
	ProblemTypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemTypeTemporaryReducedCapacity: the service cannot serve the
	// request for now, whatever the client's quota (503 Service
	// Unavailable).
	ProblemTypeTemporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	// ProblemTypeAbnormalUsageDetected: the client's requests are deemed
	// abnormal (429).
	ProblemTypeAbnormalUsageDetected = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
)

// ProblemTypeRequestExceedsLimit is the problem type of a refusal no wait
// can cure: the request asks for more than a limit ever admits at once (a
// cost above a cost cap, a weight above a bucket's burst). It is answered
// with 429, no Retry-After and no retry_after member; violated-policies
// names the limits it exceeds. headers.Classify reads it as TooLarge, so
// that clients neither pause nor retry. (The draft registers no type for
// this; the URI is this project's.)
const ProblemTypeRequestExceedsLimit = headers.ProblemTypeRequestExceedsLimit

// Problem is an RFC 9457 problem details object, with the members a
// rate-limit rejection adds: retry_after (seconds) and, as the IETF
// draft-ietf-httpapi-ratelimit-headers describes, violated-policies (the
// names of the RateLimit-Policy items the request exceeded).
type Problem struct {
	Type             string   `json:"type,omitempty"` // "about:blank" when empty
	Title            string   `json:"title,omitempty"`
	Status           int      `json:"status,omitempty"`
	Detail           string   `json:"detail,omitempty"`
	Instance         string   `json:"instance,omitempty"`
	RetryAfter       int64    `json:"retry_after,omitempty"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// defaultPolicy is the name headers.Write gives its IETF RateLimit-Policy
// item, so that violated-policies refers to it.
var defaultPolicy = []string{"default"}

// RateLimited returns the problem details of a rejection with decision d:
// type quota-exceeded, status 429, retry_after as Retry-After says it (whole
// seconds, rounded up, at least 1) and violated-policies ["default"], the
// policy headers.Write advertises. (Under a Policy, the Middleware names the
// limits that refused instead.) detail defaults to a sentence with the
// limit and the wait.
func RateLimited(d limiters.Decision, detail string) Problem {
	retry := retrySeconds(d.RetryAfter)
	if detail == "" {
		detail = "rate limit of " + strconv.Itoa(d.Limit) + " exceeded; retry after " + strconv.FormatInt(retry, 10) + "s"
	}
	return Problem{
		Type:             ProblemTypeQuotaExceeded,
		Title:            "Too Many Requests",
		Status:           http.StatusTooManyRequests,
		Detail:           detail,
		RetryAfter:       retry,
		ViolatedPolicies: defaultPolicy,
	}
}

// WithType returns p as a rejection of problem type typ, one of the
// ProblemType constants: the type, and the status and title that go with
// it (503 Service Unavailable for ProblemTypeTemporaryReducedCapacity, 429
// Too Many Requests otherwise). Other members are kept.
func (p Problem) WithType(typ string) Problem {
	p.Type, p.Status, p.Title = typ, http.StatusTooManyRequests, "Too Many Requests"
	if typ == ProblemTypeTemporaryReducedCapacity {
		p.Status, p.Title = http.StatusServiceUnavailable, "Service Unavailable"
	}
	return p
}

// problemTypes maps the short names a policy file uses to problem types.
var problemTypes = map[string]string{
	"":                           ProblemTypeQuotaExceeded,
	"quota-exceeded":             ProblemTypeQuotaExceeded,
	"temporary-reduced-capacity": ProblemTypeTemporaryReducedCapacity,
	"abnormal-usage-detected":    ProblemTypeAbnormalUsageDetected,
}

// retrySeconds is how Retry-After says d: whole seconds, rounded up, at
// least 1.
func retrySeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}

// WriteProblem writes p as an application/problem+json response with status
// p.Status (500 if it is zero). The title defaults to the status text.
func WriteProblem(w http.ResponseWriter, p Problem) {
	if p.Status == 0 {
		p.Status = http.StatusInternalServerError
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: every member is a string or a number
		body = []byte(`{"type":"about:blank","status":` + strconv.Itoa(p.Status) + `}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
