package apisim

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Counts is what a simulator admitted and refused for one key.
type Counts struct {
	Admitted, Refused int64
}

// Stats is a snapshot of what a simulator saw. Every simulator returns one
// from its Snapshot method; the snapshot shares nothing with the simulator.
type Stats struct {
	Admitted int64 // requests answered 2xx
	Refused  int64 // requests refused (429, 403, 503, 529)
	// ByKey (never nil) splits the counts by what the simulator limits
	// separately: the limit that refused ("requests", "tokens",
	// "input-tokens", ...), the GitHub resource, the API key. The doc
	// comment of each simulator says which.
	ByKey map[string]Counts
	// MaxInFlight is the most requests the handler held at once.
	MaxInFlight int
	// Refusals holds the time of every refusal, in the order they happened.
	Refusals []time.Time
}

// recorder counts what a handler saw. Its methods are safe for concurrent use.
type recorder struct {
	mu          sync.Mutex
	admitted    int64
	refused     int64
	byKey       map[string]Counts
	inFlight    int
	maxInFlight int
	refusals    []time.Time
}

// enter counts a request in flight; leave counts it out.
func (r *recorder) enter() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
}

func (r *recorder) leave() {
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
}

func (r *recorder) admit(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admitted++
	c := r.counts(key)
	c.Admitted++
	r.byKey[key] = c
}

func (r *recorder) refuse(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused++
	r.refusals = append(r.refusals, now)
	c := r.counts(key)
	c.Refused++
	r.byKey[key] = c
}

// counts requires r.mu to be held.
func (r *recorder) counts(key string) Counts {
	if r.byKey == nil {
		r.byKey = make(map[string]Counts)
	}
	return r.byKey[key]
}

// Snapshot returns a copy of the counts so far.
func (r *recorder) Snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	byKey := make(map[string]Counts, len(r.byKey))
	maps.Copy(byKey, r.byKey)
	return Stats{
		Admitted:    r.admitted,
		Refused:     r.refused,
		ByKey:       byKey,
		MaxInFlight: r.maxInFlight,
		Refusals:    slices.Clone(r.refusals),
	}
}
