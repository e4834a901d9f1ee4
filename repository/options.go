package repository

import (
	"fmt"
	"time"
)

// Option configures NewMemory. WithIdleTimeout is an Option; the options
// NewGCRA also honours are GCRAOptions, which are Options too.
type Option interface {
	apply(*config)
}

// GCRAOption configures NewGCRA or NewMemory: WithMaxKeys and WithOverflow.
// Options that NewGCRA would ignore (WithIdleTimeout) are not GCRAOptions,
// so passing one to NewGCRA does not compile.
type GCRAOption interface {
	Option
	gcra()
}

type config struct {
	idle     time.Duration
	maxKeys  int
	overflow Overflow
}

func newConfig[O Option](opts []O) config {
	var c config
	for i, o := range opts {
		if any(o) == nil {
			panic(fmt.Sprintf("repository: option %d of %d is nil", i+1, len(opts)))
		}
		o.apply(&c)
	}
	return c
}

// memoryOption is an option only NewMemory honours.
type memoryOption func(*config)

func (o memoryOption) apply(c *config) { o(c) }

// sharedOption is an option both repositories honour.
type sharedOption func(*config)

func (o sharedOption) apply(c *config) { o(c) }
func (sharedOption) gcra()             {}

// WithIdleTimeout makes a Memory forget a key whose limiter is idle — full
// again (a peek reports Remaining == Limit and would be allowed), with
// nobody waiting and no permits held — and has not been used for d. A later
// call for that key starts a fresh limiter, which is indistinguishable from
// the forgotten one because both are full. Zero or a negative d (the
// default) never forgets a key on time alone.
//
// Expiry is lazy: see the package documentation and Memory.Sweep. NewGCRA
// does not take this option: it forgets a key as soon as its bucket is full
// again, which loses nothing.
func WithIdleTimeout(d time.Duration) Option {
	return memoryOption(func(c *config) { c.idle = max(d, 0) })
}

// WithMaxKeys bounds the number of keys held at once to n. A new key beyond
// the bound first takes the place of a key that is full again (forgetting
// it loses nothing); when there is none, WithOverflow decides between
// evicting a key that still holds state (the default) and refusing the new
// key with ErrTooManyKeys. Zero or a negative n (the default) means
// unbounded.
func WithMaxKeys(n int) GCRAOption {
	return sharedOption(func(c *config) { c.maxKeys = max(n, 0) })
}

// Overflow is what a repository at its WithMaxKeys bound does with a new key
// when no key that is full again can make room for it.
type Overflow int

const (
	// EvictStale evicts, among the least recently used keys it examines,
	// the one whose loss admits the least: the one closest to full (fewest
	// permits used; among equals, the more recently used, so that a flood
	// of new keys used as much does not push out a key that has lasted). That key starts over full, so it
	// may admit up to its limit again: a client that can mint keys can buy
	// a reset of another key by filling the repository with keys that are
	// further from full. Such evictions are counted in Stats.Evicted. Keys
	// with waiters, calls in flight or permits held are never evicted. This
	// is the default: memory stays bounded and new keys are served.
	EvictStale Overflow = iota
	// RefuseNew refuses the new key with ErrTooManyKeys (counted in
	// Stats.Refused) rather than lose the state of a key: no key's limit
	// is ever reset by the bound, at the price of turning away new keys
	// while the repository is full of keys that are not full again.
	RefuseNew
)

// WithOverflow chooses what a repository at its WithMaxKeys bound does when
// it must make room for a new key and no key is full again: EvictStale (the
// default) or RefuseNew. Without WithMaxKeys it has no effect.
func WithOverflow(o Overflow) GCRAOption {
	return sharedOption(func(c *config) { c.overflow = o })
}
