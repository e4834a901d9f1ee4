package repository

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// GCRA is a Repository of token buckets kept as compactly as a Go map
// allows: each key's whole state is one 16-byte timestamp
// (limiters.GCRAState) in a sharded map, next to its key. It makes exactly
// the decisions that NewMemory with a limiters.NewGCRA factory makes, in
// about a third of the memory per key, and is the repository to choose for
// millions of per-client token buckets.
//
// A key is forgotten as soon as its bucket is full again (a full bucket is
// the zero state, so forgetting it loses nothing); entries are examined for
// that lazily, two at a time, whenever a new key is added, and WithIdleTimeout
// has no effect. WithMaxKeys bounds the keys exactly: the bound is split
// evenly across the shards, and a new key in a full shard evicts the key of
// that shard closest to full among a few it samples (a key that was not yet
// full then starts over full).
//
// Acquire waits by reservation: it takes its permits at the time they will
// be due and sleeps until then, so callers are served in the order they
// arrived and TryAcquire cannot overtake them; a caller whose context ends
// first gives its permits back. There is no per-key queue, so WithQueueLimit
// has no counterpart here, and there is nothing to Release.
type GCRA struct {
	p      *limiters.GCRAParams
	seed   maphash.Seed
	shards []gcraShard
	perCap int // keys per shard; 0: unbounded
	closed atomic.Bool
	done   chan struct{}
}

type gcraShard struct {
	mu sync.Mutex
	m  map[string]limiters.GCRAState
	_  [40]byte // keep shards on separate cache lines
}

var _ Repository = (*GCRA)(nil)

// gcraShards is the number of shards when keys are unbounded.
const gcraShards = 64

// NewGCRA returns a GCRA repository whose keys each get a token bucket of
// rate r and burst. It panics as limiters.NewGCRA does on a non-positive
// rate or burst.
func NewGCRA(r limiters.Rate, burst int, opts ...Option) *GCRA {
	var c config
	for _, o := range opts {
		o(&c)
	}
	n := gcraShards
	g := &GCRA{p: limiters.NewGCRAParams(r, burst), seed: maphash.MakeSeed(), done: make(chan struct{})}
	if c.maxKeys > 0 {
		n = min(max(c.maxKeys/16, 1), gcraShards)
		g.perCap = c.maxKeys / n
	}
	g.shards = make([]gcraShard, n)
	for i := range g.shards {
		g.shards[i].m = make(map[string]limiters.GCRAState)
	}
	return g
}

func (g *GCRA) shard(key string) *gcraShard {
	if len(g.shards) == 1 {
		return &g.shards[0]
	}
	return &g.shards[maphash.String(g.seed, key)%uint64(len(g.shards))]
}

func (g *GCRA) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if g.closed.Load() {
		return limiters.ErrClosed
	}
	return nil
}

// TryAcquire takes n permits from key's bucket now or not at all.
func (g *GCRA) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	checkN(n)
	if err := g.check(ctx); err != nil {
		return limiters.Decision{}, err
	}
	s := g.shard(key)
	s.mu.Lock()
	st, ok := s.m[key]
	d := g.p.TryAcquire(&st, n)
	if d.Allowed && n > 0 {
		g.store(s, key, st, ok)
	}
	s.mu.Unlock()
	return d, nil
}

// Acquire waits, in arrival order, until n permits of key's bucket are
// granted. It fails at once with ErrExceedsLimit when n is more than the
// burst, and with a *limiters.RejectedError when its turn would come after
// ctx's deadline.
func (g *GCRA) Acquire(ctx context.Context, key string, n int) error {
	checkN(n)
	if err := g.check(ctx); err != nil {
		return err
	}
	maxWait := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(dl), 0)
	}
	s := g.shard(key)
	s.mu.Lock()
	st, ok := s.m[key]
	wait, err := g.p.Reserve(&st, n, maxWait)
	if err == nil && n > 0 {
		g.store(s, key, st, ok)
	}
	s.mu.Unlock()
	if err != nil || wait == 0 {
		return err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		g.cancel(s, key, n)
		return ctx.Err()
	case <-g.done:
		return limiters.ErrClosed
	}
}

// cancel gives back the permits of a reservation whose caller gave up.
func (g *GCRA) cancel(s *gcraShard, key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[key]
	if !ok {
		return // forgotten or evicted meanwhile: nothing to give back to
	}
	g.p.Cancel(&st, n)
	if g.p.Full(st) {
		delete(s.m, key)
		return
	}
	s.m[key] = st
}

// store writes key's state, adding the key if it is new. s.mu must be held.
func (g *GCRA) store(s *gcraShard, key string, st limiters.GCRAState, exists bool) {
	if exists {
		s.m[key] = st
		return
	}
	g.sweep(s, 2)
	if g.perCap > 0 && len(s.m) >= g.perCap {
		g.evict(s)
	}
	// Copy the key: it may point into a request's buffer.
	s.m[string([]byte(key))] = st
}

// sweep forgets up to k full keys among the first k the map yields (Go
// starts every iteration at a random place). s.mu must be held.
func (g *GCRA) sweep(s *gcraShard, k int) {
	for key, st := range s.m {
		if g.p.Full(st) {
			delete(s.m, key)
		}
		if k--; k == 0 {
			return
		}
	}
}

// evict removes the key closest to full among up to 8 sampled. s.mu must
// be held.
func (g *GCRA) evict(s *gcraShard) {
	var victim string
	best := time.Duration(-1)
	k := 8
	for key, st := range s.m {
		if d := g.p.Due(st); best < 0 || d < best {
			victim, best = key, d
			if d == 0 {
				break
			}
		}
		if k--; k == 0 {
			break
		}
	}
	delete(s.m, victim)
}

// Release does nothing: token buckets hold no permits.
func (g *GCRA) Release(context.Context, string, int) error { return nil }

// Len is the number of keys held.
func (g *GCRA) Len() int {
	n := 0
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Close fails every waiting Acquire with limiters.ErrClosed and makes later
// calls fail with it. It is idempotent.
func (g *GCRA) Close() error {
	if !g.closed.Swap(true) {
		close(g.done)
	}
	return nil
}
