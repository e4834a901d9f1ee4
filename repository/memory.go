package repository

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// ErrTooManyKeys is returned for a new key when the repository holds
// WithMaxKeys keys and none of them can be evicted: every candidate has
// waiters, calls in flight, or permits held (a Concurrency limiter).
var ErrTooManyKeys = errors.New("repository: too many keys")

// Option configures a Memory.
type Option func(*config)

type config struct {
	idle    time.Duration
	maxKeys int
}

// WithIdleTimeout makes the repository forget a key whose limiter is idle —
// full again (a peek reports Remaining == Limit and would be allowed), with
// nobody waiting and no permits held — and has not been used for d. A later
// call for that key starts a fresh limiter, which is indistinguishable from
// the forgotten one because both are full. Zero or a negative d (the
// default) never forgets a key on time alone.
//
// Expiry is lazy: see the package documentation and Memory.Sweep.
func WithIdleTimeout(d time.Duration) Option { return func(c *config) { c.idle = max(d, 0) } }

// WithMaxKeys bounds the number of keys held at once to n, exactly. A new
// key beyond the bound evicts the least recently used idle key of its shard
// or, if none is idle, the least recently used key without waiters (whose
// limiter then loses its state: a key that was not yet full again starts
// over full). If no key can be evicted, the new key's call fails with
// ErrTooManyKeys. Zero or a negative n (the default) means unbounded.
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = max(n, 0) } }

// Memory is the in-memory Repository: one limiter per key, created on first
// use by a factory, in a sharded hash table. It holds no goroutines. The zero
// value is not usable; call NewMemory. A Memory is safe for concurrent use.
type Memory struct {
	factory func(key string) limiters.Limiter
	seed    maphash.Seed
	shards  []shard
	shift   uint         // a key's shard is hash >> shift
	idle    int64        // nanoseconds; 0 means never
	maxKeys int64        // 0 means unbounded
	count   atomic.Int64 // see reserve
	start   time.Time
	closed  atomic.Bool
}

var _ Repository = (*Memory)(nil)

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
// package's limiters never do).
func NewMemory(factory func(key string) limiters.Limiter, opts ...Option) *Memory {
	if factory == nil {
		panic("repository: NewMemory: nil factory")
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	// A bound of n keys gets at most n/16 shards (and at most 256), so that
	// each shard has keys to evict and small bounds evict in exact LRU order.
	n := maxShards
	if c.maxKeys > 0 {
		n = min(1<<(bits.Len(uint(max(c.maxKeys/16, 1)))-1), maxShards)
	}
	return &Memory{
		factory: factory,
		seed:    maphash.MakeSeed(),
		shards:  make([]shard, n),
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		idle:    int64(c.idle),
		maxKeys: int64(c.maxKeys),
		start:   time.Now(),
	}
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
	h := maphash.String(m.seed, key)
	s := &m.shards[m.shardOf(h)]
	now := m.now()
	s.mu.Lock()
	if m.closed.Load() {
		s.mu.Unlock()
		return limiters.Decision{}, limiters.ErrClosed
	}
	if e := s.find(h, key); e != nil {
		s.moveToFront(e)
		e.used = now
		d := e.lim.TryAcquire(n)
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
	d := e.lim.TryAcquire(n)
	if !d.Allowed && m.closed.Load() {
		return d, limiters.ErrClosed
	}
	return d, nil
}

// Acquire waits, in arrival order, until key's limiter grants n permits; see
// limiters.Limiter. While it waits, the key is neither expired nor evicted.
func (m *Memory) Acquire(ctx context.Context, key string, n int) error {
	checkN(n)
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := m.pin(key, true)
	if err != nil {
		return err
	}
	defer e.refs.Add(-1)
	return e.lim.Acquire(ctx, n)
}

// Release gives n permits back to key's limiter (only Concurrency limiters
// hold any). It never creates a limiter: releasing to a key the repository
// does not hold does nothing. ctx is not consulted, so that permits go back
// even when the request that took them was cancelled.
func (m *Memory) Release(_ context.Context, key string, n int) error {
	checkN(n)
	e, err := m.pin(key, false)
	if e == nil {
		return err
	}
	defer e.refs.Add(-1)
	e.lim.Release(n)
	return nil
}

// Get returns key's limiter, creating it if needed, for callers that want
// the Limiter itself (its Stats, say). It returns nil after Close, or when
// the key is new and ErrTooManyKeys would be returned.
//
// The repository may forget the key afterwards (idle expiry, WithMaxKeys
// eviction): it then closes the limiter Get returned and creates a new one
// for the key's next use. Calls through the repository are never affected;
// callers that keep Get's result should not. Do not Close it yourself.
func (m *Memory) Get(key string) limiters.Limiter {
	e, err := m.pin(key, true)
	if err != nil {
		return nil
	}
	e.refs.Add(-1)
	return e.lim
}

// Len returns the number of keys held. While new keys are being added
// concurrently, it counts them from just before they are, so it never
// exceeds the WithMaxKeys bound.
func (m *Memory) Len() int { return int(m.count.Load()) }

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
			if err := e.lim.Close(); err != nil {
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
				m.forget(s, e)
				m.count.Add(-1)
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

// pin returns key's entry with its refs raised by one, creating the entry if
// create is set. It returns (nil, nil) for an absent key when create is not.
// The caller lowers refs when done; while refs > 0, the entry is neither
// expired nor evicted.
func (m *Memory) pin(key string, create bool) (*entry, error) {
	h := maphash.String(m.seed, key)
	s := &m.shards[m.shardOf(h)]
	now := m.now()
	s.mu.Lock()
	if m.closed.Load() {
		s.mu.Unlock()
		return nil, limiters.ErrClosed
	}
	if e := s.find(h, key); e != nil {
		m.use(s, e, now)
		if m.idle > 0 {
			m.sweep(s, now, 1)
		}
		s.mu.Unlock()
		return e, nil
	}
	s.mu.Unlock()
	if !create {
		return nil, nil
	}
	return m.insert(h, key)
}

// use marks e as used at now and pins it. s.mu must be held.
func (m *Memory) use(s *shard, e *entry, now int64) {
	s.moveToFront(e)
	e.used = now
	e.refs.Add(1)
}

// insert creates key's entry, pinned, unless another goroutine has created
// it meanwhile.
func (m *Memory) insert(h uint64, key string) (*entry, error) {
	lim := m.factory(key)
	if lim == nil {
		panic("repository: factory returned a nil limiter for key " + key)
	}
	// Clone the key: it may be a slice of a request's buffer.
	e := &entry{key: strings.Clone(key), lim: lim, hash: uint32(h)}
	i := m.shardOf(h)
	s := &m.shards[i]
	now := m.now()
	s.mu.Lock()
	got, err := m.place(i, e, now)
	s.mu.Unlock()
	if got != e {
		lim.Close()
	}
	return got, err
}

// place adds e to shard i, pinned, making room under WithMaxKeys, and returns
// it; or returns the entry another goroutine added for the same key. The
// shard's lock must be held; place may release it and take it again.
func (m *Memory) place(i int, e *entry, now int64) (*entry, error) {
	s := &m.shards[i]
	h := uint64(e.hash)
	if m.closed.Load() {
		return nil, limiters.ErrClosed
	}
	if old := s.find(h, e.key); old != nil {
		m.use(s, old, now)
		return old, nil
	}
	// Take a place in the count first, so that concurrent inserts in
	// different shards can never together exceed the bound. An eviction
	// hands its place over.
	if !m.reserve() && !m.evict(s, now) {
		s.mu.Unlock()
		ok := m.evictElsewhere(i, now)
		s.mu.Lock()
		if !ok {
			return nil, ErrTooManyKeys
		}
		// The shard was unlocked: look again.
		if m.closed.Load() {
			m.count.Add(-1)
			return nil, limiters.ErrClosed
		}
		if old := s.find(h, e.key); old != nil {
			m.count.Add(-1)
			m.use(s, old, now)
			return old, nil
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

// forget removes e, which has no pins and no waiters, and closes its
// limiter. Its place in m.count stays taken: the caller frees it or hands
// it to a new key. s.mu must be held.
func (m *Memory) forget(s *shard, e *entry) {
	s.remove(e)
	e.lim.Close()
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
	return m.classify(e, e.lim.TryAcquire(0))
}

// classify classifies e, which has no pins, given a peek at its limiter.
func (m *Memory) classify(e *entry, peek limiters.Decision) entryState {
	switch {
	case e.lim.Stats().Queued > 0:
		return stateBusy
	case full(peek):
		return stateIdle
	case peek.Remaining < peek.Limit && peek.ResetAfter <= 0:
		// Time alone will not refill it: permits are held (Concurrency)
		// and will come back through Release.
		return stateBusy
	}
	return stateStale
}

// full reports whether a peek (TryAcquire(0)) found the limiter full again.
func full(peek limiters.Decision) bool { return peek.Allowed && peek.Remaining >= peek.Limit }

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
			m.forget(s, e)
			m.count.Add(-1)
		}
		e = newer
	}
	s.hand = e
}

// evict makes room for one key in s, handing the forgotten key's place in
// m.count to the caller: it forgets the least recently used idle
// entry among the evictScan least recently used, or else the least recently
// used of them without waiters. Busy entries it meets move to the front, so
// the next eviction looks past them. s.mu must be held.
func (m *Memory) evict(s *shard, now int64) bool {
	var stale *entry
	e := s.tail
	for range evictScan {
		if e == nil {
			break
		}
		newer := e.prev
		st := stateBusy
		if e.refs.Load() == 0 {
			// Once a stale fallback is found, only idle entries matter:
			// skip classifying entries that the peek shows are not full.
			if peek := e.lim.TryAcquire(0); stale == nil || full(peek) {
				st = m.classify(e, peek)
			} else {
				st = stateStale
			}
		}
		switch st {
		case stateIdle:
			m.forget(s, e)
			return true
		case stateStale:
			if stale == nil {
				stale = e
			}
		case stateBusy:
			s.moveToFront(e)
			e.used = now
		}
		e = newer
	}
	if stale == nil {
		return false
	}
	m.forget(s, stale)
	return true
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
