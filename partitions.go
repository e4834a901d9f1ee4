package throttle

import (
	"sync/atomic"
	"time"
)

// DefaultMaxPartitions is how many partitions a Transport keeps by default
// (WithMaxPartitions): enough for every host a program talks to in earnest,
// few enough that a crawler or a multi-tenant proxy calling millions of
// hosts holds a bounded amount of memory.
const DefaultMaxPartitions = 16384

// WithMaxPartitions bounds the partitions a Transport keeps (each holds
// what the partition's servers said of their limits). When a new partition
// would go past n, the least recently used one that has no request queued
// or in flight and no pause in force is forgotten: what it had learnt is
// learnt again from its next answer. Partitions with requests queued or in
// flight, or under a pause, are never forgotten, so the bound may be passed
// while more than n partitions are busy at once. Partitions whose servers'
// limits have all reset are forgotten as the Transport goes on, whatever
// the bound. n ≤ 0 means DefaultMaxPartitions.
func WithMaxPartitions(n int) Option {
	return func(t *Transport) {
		if n <= 0 {
			n = DefaultMaxPartitions
		}
		t.parts.max = n
	}
}

// partitions is the Transport's map of partition gates, with what bounds
// it: a ring the sweeps walk (the clock algorithm's approximation of least
// recently used: a use counts, without a lock; the eviction hand gives an
// entry used since it last passed another turn, and evicts the first idle
// entry that was not) and
// a second hand that forgets, a few entries a step, the partitions that
// hold nothing worth remembering. Guarded by Transport.mu.
type partitions struct {
	m     map[string]*part
	ring  []*part
	evict int       // the eviction hand, an index into ring
	sweep int       // the sweeping hand
	swept time.Time // when the sweeping hand last moved
	max   int
}

// part is one partition: its gate, its place in the ring, and its uses:
// it was used since a hand last passed if they changed since.
type part struct {
	g     *gate // its key is the partition's
	at    int32
	uses  atomic.Uint32 // counts requests, wrapping (its first is not counted)
	seen  uint32        // uses when the eviction hand last passed; guarded by Transport.mu
	swept uint32        // uses when the sweeping hand last passed; guarded by Transport.mu
}

// sweepEvery is how often (every sweepEvery-th request to a known
// partition) a request lets the sweeper take a step; every new partition
// takes one.
const sweepEvery = 64

// touch counts a use of p and, every sweepEvery uses, lets the sweeper take
// a step. It runs with no lock held.
func (t *Transport) touch(p *part) {
	if p.uses.Add(1)%sweepEvery == 0 && t.mu.TryLock() {
		t.parts.sweepStep(time.Now())
		t.mu.Unlock()
	}
}

// add puts a new partition's gate in, first taking a sweeping step and, at
// the bound, evicting one idle partition. Transport.mu must be held.
func (ps *partitions) add(key string, g *gate) {
	now := time.Now()
	ps.sweepStep(now)
	if len(ps.ring) >= ps.max {
		ps.evictOne(now)
	}
	p := &part{g: g, at: int32(len(ps.ring)), seen: ^uint32(0)} // as if used, for the eviction hand
	ps.ring = append(ps.ring, p)
	ps.m[key] = p
}

// remove forgets the partition at ring index i; the last entry takes its
// place.
func (ps *partitions) remove(i int) {
	p := ps.ring[i]
	delete(ps.m, p.g.key)
	last := len(ps.ring) - 1
	ps.ring[i] = ps.ring[last]
	ps.ring[i].at = int32(i)
	ps.ring[last] = nil
	ps.ring = ps.ring[:last]
	p.at = -1
}

// sweepRound is how long the sweeping hand takes to go round every
// partition: each step looks at the share of the partitions that the time
// since the last step is of it, so sweeping costs a round a second however
// many requests there are, and after an idle spell the first step looks at
// them all.
const sweepRound = time.Second

// sweepStep looks at the partitions from the sweeping hand, as many as the
// time since the last step calls for, and forgets those holding nothing
// worth remembering (every limit they knew has reset, nothing waits,
// nothing is on the wire) and not used since the hand last passed. (A
// partition that one goroutine calls has nothing on the wire between two
// of its requests, and what its answers taught — the successes since its
// last pause, which a bare refusal's pace is measured by — is worth
// keeping: forgotten at its 64th request and every second after, it
// counted one success where 66 had gone, and paced a server that took 66
// a second at one request a second.)
func (ps *partitions) sweepStep(now time.Time) {
	elapsed := now.Sub(ps.swept)
	if elapsed < 0 { // the wall clock stepped back
		ps.swept = now
		return
	}
	n := len(ps.ring)
	if elapsed < sweepRound {
		n = int(int64(n) * int64(elapsed) / int64(sweepRound))
	}
	if n == 0 {
		return // too soon: leave the time to the next step
	}
	ps.swept = now
	for ; n > 0 && len(ps.ring) > 0; n-- {
		if ps.sweep >= len(ps.ring) {
			ps.sweep = 0
		}
		p := ps.ring[ps.sweep]
		if u := p.uses.Load(); u != p.swept {
			// Used since the hand last passed: in use, whatever it holds
			// now. It gets another turn.
			p.swept = u
			ps.sweep++
			continue
		}
		g := p.g
		g.mu.Lock()
		forget := g.neutral(now)
		g.mu.Unlock()
		if forget {
			ps.remove(ps.sweep) // the last entry moved here: look at it next
		} else {
			ps.sweep++
		}
	}
}

// evictOne forgets the least recently used partition (as the clock
// approximates it) that is idle: nothing queued or in flight, no pause in
// force. It gives up after two turns of the ring: every partition is busy.
func (ps *partitions) evictOne(now time.Time) {
	for n := 2 * len(ps.ring); n > 0; n-- {
		if ps.evict >= len(ps.ring) {
			ps.evict = 0
		}
		p := ps.ring[ps.evict]
		if u := p.uses.Load(); u != p.seen {
			p.seen = u // used since the hand last passed: it gets another turn
			ps.evict++
			continue
		}
		if idle(p.g, now) {
			ps.remove(ps.evict)
			return
		}
		ps.evict++
	}
}

// idle reports whether g and its buckets' gates have nothing queued or in
// flight and no pause in force: forgetting it loses only what it learnt.
func idle(g *gate, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.q.Len() > 0 || g.inflight > 0 || g.pz.probing || g.pz.until.After(now) {
		return false
	}
	for b := range g.bucketGates {
		b.mu.Lock() // a partition's gate, then its buckets': as close does
		busy := b.q.Len() > 0 || b.inflight > 0 || b.pz.probing || b.pz.until.After(now)
		b.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

// maxIdleGates is the number of keys past which a MemoryFeedbackStore
// sweeps the ones whose leases and resets have passed.
const maxIdleGates = 1024
