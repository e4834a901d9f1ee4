package server

import (
	"net/http"

	"github.com/throttlekit/throttle/headers"

	"github.com/throttlekit/throttle/limiters"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventAllowed: the request was admitted at once.
	EventAllowed EventKind = iota
	// EventDelayed: the request was admitted after waiting (the Delay
	// action, or its turn in a leaky bucket's queue).
	EventDelayed
	// EventRejected: the request was refused with 429.
	EventRejected
	// EventShadowRejected: a Shadow rule would have refused the request;
	// it was admitted.
	EventShadowRejected
	// EventNearLimit: an admitted request used at least the near-limit share
	// of a limit (see WithNearLimit). It follows the request's
	// EventAllowed or EventDelayed.
	EventNearLimit
	// EventBypassed: the client is on a policy's allow list; no limit
	// applied.
	EventBypassed
	// EventForbidden: the request was refused with 403: its client is on a
	// policy's block list, or it has no key and anonymous requests are
	// refused (WithAnonymousKey("")).
	EventForbidden
	// EventError: the repository failed; Err says how, FailedOpen whether
	// the request was admitted.
	EventError
)

var eventNames = [...]string{"allowed", "delayed", "rejected", "shadow_rejected", "near_limit", "bypassed", "forbidden", "error"}

// String returns the kind's name in snake case ("shadow_rejected"), as
// metrics labels want it.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is what an observer (WithObserver) is told about one decision.
type Event struct {
	Kind EventKind
	// Key is the caller's key (for a Policy, without the plan and endpoint).
	Key string
	// Plan and Endpoint are the policy plan and the endpoint pattern
	// whose rule applied ("" without a policy; Endpoint is "" for a plan's
	// default rule).
	Plan, Endpoint string
	// Cost is the permits the request was charged: its weight (WithCost),
	// or its cost against a cost cap when Limit is "cost".
	Cost int
	// Limit names the set of limits that decided: "requests" (the rule's
	// Limits, in flight ones included) or "cost" (its CostCaps); "" without
	// a policy.
	Limit string
	// Decision is the deciding limiter's decision. For a rule with several
	// limits it mixes them (limiters.Chain's Decision); Limits has each.
	Decision limiters.Decision
	// Limits is what the response advertises of each limit a Policy rule
	// applied (its limits, then its cost caps if they were reached): one
	// IETF policy item each, the refusing ones marked Refused. Nil without
	// a policy, and for Shadow rules.
	Limits []headers.Limit
	// Final reports a refusal no wait can cure: the request asks for more
	// than a limit ever admits at once. It carries no Retry-After.
	Final bool
	// Err is the repository's error, for EventError, or the wait's error
	// for a rejection under the Delay action.
	Err error
	// FailedOpen reports, for EventError, whether the request was
	// admitted anyway.
	FailedOpen bool
	// Request is the request decided on; nil for TryAllow.
	Request *http.Request
}
