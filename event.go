package throttle

import "time"

// EventKind says what an Event reports.
type EventKind int

const (
	// EventAcquired: a request got its permit after waiting Wait.
	EventAcquired EventKind = iota + 1
	// EventRejected: a request was refused before being sent; Err says why.
	EventRejected
	// EventPaused: a server's answer (Status) paused the partition until Until.
	EventPaused
	// EventResumed: a pause ended; the next request probes the server.
	EventResumed
	// EventLeaseExpired: a response body held its concurrency permit for
	// longer than WithPermitLease allows (its caller never closed it, or is
	// still reading), so the permit went back to the partition Key. The body
	// stays readable; closing it later gives nothing back twice.
	EventLeaseExpired
)

var eventNames = [...]string{"unknown", "acquired", "rejected", "paused", "resumed", "lease_expired"}

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
}
