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
	whole  bool // states are kept packed in m8
	seed   maphash.Seed
	shards []gcraShard
	perCap int // keys per shard; 0: unbounded
	closed atomic.Bool
	done   chan struct{}
}

// gcraShard holds its keys' states in m8, packed into 8 bytes, when the
// rate's interval is a whole number of nanoseconds, and in m16 otherwise.
type gcraShard struct {
	mu  sync.Mutex
	m8  map[string]int64
	m16 map[string]limiters.GCRAState
	new uint32   // keys added, to sweep every sweepEvery-th time
	_   [36]byte // keep shards on separate cache lines
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
	g.whole = g.p.Whole()
	g.shards = make([]gcraShard, n)
	for i := range g.shards {
		if g.whole {
			g.shards[i].m8 = make(map[string]int64)
		} else {
			g.shards[i].m16 = make(map[string]limiters.GCRAState)
		}
	}
	return g
}

// get, put, del, size and each are the shard's map operations, whichever
// map it uses. s.mu must be held.
func (g *GCRA) get(s *gcraShard, key string) (limiters.GCRAState, bool) {
	if g.whole {
		v, ok := s.m8[key]
		return g.p.Unpack(v), ok
	}
	st, ok := s.m16[key]
	return st, ok
}

func (g *GCRA) put(s *gcraShard, key string, st limiters.GCRAState) {
	if g.whole {
		s.m8[key] = g.p.Pack(st)
		return
	}
	s.m16[key] = st
}

func (g *GCRA) del(s *gcraShard, key string) {
	if g.whole {
		delete(s.m8, key)
		return
	}
	delete(s.m16, key)
}

func (g *GCRA) size(s *gcraShard) int {
	if g.whole {
		return len(s.m8)
	}
	return len(s.m16)
}

// each calls f for up to k entries, from wherever Go's map iteration starts
// (a random place), until f returns false.
func (g *GCRA) each(s *gcraShard, k int, f func(key string, st limiters.GCRAState) bool) {
	if g.whole {
		for key, v := range s.m8 {
			if k--; !f(key, g.p.Unpack(v)) || k == 0 {
				return
			}
		}
		return
	}
	for key, st := range s.m16 {
		if k--; !f(key, st) || k == 0 {
			return
		}
	}
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
	st, ok := g.get(s, key)
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
	st, ok := g.get(s, key)
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
	st, ok := g.get(s, key)
	if !ok {
		return // forgotten or evicted meanwhile: nothing to give back to
	}
	g.p.Cancel(&st, n)
	if g.p.Full(st) {
		g.del(s, key)
		return
	}
	g.put(s, key, st)
}

// store writes key's state, adding the key if it is new. s.mu must be held.
func (g *GCRA) store(s *gcraShard, key string, st limiters.GCRAState, exists bool) {
	if exists {
		g.put(s, key, st)
		return
	}
	if s.new++; s.new%sweepEvery == 0 {
		g.sweep(s, 2*sweepEvery) // two entries per new key, amortized
	}
	if g.perCap > 0 && g.size(s) >= g.perCap {
		g.evict(s)
	}
	// Copy the key: it may point into a request's buffer.
	g.put(s, string([]byte(key)), st)
}

// sweepEvery is how many new keys a shard adds between sweeps: starting a
// map iteration costs more than looking at a few more entries.
const sweepEvery = 8

// sweep forgets the full keys among the first k the map yields (Go starts
// every iteration at a random place). s.mu must be held.
func (g *GCRA) sweep(s *gcraShard, k int) {
	g.each(s, k, func(key string, st limiters.GCRAState) bool {
		if g.p.Full(st) {
			g.del(s, key)
		}
		return true
	})
}

// evict removes the key closest to full among up to 8 sampled. s.mu must
// be held.
func (g *GCRA) evict(s *gcraShard) {
	var victim string
	best := time.Duration(-1)
	g.each(s, 8, func(key string, st limiters.GCRAState) bool {
		if d := g.p.Due(st); best < 0 || d < best {
			victim, best = key, d
		}
		return best != 0
	})
	if best >= 0 {
		g.del(s, victim)
	}
}

// Release does nothing: token buckets hold no permits.
func (g *GCRA) Release(context.Context, string, int) error { return nil }

// Len is the number of keys held.
func (g *GCRA) Len() int {
	n := 0
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		n += g.size(s)
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
