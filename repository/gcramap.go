package repository

import (
	"hash/maphash"
	"math"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// cell is how a gcraMap keeps one key's state: packed into 8 bytes when the
// emission interval is a whole number of nanoseconds, exact otherwise.
type cell[V any] interface {
	packed | exact
	load(p *limiters.GCRAParams) limiters.GCRAState
	store(p *limiters.GCRAParams, st limiters.GCRAState) V
}

// packed is a state as limiters.GCRAParams.Pack keeps it: exact when the
// interval is whole, rounded up to the nanosecond otherwise.
type packed int64

func (v packed) load(p *limiters.GCRAParams) limiters.GCRAState { return p.Unpack(int64(v)) }
func (packed) store(p *limiters.GCRAParams, st limiters.GCRAState) packed {
	return packed(p.Pack(st))
}

// exact is a state as it is.
type exact limiters.GCRAState

func (v exact) load(*limiters.GCRAParams) limiters.GCRAState { return limiters.GCRAState(v) }
func (exact) store(_ *limiters.GCRAParams, st limiters.GCRAState) exact {
	return exact(st)
}

// gcraMap is the gcraTable: keys sharded by hash, each shard a Go map from
// key to cell under its own lock.
type gcraMap[V cell[V]] struct {
	seed   maphash.Seed
	shards []gcraShard[V]
	perCap int  // keys per shard; 0: unbounded
	refuse bool // WithOverflow(RefuseNew)
	bound  boundCounts
}

type gcraShard[V cell[V]] struct {
	mu      sync.Mutex
	p       *limiters.GCRAParams // what m's states mean; SetRate replaces it
	m       map[string]V
	waiting map[string]*waiters // keys with Acquire calls asleep; nil until needed
	new     uint32              // keys added, to sweep every sweepEvery-th time
	_       [28]byte            // keep shards on separate cache lines
}

func newGCRAMap[V cell[V]](p *limiters.GCRAParams, shards, perCap int, o Overflow) *gcraMap[V] {
	t := &gcraMap[V]{seed: maphash.MakeSeed(), shards: make([]gcraShard[V], shards), perCap: perCap, refuse: o == RefuseNew}
	for i := range t.shards {
		t.shards[i].p = p
		t.shards[i].m = make(map[string]V)
	}
	return t
}

func (t *gcraMap[V]) shard(key string) *gcraShard[V] {
	if len(t.shards) == 1 {
		return &t.shards[0]
	}
	return &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
}

func (t *gcraMap[V]) tryAcquire(key string, n int) (limiters.Decision, error) {
	s := t.shard(key)
	s.mu.Lock()
	v, ok := s.m[key]
	st := v.load(s.p)
	d := s.p.TryAcquire(&st, n)
	if d.Allowed && n > 0 {
		if err := t.store(s, key, st, ok); err != nil {
			s.mu.Unlock()
			return limiters.Decision{}, err
		}
	}
	s.mu.Unlock()
	return d, nil
}

func (t *gcraMap[V]) reserve(key string, n int, maxWait time.Duration) (time.Duration, *waiters, error) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	st := v.load(s.p)
	wait, err := s.p.Reserve(&st, n, maxWait)
	if err == nil && n > 0 {
		err = t.store(s, key, st, ok)
	}
	if err != nil || wait == 0 {
		return 0, nil, err
	}
	w := s.waiting[key]
	if w == nil {
		if s.waiting == nil {
			s.waiting = make(map[string]*waiters)
		}
		w = &waiters{reset: make(chan struct{})}
		s.waiting[strings.Clone(key)] = w
	}
	w.n++
	return wait, w, nil
}

func (t *gcraMap[V]) leave(key string, w *waiters, n int, cancel bool) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting[key] != w {
		return // the key was reset: its waiters and their permits are gone
	}
	if w.n--; w.n == 0 {
		delete(s.waiting, key)
	}
	v, ok := s.m[key]
	if !cancel || !ok {
		return
	}
	st := v.load(s.p)
	s.p.Cancel(&st, n)
	if s.p.Full(st) {
		delete(s.m, key)
		return
	}
	s.m[key] = v.store(s.p, st)
}

func (t *gcraMap[V]) reset(key string) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	if w := s.waiting[key]; w != nil {
		close(w.reset)
		delete(s.waiting, key)
	}
}

func (t *gcraMap[V]) setRate(c *rerate) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for key, v := range s.m {
			if st, ok := c.apply(s.p, v.load(s.p)); ok {
				s.m[key] = v.store(c.p, st)
			} else {
				delete(s.m, key)
			}
		}
		s.p = c.p
		s.mu.Unlock()
	}
}

func (t *gcraMap[V]) stats() Stats {
	n := 0
	for i := range t.shards {
		n += t.shards[i].len()
	}
	return t.bound.stats(n)
}

func (s *gcraShard[V]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// store writes key's state, adding the key if it is new, or fails with
// ErrTooManyKeys when there is no room for it. s.mu must be held.
func (t *gcraMap[V]) store(s *gcraShard[V], key string, st limiters.GCRAState, exists bool) error {
	var v V
	if exists {
		s.m[key] = v.store(s.p, st)
		return nil
	}
	if s.new++; s.new%sweepEvery == 0 {
		t.sweep(s, 2*sweepEvery) // two entries per new key, amortized
	}
	if t.perCap > 0 && len(s.m) >= t.perCap && !t.evict(s) {
		t.bound.refused.Add(1)
		return ErrTooManyKeys
	}
	// Copy the key: it may point into a request's buffer.
	s.m[strings.Clone(key)] = v.store(s.p, st)
	return nil
}

// sweepEvery is how many new keys a shard adds between sweeps: starting a
// map iteration costs more than looking at a few more entries.
const sweepEvery = 8

// sweep forgets the full keys among the first k the map yields (Go starts
// every iteration at a random place). s.mu must be held.
func (t *gcraMap[V]) sweep(s *gcraShard[V], k int) {
	for key, v := range s.m {
		if s.p.Full(v.load(s.p)) {
			delete(s.m, key)
		}
		if k--; k == 0 {
			return
		}
	}
}

// evict makes room for a key in s. Among up to 8 keys sampled, without
// waiters, it removes the one whose loss admits the least: a full one, else
// the one with the fewest permits used and, among equals, the more recently
// used (the longer wait until full), as Memory does. If that key is not
// full, it removes it only under EvictStale, and counts it. s.mu must be
// held.
func (t *gcraMap[V]) evict(s *gcraShard[V]) bool {
	var victim string
	var used int
	due := time.Duration(-1)
	k := 8
	for key, v := range s.m {
		if s.waiting[key] != nil {
			continue // its sleeping reservations must stay counted
		}
		st := v.load(s.p)
		u, d := 0, s.p.Due(st)
		if d > 0 {
			peek := s.p.TryAcquire(&st, 0)
			u = peek.Limit - peek.Remaining
		}
		if due < 0 || u < used || (u == used && d >= due) {
			victim, used, due = key, u, d
		}
		if k--; k == 0 || d == 0 {
			break
		}
	}
	switch {
	case due < 0 || (due > 0 && t.refuse):
		return false
	case due > 0:
		t.bound.evicted.Add(1)
	}
	delete(s.m, victim)
	return true
}

// rerate converts states from one rate and burst to another: the permits a
// key has used carry over, counted at the new interval and capped by the new
// burst, and reservations beyond an empty bucket keep their times.
type rerate struct {
	p              *limiters.GCRAParams // the new rate and burst
	tolOld, tolNew int64                // burst intervals, old and new: a refill from empty, in ns
	num, den       big.Int              // the new interval over the old one
}

func newRerate(old limiters.Rate, oldBurst int, r limiters.Rate, burst int) *rerate {
	c := &rerate{p: limiters.NewGCRAParams(r, burst)}
	c.tolOld = mulDivUp(int64(oldBurst), big.NewInt(int64(old.Per)), big.NewInt(int64(old.N)))
	c.tolNew = mulDivUp(int64(burst), big.NewInt(int64(r.Per)), big.NewInt(int64(r.N)))
	// An interval is Per/N: new/old = r.Per·old.N / (r.N·old.Per).
	c.num.Mul(big.NewInt(int64(r.Per)), big.NewInt(int64(old.N)))
	c.den.Mul(big.NewInt(int64(r.N)), big.NewInt(int64(old.Per)))
	return c
}

// apply converts st, a state under old, to c.p. It reports false for a
// full bucket, which needs no state.
func (c *rerate) apply(old *limiters.GCRAParams, st limiters.GCRAState) (limiters.GCRAState, bool) {
	due := int64(old.Due(st)) // until full: used permits, plus reservations beyond them
	if due == 0 {
		return limiters.GCRAState{}, false
	}
	reserved := max(due-c.tolOld, 0)
	used := min(mulDivUp(due-reserved, &c.num, &c.den), c.tolNew)
	now := old.Pack(st) - due
	return c.p.Unpack(now + reserved + used), true
}

// mulDivUp returns ⌈a·b/c⌉ for a, b ≥ 0 and c > 0, at most MaxInt64.
func mulDivUp(a int64, b, c *big.Int) int64 {
	var q, r big.Int
	q.QuoRem(q.Mul(big.NewInt(a), b), c, &r)
	if r.Sign() > 0 {
		q.Add(&q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}
