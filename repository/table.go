package repository

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/throttlekit/throttle/limiters"
)

// entry is one key's limiter. It is 64 bytes, one allocation.
//
// A key whose limiter is an idle GCRA or TokenBucket (the factory's, or one
// that was) keeps no limiter: its whole state is tat, and x points to the
// configuration it is a state of, which every key of that configuration
// shares (compact). Its limiter is made again from the two when something
// needs one: a caller that must wait, Get, Reconfigure. A key of any other
// limiter has its own holder.
type entry struct {
	key        string
	x          atomic.Pointer[holder] // the key's limiter, or its configuration; replaced under shard.mu, read without it by pins
	tat        int64                  // a compact entry's state (limiters.GCRAParams.Pack); guarded by shard.mu
	prev, next *entry                 // the shard's LRU list: prev is more recently used
	used       int64                  // last use, nanoseconds since Memory.start; guarded by shard.mu
	refs       atomic.Int32           // repository calls using the entry right now (pins)
	hash       uint32                 // the low bits of the key's hash: its home slot
}

// holder is what an entry's x points to: its limiter, or (lim nil) the
// configuration of the bucket a compact entry's tat is a state of.
type holder struct {
	lim limiters.Limiter
	p   *limiters.GCRAParams
}

// shard is one lock's worth of keys: an open-addressing hash table of
// entries (linear probing, at most 3/4 full) and an LRU list through them.
// A plain map[string]*entry would spend 24 bytes per slot on the key's string
// header and the pointer; this table spends 8, because the key lives in the
// entry. Every method requires that s.mu is held.
//
// The table grows without a stall: a new table twice the size takes every
// insert at once, and the old one's entries move over a few at each insert
// and removal (migrate) — done long before the new table fills — while
// lookups look in both.
type shard struct {
	mu    sync.Mutex
	slots []*entry // len is 0 or a power of two
	old   []*entry // the table slots replaced, while its entries move; else nil
	moved int      // old[:moved] have moved (or were tombs)
	n     int      // entries in slots and old together
	head  *entry   // most recently used
	tail  *entry   // least recently used
	hand  *entry   // where the idle sweep resumes; nil means at the tail
	// debt counts, per key, the permits that were held when the key's
	// limiter was forgotten by Reset or Reconfigure: their Release must
	// not reach the key's new limiter. nil until needed.
	debt map[string]int
	_    [64]byte
}

// tomb marks a slot of the old table whose entry moved or was removed: a
// lookup goes past it (the probe runs of the old table stay whole).
var tomb = new(entry)

// migrateStep is how many slots of the old table each insert and removal
// moves: the old table holds len/2 slots' worth of the new one's capacity,
// and the new one takes 3/8 of its length in inserts before it must grow
// again, so the move is over long before. At 16 it is over after 1/32 of
// the new length in inserts — a twelfth of the way to the next growth —
// so that the old table, a third of the slots while it lasts, is given
// back soon: a table that stops growing (a million keys in 256 shards
// stops 830 inserts after its last doubling) does not keep it for good.
// Moving 16 slots costs an insert a few hundred nanoseconds at most.
const migrateStep = 16

// find returns the entry for key, whose hash is h, or nil.
func (s *shard) find(h uint64, key string) *entry {
	if s.n == 0 {
		return nil
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := s.slots[i]
		if e == nil {
			break
		}
		if e.hash == uint32(h) && e.key == key {
			return e
		}
	}
	if s.old == nil {
		return nil
	}
	mask = uint64(len(s.old) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := s.old[i]
		if e == nil {
			return nil
		}
		if e != tomb && e.hash == uint32(h) && e.key == key {
			return e
		}
	}
}

// add inserts e, which must not be present, as the most recently used.
func (s *shard) add(e *entry) {
	s.migrate(migrateStep)
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	s.place(e)
	s.n++
	s.pushFront(e)
}

func (s *shard) place(e *entry) { s.slots[s.probe(e.hash, nil)] = e }

// probe returns the first slot holding x in the probe run that starts at
// the home slot of hash: a free slot when x is nil. x must be there.
func (s *shard) probe(hash uint32, x *entry) uint32 {
	mask := uint32(len(s.slots) - 1)
	i := hash & mask
	for s.slots[i] != x {
		i = (i + 1) & mask
	}
	return i
}

// grow starts moving to a table twice the size (finishing a move still
// under way first: it cannot be, as migrateStep is chosen, but a table
// built by a resize can be fuller).
func (s *shard) grow() {
	s.migrate(len(s.old))
	if s.n == 0 {
		s.slots = make([]*entry, max(2*len(s.slots), 8))
		return
	}
	s.old, s.moved = s.slots, 0
	s.slots = make([]*entry, 2*len(s.old))
}

// migrate moves the entries of up to k more slots of the old table.
func (s *shard) migrate(k int) {
	if s.old == nil {
		return
	}
	for ; k > 0 && s.moved < len(s.old); k-- {
		if e := s.old[s.moved]; e != nil && e != tomb {
			s.place(e)
			s.old[s.moved] = tomb
		}
		s.moved++
	}
	if s.moved == len(s.old) {
		s.old, s.moved = nil, 0
	}
}

// resize rebuilds the table at size at once (shrinking: rare, and on a
// table mostly empty).
func (s *shard) resize(size int) {
	s.migrate(len(s.old))
	old := s.slots
	s.slots = make([]*entry, size)
	for _, e := range old {
		if e != nil {
			s.place(e)
		}
	}
}

// remove deletes e, which must be present.
func (s *shard) remove(e *entry) {
	if !s.removeFrom(e) { // still in the old table
		mask := uint32(len(s.old) - 1)
		i := e.hash & mask
		for s.old[i] != e {
			i = (i + 1) & mask
		}
		s.old[i] = tomb
	}
	s.n--
	s.unlink(e)
	s.migrate(migrateStep)
	if l := len(s.slots); s.old == nil && l > 8 && s.n*8 < l {
		s.resize(l / 2)
	}
}

// removeFrom takes e out of the current table, if it is there.
func (s *shard) removeFrom(e *entry) bool {
	mask := uint32(len(s.slots) - 1)
	i := e.hash & mask
	for s.slots[i] != e {
		if s.slots[i] == nil {
			return false
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move later entries of the probe run into
	// the hole unless that would put them before their home slot.
	for j := (i + 1) & mask; s.slots[j] != nil; j = (j + 1) & mask {
		k := s.slots[j].hash & mask
		if (i <= j && (k <= i || k > j)) || (i > j && k <= i && k > j) {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = nil
	return true
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	} else {
		s.tail = e
	}
	s.head = e
}

func (s *shard) unlink(e *entry) {
	if s.hand == e {
		s.hand = e.prev
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *shard) moveToFront(e *entry) {
	if s.head != e {
		s.unlink(e)
		s.pushFront(e)
	}
}

// reset forgets every entry.
func (s *shard) reset() {
	s.slots, s.old, s.moved, s.n = nil, nil, 0, 0
	s.head, s.tail, s.hand = nil, nil, nil
	s.debt = nil
}

// owe records that n permits of key were held by a limiter the shard forgot.
func (s *shard) owe(key string, n int) {
	if s.debt == nil {
		s.debt = make(map[string]int)
	}
	s.debt[strings.Clone(key)] += n
}

// payDebt takes what key is owed out of a Release of n permits and returns
// the permits left to give to key's limiter.
func (s *shard) payDebt(key string, n int) int {
	d := s.debt[key]
	if d == 0 {
		return n
	}
	paid := min(d, n)
	if paid == d {
		delete(s.debt, key)
	} else {
		s.debt[key] = d - paid
	}
	return n - paid
}
