package throttle

import "time"

// EventKind says what an Event reports.
type EventKind int

const (
	// EventAcquired: a request got its permit after waiting Wait.
	EventAcquired EventKind = iota + 1
	// EventRejected: a request was refused before being sent; Err says why.
	EventRejected
	// EventPaused: a server's answer (Status) paused the partition until
	// Until; Status 0: another Transport sharing the FeedbackStore learned
	// the pause.
	EventPaused
	// EventResumed: a pause ended; the next request probes the server.
	EventResumed
	// EventLeaseExpired: a response body held its concurrency permit for
	// longer than WithPermitLease allows (its caller never closed it, or is
	// still reading), so the permit went back to the partition Key. The body
	// stays readable; closing it later gives nothing back twice.
	EventLeaseExpired
	// EventStoreUnavailable: a call to the FeedbackStore (WithFeedbackStore)
	// failed (Err); the Transport goes on with what it learned itself.
	// It is sent once per outage: the next call that succeeds ends it.
	EventStoreUnavailable
	// EventUnknownQuota: a request declared a cost (WithCost) of a quota
	// (Quota) that the answer of the partition Key's server did not report,
	// though it reported others: most often a misspelt name ("token" for
	// "tokens"), so the declaration charges nothing. Err says which quotas
	// the server reported. It is sent once per partition and name (for at
	// most 1024 of them).
	EventUnknownQuota
)

var eventNames = [...]string{"unknown", "acquired", "rejected", "paused", "resumed", "lease_expired", "store_unavailable", "unknown_quota"}

// String returns the kind's name in snake case ("lease_expired").
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is what an observer (WithObserver) receives.
type Event struct {
	Kind   EventKind
	Key    string        // the partition; for a bucket its host named, "partition#bucket"
	Wait   time.Duration // EventAcquired: time spent waiting
	Until  time.Time     // EventPaused: the end of the pause
	Status int           // EventPaused: the response status that caused it
	Err    error         // EventRejected: the error returned to the caller
	Quota  string        // EventUnknownQuota: the quota name WithCost declared
}
