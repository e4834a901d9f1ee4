package repository

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// ErrTooManyKeys is returned for a new key when the repository holds
// WithMaxKeys keys and none of them can make room: with RefuseNew, none is
// full again; otherwise every candidate has waiters, calls in flight, or
// permits held.
var ErrTooManyKeys = errors.New("repository: too many keys")

// Memory is the in-memory Repository: one limiter per key, created on first
// use by a factory, in a sharded hash table. It holds no goroutines. The zero
// value is not usable; call NewMemory. A Memory is safe for concurrent use.
type Memory struct {
	maker   atomic.Pointer[maker] // replaced by Reconfigure
	seed    maphash.Seed
	shards  []shard
	shift   uint         // a key's shard is hash >> shift
	idle    int64        // nanoseconds; 0 means never
	maxKeys int64        // 0 means unbounded
	refuse  bool         // WithOverflow(RefuseNew)
	count   atomic.Int64 // see reserve
	bound   boundCounts  // see Stats
	reconf  sync.Mutex   // serializes Reconfigure
	start   time.Time
	closed  atomic.Bool
	// kind is the configuration of the last compact key made (see entry),
	// for the next to share.
	kind atomic.Pointer[holder]
}

// maker makes new keys' limiters. Reconfigure replaces it; an insert that
// made its limiter with a maker that has since been replaced starts over.
type maker struct {
	factory func(key string) limiters.Limiter
}

var (
	_ Repository = (*Memory)(nil)
	_ Admin      = (*Memory)(nil)
)

const (
	maxShards = 256
	// evictScan is how many of a shard's least recently used keys one
	// eviction examines.
	evictScan = 8
)

// NewMemory returns an in-memory repository that creates each key's limiter
// with factory, on the key's first use. factory is called with no lock held
// and may be called more than once for a key that two goroutines create at
// once (the loser's limiter is closed and dropped); it must not return nil.
// An existing key's TryAcquire is decided with its shard's lock held, so the
// limiters' TryAcquire must not call back into the repository (this
// package's limiters never do). A nil factory or option panics, as does a
// nil limiter from factory, when it is made.
//
// factory must make a new limiter each time: the repository owns what it
// returns (it closes a forgotten key's limiter). A key whose limiter is a
// GCRA or a TokenBucket (of a rate whose interval is a whole number of
// nanoseconds, such as 10/s) is kept as its state alone, one timestamp,
// until a caller must wait for it or Get asks for it: then the limiter is
// made again from the state, with the options factory gave it, and kept.
// Such a key costs about 100 bytes, its string included, where a limiter
// of its own costs some 250; the decisions are the limiter's.
func NewMemory(factory func(key string) limiters.Limiter, opts ...Option) *Memory {
	if factory == nil {
		panic("repository: NewMemory: nil factory")
	}
	c := newConfig(opts)
	// A bound of n keys gets at most n/16 shards (and at most 256), so that
	// each shard has keys to evict and small bounds evict in exact LRU order.
	n := maxShards
	if c.maxKeys > 0 {
		n = min(1<<(bits.Len(uint(max(c.maxKeys/16, 1)))-1), maxShards)
	}
	m := &Memory{
		seed:    maphash.MakeSeed(),
		shards:  make([]shard, n),
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		idle:    int64(c.idle),
		maxKeys: int64(c.maxKeys),
		refuse:  c.overflow == RefuseNew,
		start:   time.Now(),
	}
	m.maker.Store(&maker{factory: factory})
	return m
}

func checkN(n int) {
	if n < 0 {
		panic(fmt.Sprintf("repository: negative permit count %d", n))
	}
}

// TryAcquire takes n permits from key's limiter now or not at all; see
// limiters.Limiter. It creates the key's limiter on first use. It fails with
// ctx's error if ctx is already done, with limiters.ErrClosed after Close,
// and with ErrTooManyKeys (see WithMaxKeys).
func (m *Memory) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	checkN(n)
	if err := ctx.Err(); err != nil {
		return limiters.Decision{}, err
	}
	// An existing key: decide under the shard's lock, which keeps the entry
	// from being evicted meanwhile without pinning it (a limiter's
	// TryAcquire never waits and never calls back into the repository).
	now := m.now()
	s, h, err := m.lock(key)
	if err != nil {
		return limiters.Decision{}, err
	}
	if e := s.find(h, key); e != nil {
		s.moveToFront(e)
		e.used = now
		d := m.try(e, n)
		if m.idle > 0 {
			m.sweep(s, now, 1)
		}
		s.mu.Unlock()
		return d, nil
	}
	s.mu.Unlock()

	e, err := m.insert(h, key)
	if err != nil {
		return limiters.Decision{}, err
	}
	defer e.refs.Add(-1)
	s.mu.Lock()
	d := m.try(e, n)
	s.mu.Unlock()
	if !d.Allowed && m.closed.Load() {
		return d, limiters.ErrClosed
	}
	return d, nil
}

// Acquire waits, in arrival order, until key's limiter grants n permits; see
// limiters.Limiter. While it waits, the key is neither expired nor evicted;
// Reset and Close fail it with limiters.ErrClosed.
func (m *Memory) Acquire(ctx context.Context, key string, n int) error {
	checkN(n)
	if err := ctx.Err(); err != nil {
		return err
	}
	e, s, err := m.pin(key)
	if err != nil {
		return err
	}
	defer e.refs.Add(-1)
	if x := e.x.Load(); x.lim != nil {
		return x.lim.Acquire(ctx, n)
	}
	s.mu.Lock()
	lim, err := m.acquireNow(e, n)
	s.mu.Unlock()
	if lim == nil {
		return err
	}
	return lim.Acquire(ctx, n)
}

// Release gives n permits back to key's limiter (only limiters that hold
// permits, such as Concurrency, do anything with them). It never creates a
// limiter: releasing to a key the repository does not hold does nothing,
// and permits that Reset forgot are not given to the key's new limiter. ctx
// is not consulted, so that permits go back even when the request that took
// them was cancelled.
//
// The permits are given back with the key's shard locked, so that Reset
// sees them either still held or already back, never in between; the
// limiter's Release must not call back into the repository (this package's
// limiters never do).
func (m *Memory) Release(_ context.Context, key string, n int) error {
	checkN(n)
	now := m.now()
	s, h, err := m.lock(key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock() // Release may panic (more permits than held)
	n = s.payDebt(key, n)
	if e := s.find(h, key); e != nil && n > 0 {
		s.moveToFront(e)
		e.used = now
		if x := e.x.Load(); x.lim != nil {
			x.lim.Release(n)
		}
	}
	return nil
}

// Get returns key's limiter, creating it if needed, for callers that want
// the Limiter itself (its Stats, say). It returns nil after Close, or when
// the key is new and ErrTooManyKeys would be returned.
//
// The repository may forget the key afterwards (idle expiry, WithMaxKeys
// eviction, Reset, Reconfigure): it then closes the limiter Get returned and
// creates a new one for the key's next use. Calls through the repository are
// never affected; callers that keep Get's result should not. Do not Close it
// yourself.
func (m *Memory) Get(key string) limiters.Limiter {
	e, s, err := m.pin(key)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	lim := m.limiter(e)
	s.mu.Unlock()
	e.refs.Add(-1)
	return lim
}

// Len returns the number of keys held. While new keys are being added
// concurrently, it counts them from just before they are, so it never
// exceeds the WithMaxKeys bound.
func (m *Memory) Len() int { return int(m.count.Load()) }

// Stats reports the number of keys held (as Len does) and what the
// WithMaxKeys bound has cost: keys evicted while they still held state, and
// new keys refused.
func (m *Memory) Stats() Stats { return m.bound.stats(m.Len()) }

// Close closes every limiter (their waiters fail with limiters.ErrClosed)
// and forgets every key. Later calls fail with limiters.ErrClosed. Close is
// idempotent; it returns the limiters' Close errors, joined.
func (m *Memory) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for e := s.head; e != nil; e = e.next {
			if err := m.closeEntry(e); err != nil {
				errs = append(errs, err)
			}
		}
		m.count.Add(-int64(s.n))
		s.reset()
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Sweep forgets, at once, every key that WithIdleTimeout would let expire,
// and returns how many it forgot. Without WithIdleTimeout it does nothing.
// Calling it is never necessary (expiry happens as the repository is used),
// but a program whose traffic stops entirely can call it from a ticker of its
// own to give the memory back.
func (m *Memory) Sweep() int {
	if m.idle == 0 || m.closed.Load() {
		return 0
	}
	now := m.now()
	forgot := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for e := s.tail; e != nil && now-e.used >= m.idle; {
			newer := e.prev
			if m.state(e) == stateIdle {
				m.drop(s, e)
				forgot++
			}
			e = newer
		}
		s.hand = nil
		s.mu.Unlock()
	}
	return forgot
}

// now is the time for entry.used: nanoseconds since m.start, or 0 when
// nothing expires on time.
func (m *Memory) now() int64 {
	if m.idle == 0 {
		return 0
	}
	return int64(time.Since(m.start))
}

func (m *Memory) shardOf(h uint64) int { return int(h >> m.shift) }

// lock returns key's shard, locked, and key's hash; or, after Close,
// limiters.ErrClosed with no lock held.
func (m *Memory) lock(key string) (*shard, uint64, error) {
	h := maphash.String(m.seed, key)
	s := &m.shards[m.shardOf(h)]
	s.mu.Lock()
	if m.closed.Load() {
		s.mu.Unlock()
		return nil, 0, limiters.ErrClosed
	}
	return s, h, nil
}

// pin returns key's entry, created if need be, with its refs raised by one,
// and its shard (unlocked). The caller lowers refs when done; while refs >
// 0, the entry is neither expired nor evicted.
func (m *Memory) pin(key string) (*entry, *shard, error) {
	now := m.now()
	s, h, err := m.lock(key)
	if err != nil {
		return nil, nil, err
	}
	if e := s.find(h, key); e != nil {
		m.use(s, e, now)
		if m.idle > 0 {
			m.sweep(s, now, 1)
		}
		s.mu.Unlock()
		return e, s, nil
	}
	s.mu.Unlock()
	e, err := m.insert(h, key)
	return e, s, err
}

// use marks e as used at now and pins it. s.mu must be held.
func (m *Memory) use(s *shard, e *entry, now int64) {
	s.moveToFront(e)
	e.used = now
	e.refs.Add(1)
}

// errRemade is place's answer when Reconfigure replaced the maker after the
// new entry's limiter was made: insert makes it again.
var errRemade = errors.New("repository: remake the limiter")

// insert creates key's entry, pinned, unless another goroutine has created
// it meanwhile.
func (m *Memory) insert(h uint64, key string) (*entry, error) {
	for {
		mk := m.maker.Load()
		lim := mk.factory(key)
		if lim == nil {
			panic("repository: factory returned a nil limiter for key " + key)
		}
		// Clone the key: it may be a slice of a request's buffer.
		e := &entry{key: strings.Clone(key), hash: uint32(h)}
		x := m.holderFor(lim, &e.tat)
		e.x.Store(x)
		i := m.shardOf(h)
		s := &m.shards[i]
		now := m.now()
		s.mu.Lock()
		got, err := m.place(i, e, mk, now)
		s.mu.Unlock()
		if got != e && x.lim != nil {
			lim.Close()
		}
		if err != errRemade {
			return got, err
		}
	}
}

// place adds e, whose limiter mk made, to shard i, pinned, making room
// under WithMaxKeys, and returns it; or returns the entry another goroutine
// added for the same key. The shard's lock must be held; place may release
// it and take it again.
func (m *Memory) place(i int, e *entry, mk *maker, now int64) (*entry, error) {
	s := &m.shards[i]
	h := uint64(e.hash)
	// check looks for the key and for what makes e unusable, each time the
	// shard has been locked.
	check := func() (*entry, error) {
		switch old := s.find(h, e.key); {
		case m.closed.Load():
			return nil, limiters.ErrClosed
		case old != nil:
			m.use(s, old, now)
			return old, nil
		case m.maker.Load() != mk:
			return nil, errRemade
		}
		return nil, nil
	}
	if old, err := check(); old != nil || err != nil {
		return old, err
	}
	// Take a place in the count first, so that concurrent inserts in
	// different shards can never together exceed the bound. An eviction
	// hands its place over.
	if !m.reserve() && !m.evict(s, now) {
		s.mu.Unlock()
		ok := m.evictElsewhere(i, now)
		s.mu.Lock()
		if !ok {
			m.bound.refused.Add(1)
			return nil, ErrTooManyKeys
		}
		// The shard was unlocked: look again.
		if old, err := check(); old != nil || err != nil {
			m.count.Add(-1)
			return old, err
		}
	}
	e.used = now
	e.refs.Add(1)
	s.add(e)
	if m.idle > 0 {
		m.sweep(s, now, 2)
	}
	return e, nil
}

// reserve takes a place in m.count for a new key, unless the count is at
// WithMaxKeys. m.count is the number of keys held plus the places taken by
// inserts under way, and never exceeds the bound.
func (m *Memory) reserve() bool {
	if m.maxKeys == 0 {
		m.count.Add(1)
		return true
	}
	for {
		c := m.count.Load()
		if c >= m.maxKeys {
			return false
		}
		if m.count.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// forget removes e and closes its limiter. Its place in m.count stays
// taken: the caller frees it or hands it to a new key. s.mu must be held.
func (m *Memory) forget(s *shard, e *entry) {
	s.remove(e)
	m.closeEntry(e)
}

// drop forgets e and frees its place in m.count. s.mu must be held.
func (m *Memory) drop(s *shard, e *entry) {
	m.forget(s, e)
	m.count.Add(-1)
}

type entryState int

const (
	stateIdle  entryState = iota // full again, no waiters: forgettable
	stateStale                   // not full again, but no waiters: evictable
	stateBusy                    // pinned, waiters, or permits held
)

// state classifies e. s.mu must be held, so that no repository call can pin
// e meanwhile.
func (m *Memory) state(e *entry) entryState {
	if e.refs.Load() > 0 {
		return stateBusy
	}
	return m.classify(e, m.try(e, 0))
}

// classify classifies e, which has no pins, given a peek at its limiter.
func (m *Memory) classify(e *entry, peek limiters.Decision) entryState {
	lim := e.x.Load().lim // nil: compact, so none waits and none is held
	switch {
	case lim != nil && lim.Stats().Queued > 0:
		return stateBusy
	case full(peek):
		return stateIdle
	case lim != nil && limiters.HoldsPermits(lim):
		// Not full, and its permits may be held: forgetting it would
		// make their Release land on a fresh limiter.
		return stateBusy
	}
	return stateStale
}

// full reports whether a peek (TryAcquire(0)) found the limiter full again.
func full(peek limiters.Decision) bool { return peek.Allowed && peek.Remaining >= peek.Limit }

// noMore reports whether evicting a limiter that a peeks admits no more than
// evicting one that b peeks: it has used no more permits. The eviction scan
// goes from the least recently used, so among equals the more recently used
// goes: a key that has lasted is not pushed out by a flood of new keys used
// as much. (The time until full is not compared: it differs by the moment of
// each peek, and for windows every key is full again at once.)
func noMore(a, b limiters.Decision) bool { return a.Limit-a.Remaining <= b.Limit-b.Remaining }

// sweep examines up to k entries, from the least recently used, and forgets
// those idle for m.idle. It resumes where the previous sweep stopped (the
// hand), so that entries which are old but not yet full again do not hold
// up the ones behind them, and it goes back to the tail on reaching an entry
// used within m.idle (all those after it are newer). s.mu must be held.
func (m *Memory) sweep(s *shard, now int64, k int) {
	e := s.hand
	if e == nil {
		e = s.tail
	}
	for ; k > 0 && e != nil; k-- {
		if now-e.used < m.idle {
			e = nil
			break
		}
		newer := e.prev
		if m.state(e) == stateIdle {
			m.drop(s, e)
		}
		e = newer
	}
	s.hand = e
}

// evict makes room for one key in s, handing the forgotten key's place in
// m.count to the caller. Among the evictScan least recently used entries,
// it forgets the least recently used idle one; failing that (and unless
// RefuseNew), the stale one whose loss admits the least (see noMore),
// counted in m.bound.evicted. Entries it meets that it may not evict (busy
// ones, and stale ones under RefuseNew) move to the front, so the next
// eviction looks past them. s.mu must be held.
func (m *Memory) evict(s *shard, now int64) bool {
	type candidate struct {
		e    *entry
		peek limiters.Decision
	}
	var cands [evictScan]candidate
	k := 0
	skip := func(e *entry) {
		s.moveToFront(e)
		e.used = now
	}
	next := s.tail
	for range evictScan {
		e := next
		if e == nil {
			break
		}
		next = e.prev
		if e.refs.Load() > 0 {
			skip(e)
			continue
		}
		switch peek := m.try(e, 0); {
		case full(peek):
			if m.classify(e, peek) == stateIdle {
				m.forget(s, e)
				return true
			}
			skip(e)
		default:
			cands[k] = candidate{e, peek}
			k++
		}
	}
	// The candidates are not full: classify them (a call to Stats each)
	// best first, and only until a stale one is found.
	for k > 0 {
		b := 0
		if !m.refuse {
			for i := 1; i < k; i++ {
				if noMore(cands[i].peek, cands[b].peek) {
					b = i
				}
			}
			if c := cands[b]; m.classify(c.e, c.peek) == stateStale {
				m.forget(s, c.e)
				m.bound.evicted.Add(1)
				return true
			}
		}
		skip(cands[b].e)
		copy(cands[b:k], cands[b+1:k])
		k--
	}
	return false
}

// evictElsewhere evicts one entry from a shard other than i, trying each in
// turn. No lock may be held.
func (m *Memory) evictElsewhere(i int, now int64) bool {
	for j := 1; j < len(m.shards); j++ {
		s := &m.shards[(i+j)%len(m.shards)]
		s.mu.Lock()
		ok := !m.closed.Load() && s.n > 0 && m.evict(s, now)
		s.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// Peek reports key's state as TryAcquire(ctx, key, 0) would, and spends
// nothing: it neither creates the key nor counts as a use of it. For a key
// the repository does not hold, it peeks at a limiter made for the
// occasion (by the factory, or by the spec Reconfigure gave) and closes it:
// what the key's first call would find.
func (m *Memory) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	if err := ctx.Err(); err != nil {
		return limiters.Decision{}, err
	}
	s, h, err := m.lock(key)
	if err != nil {
		return limiters.Decision{}, err
	}
	if e := s.find(h, key); e != nil {
		d := m.try(e, 0)
		s.mu.Unlock()
		return d, nil
	}
	s.mu.Unlock()
	lim := m.maker.Load().factory(key)
	defer lim.Close()
	return lim.TryAcquire(0), nil
}

// Reset forgets key's limiter, so that the key's next call finds a fresh,
// full one. The old limiter is closed: its waiters fail with
// limiters.ErrClosed. Permits held on it are forgotten: when its limiter
// holds permits until Release (limiters.HoldsPermits), Reset counts them as
// Limit − Remaining of a peek, and drops as many later Releases of the key
// rather than give them to the new limiter, so they are harmless. The count
// is exact for Concurrency; for a Chain that mixes Concurrency with a rate
// limiter it also counts the permits the rate limiter has spent, and the
// new limiter then misses as many Releases. Resetting a key the repository
// does not hold does nothing.
func (m *Memory) Reset(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, h, err := m.lock(key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if e := s.find(h, key); e != nil {
		m.reset(s, e)
	}
	return nil
}

// reset forgets e even if it is in use, remembering the permits it holds as
// the key's debt. s.mu must be held.
func (m *Memory) reset(s *shard, e *entry) {
	if lim := e.x.Load().lim; lim != nil && limiters.HoldsPermits(lim) {
		// Closed first: a call that pinned e before Reset took the shard
		// acquires on the limiter without it, and one that got its permit
		// between the count and the close held a permit no debt covered,
		// whose Release then went to the key's new limiter (a Concurrency
		// released more than it held: TestResetUnderChurn, under -race).
		// Once closed, no Acquire succeeds: the count is every permit held.
		lim.Close()
		if d := lim.TryAcquire(0); d.Remaining < d.Limit {
			s.owe(e.key, d.Limit-d.Remaining)
		}
	}
	m.drop(s, e)
}

// Reconfigure changes the limit of every key at once, as an operator
// lowering a limit during an incident or a plan upgrade needs: from now on
// new keys' limiters are made by spec.New (the factory given to NewMemory
// is no longer used), and every key held is told the new spec through its
// limiter's Reconfigure method, which keeps its state (the permits it has,
// its waiters). A key whose limiter has no Reconfigure method, or refuses
// the spec (another algorithm, say), is Reset: it starts over with a
// limiter of the new spec. An invalid spec is an error, and changes
// nothing.
func (m *Memory) Reconfigure(spec limiters.Spec) error {
	probe, err := spec.New()
	if err != nil {
		return err
	}
	probe.Close()
	if m.closed.Load() {
		return limiters.ErrClosed
	}
	m.reconf.Lock()
	defer m.reconf.Unlock()
	// Inserts that made their limiter with the old maker start over when
	// they see the new one: every key placed from now on has the new spec,
	// and every key placed before is in a shard this loop has yet to visit.
	m.maker.Store(&maker{factory: func(string) limiters.Limiter {
		l, err := spec.New()
		if err != nil {
			panic("repository: a validated spec failed: " + err.Error())
		}
		return l
	}})
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for e := s.head; e != nil; {
			next := e.next
			compact := e.x.Load().lim == nil
			if r, ok := m.limiter(e).(limiters.Reconfigurable); !ok || r.Reconfigure(spec) != nil {
				m.reset(s, e)
			} else if compact {
				m.recompact(e)
			}
			e = next
		}
		s.mu.Unlock()
	}
	return nil
}
