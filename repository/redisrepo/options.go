package redisrepo

import (
	"fmt"
	"time"
)

// FailMode says what the repository decides while Redis is unreachable
// (a call failed or timed out, or the circuit breaker is open).
type FailMode int

const (
	// FailClosed returns an error wrapping ErrUnavailable: nothing is
	// admitted without Redis. It is the zero value and the default.
	FailClosed FailMode = iota
	// FailOpen admits every request: TryAcquire returns an allowed Decision
	// and a nil error, Acquire returns nil. The observer hears of each.
	FailOpen
	// FailLocal decides with a local limiter of the same spec, its limit
	// (and rate) divided by the replica count (WithReplicas), so that the
	// fleet as a whole stays near its limit.
	FailLocal
)

// String names the mode as the constants do.
func (m FailMode) String() string {
	switch m {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	case FailLocal:
		return "FailLocal"
	}
	return "FailMode(?)"
}

// Option configures a Repository. A nil Option panics where it is given
// (New, NewChain, NewFeedbackStore, Storage), naming its position; a nil
// client is an error from New and NewChain and a panic from
// NewFeedbackStore, which returns none.
type Option func(*config)

type config struct {
	prefix   string
	fail     FailMode
	replicas int
	timeout  time.Duration
	lease    time.Duration
	batch    int
	failures int
	cooldown time.Duration
	observer func(Event)
	leases   time.Duration
}

// applyOptions applies opts to c. A nil option panics: options are code,
// and a nil one could only be a mistake.
func applyOptions(c *config, opts []Option) {
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("redisrepo: option %d of %d is nil", i+1, len(opts)))
		}
		o(c)
	}
}

func defaults() config {
	return config{
		prefix:   "throttle:",
		replicas: 1,
		timeout:  time.Second,
		lease:    10 * time.Second,
		batch:    128,
		failures: 5,
		cooldown: 5 * time.Second,
	}
}

// WithPrefix sets the namespace of every key the repository writes. The
// default is "throttle:".
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithFailMode sets what happens while Redis is unreachable; the default is
// FailClosed.
func WithFailMode(m FailMode) Option { return func(c *config) { c.fail = m } }

// WithReplicas sets the number of replicas sharing the limits, which
// FailLocal divides each limit by (default 1: each replica alone admits the
// whole limit while Redis is away).
func WithReplicas(n int) Option { return func(c *config) { c.replicas = max(n, 1) } }

// WithTimeout bounds each round trip to Redis (default 1s), whatever the
// callers' contexts allow; a caller's own context bounds its wait too.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithPermitLease sets how long a concurrency permit survives its holder's
// silence (default 10s). Held permits are renewed every third of it; the
// permits of a replica that crashed come back after at most this long.
func WithPermitLease(d time.Duration) Option {
	return func(c *config) {
		if d >= 3*time.Millisecond {
			c.lease = d
		}
	}
}

// WithLeases turns on lease mode, for quotas too hot for a round trip per
// decision: each process leases a share of the spec's rate from Redis, per
// key, decides locally at memory speed within it, and renews every refresh
// interval, asking for a share in proportion to its recent demand; Redis
// grants max-min fair shares that never sum past the rate. A lease lives
// three refresh intervals: the share of a process that stopped renewing
// (it died, or lost Redis) goes back to the others when it expires. The
// spec (one, given to New) must be gcra or token_bucket. See the package
// documentation for what it costs in exactness.
func WithLeases(refresh time.Duration) Option {
	return func(c *config) {
		if refresh > 0 {
			c.leases = refresh
		}
	}
}

// WithBatch sets the most calls sent to Redis in one round trip (default
// 128).
func WithBatch(n int) Option { return func(c *config) { c.batch = max(n, 1) } }

// WithBreaker sets the circuit breaker: it opens after failures consecutive
// failed round trips (default 5) and lets one trial through after cooldown
// (default 5s).
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(c *config) {
		c.failures = max(failures, 1)
		if cooldown > 0 {
			c.cooldown = cooldown
		}
	}
}

// WithObserver sets a function told of breaker state changes and of every
// decision taken without Redis. It must be quick and must not call back
// into the repository.
func WithObserver(f func(Event)) Option { return func(c *config) { c.observer = f } }

// EventKind says what an Event reports.
type EventKind int

const (
	// EventBreaker: the circuit breaker changed state (Event.State).
	EventBreaker EventKind = iota + 1
	// EventFailOpen: a call was admitted without Redis (FailOpen).
	EventFailOpen
	// EventFailLocal: a call was decided by the local limiter (FailLocal).
	EventFailLocal
	// EventFailClosed: a call failed because Redis was unreachable.
	EventFailClosed
)

// Event is what an observer is told.
type Event struct {
	Kind  EventKind
	State string // EventBreaker: the new state, "closed", "half-open" or "open"
	Err   error  // the failure behind a fail-mode event
}
