package ratelimitd

import (
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// Check is the body of POST /v1/check and one item of POST /v1/check/batch.
type Check struct {
	// Key is the caller to charge: 1 to MaxKeyLen bytes of UTF-8 without
	// control characters.
	Key string `json:"key"`
	// Cost is the weight of the check, 0 to MaxCost; nil means 1. It is
	// charged to each of the rule's limits (all of them or none), and,
	// once they admit the check, to each of the rule's cost caps (budgets
	// of units such as LLM tokens or cents per hour, charged separately
	// from the limits). A cost above what a limit or cap ever admits at
	// once is refused for good (Result.Final). A cost of 0 is a peek: it
	// reports the state and takes nothing.
	Cost *int `json:"cost,omitempty"`
	// Endpoint is matched against the policy's endpoint patterns, written
	// as a request line without the protocol: "POST /api/ask", or a path
	// alone ("/api/ask", a GET).
	Endpoint string `json:"endpoint,omitempty"`
	// Plan is the caller's plan; empty or unknown means the policy's
	// default plan.
	Plan string `json:"plan,omitempty"`
}

// Result is the service's answer to one check. A refused check is a
// Result with Allowed false (and HTTP 200): the HTTP status describes the
// call to the service, not the decision.
//
// Limit, Remaining, ResetAfter and RetryAfter describe one limit of the
// rule, the one that binds (headers.Binding: the one that refused, else the
// one with the least left relative to its size), all four from it; Limits
// lists every limit the check met.
type Result struct {
	Allowed   bool `json:"allowed"`
	Limit     int  `json:"limit"`
	Remaining int  `json:"remaining"`
	// ResetAfter and RetryAfter are in seconds (fractions allowed).
	// ResetAfter is the time until more quota is available (the IETF
	// draft's t). RetryAfter is 0 for an admitted check, the wait for a
	// refused one, and null (nil) for a Final one.
	ResetAfter float64  `json:"reset_after"`
	RetryAfter *float64 `json:"retry_after"`
	// Final reports a refusal no wait can cure: the cost is more than a
	// limit ever admits at once. Retrying the check cannot help.
	Final bool `json:"final,omitempty"`
	// Policy is the plan whose rule decided, and Rule that rule's endpoint
	// pattern ("default" for the plan's default rule). Both are empty when
	// no rule applies: the check is allowed and unlimited.
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	// Limits are the rule's limits the check met (its limits, then its
	// cost caps if the limits admitted it), each as its IETF policy item
	// says it.
	Limits []LimitState `json:"limits,omitempty"`
	// Headers are the rate-limit fields the server middleware would write
	// (X-RateLimit-*, RateLimit, RateLimit-Policy, Retry-After,
	// Retry-After-Ms), to copy into a response.
	Headers map[string]string `json:"headers,omitempty"`
}

// LimitState is one limit of a rule in a Result: its IETF policy item and
// RateLimit item, in JSON.
type LimitState struct {
	// Name is the policy item's name, after the rule and the limit
	// ("POST /api/ask 10/1m").
	Name string `json:"name"`
	// Limit is the quota (q) per Window (w, seconds; absent for a
	// concurrency limit), in Unit ("requests" when absent).
	Limit  int64   `json:"limit"`
	Window float64 `json:"window,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	// Remaining is what a check would be admitted with now (r).
	Remaining int64 `json:"remaining"`
	// ResetAfter is the time until more quota is available (t), in
	// seconds; null when waiting alone brings none.
	ResetAfter *float64 `json:"reset_after"`
	// Refused says this limit refused the check; RetryAfter is then the
	// wait (null when Final).
	Refused    bool     `json:"refused,omitempty"`
	RetryAfter *float64 `json:"retry_after,omitempty"`
	Final      bool     `json:"final,omitempty"`
}

// Decision returns r as a limiters.Decision.
func (r Result) Decision() limiters.Decision {
	return limiters.Decision{
		Allowed:    r.Allowed,
		Limit:      r.Limit,
		Remaining:  r.Remaining,
		ResetAfter: Seconds(r.ResetAfter),
		RetryAfter: Seconds(deref(r.RetryAfter)),
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// Seconds converts seconds on the wire to a Duration, clamping what no
// Duration holds; NaN and negative values are 0.
func Seconds(s float64) time.Duration {
	switch {
	case !(s > 0):
		return 0
	case s >= float64(1<<63-1)/float64(time.Second):
		return 1<<63 - 1
	}
	return time.Duration(s * float64(time.Second))
}

// BatchRequest is the body of POST /v1/check/batch: at most MaxBatch checks.
type BatchRequest struct {
	Checks []Check `json:"checks"`
}

// BatchResponse answers a BatchRequest: one item per check, in order.
type BatchResponse struct {
	Results []BatchItem `json:"results"`
}

// BatchItem is one check's answer in a batch: its Result, or the problem
// that kept it from being decided (Error set, Result zero).
type BatchItem struct {
	Result
	Error *Problem `json:"error,omitempty"`
}

// Problem is an RFC 9457 problem details object as the service writes it
// (application/problem+json), with the position of a policy error.
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Line and Column locate a policy file's error (reload), 1-based.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// Error returns the problem's status and detail.
func (p *Problem) Error() string {
	return "ratelimitd: " + p.Title + ": " + p.Detail
}

// The limits of the service's input.
const (
	MaxKeyLen   = 256     // bytes of a key
	MaxCost     = 1 << 20 // permits of one check
	MaxBatch    = 1000    // checks in one batch
	MaxBodySize = 1 << 20 // bytes of a request body
)
