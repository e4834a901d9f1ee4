// Package waitq is the wait queue that blocking acquires share: waiters in
// priority lanes, FIFO within a lane, with the count of queued permits, a
// bounded overtaking rule so that no waiter starves, and one Wait method
// that handles the race between a grant and the end of the waiter's
// context.
//
// A Queue holds no lock of its own: its owner guards it with a mutex and
// calls every method but Wait with that mutex held. The owner decides when
// a waiter is granted (Grant) or failed (Fail); the waiter's goroutine
// blocks in Wait.
package waitq

import (
	"context"
	"sync"
)

// DefaultMaxOvertakes is how many later arrivals of higher priority may go
// ahead of a waiter before it stops yielding: after that, it keeps its
// place against every newcomer. So a waiter of any priority waits behind
// at most the waiters ahead of it when it arrived plus DefaultMaxOvertakes
// later ones — low priority delays a request, it never starves it.
const DefaultMaxOvertakes = 64

// Waiter is one blocked request for N permits. Its fields are read-only
// once it is pushed.
type Waiter struct {
	N        int // permits asked for
	Priority int // higher goes first; equal priorities are FIFO
	// Value is the owner's: what it needs to know of the waiter when it
	// serves the queue (the Transport's gate keeps the request's costs
	// there). The queue never reads it.
	Value any

	ready      chan struct{} // closed when granted (err == nil) or failed
	err        error
	lane       *lane // its lane while it may still be overtaken; nil once settled
	entry      int   // its lane's passes when it joined: overtaken = lane.passes − entry
	queued     bool
	prev, next *Waiter
}

// NewWaiter returns a waiter for n permits at priority p.
func NewWaiter(n, p int) *Waiter { return &Waiter{N: n, Priority: p, ready: make(chan struct{})} }

// Next is the waiter behind w, or nil.
func (w *Waiter) Next() *Waiter { return w.next }

// lane is the run of unsettled waiters of one priority: consecutive in the
// queue, FIFO. passes counts the later arrivals of higher priority that
// went ahead of the lane, so that each waiter's overtakes are known without
// touching it.
type lane struct {
	p           int
	first, last *Waiter
	len         int
	permits     int
	passes      int
}

// Queue is the wait queue. The zero value is an empty queue that allows
// DefaultMaxOvertakes. A nil *Queue answers Len, Head and Ahead as an empty
// one does, so an owner that rarely queues anyone may make its queue with
// the first waiter.
//
// The queue is a settled prefix followed by lanes. A waiter is settled once
// nobody may go ahead of it any more: once it has been overtaken
// MaxOvertakes times, it and every waiter ahead of it keep their places
// against every newcomer. Behind the settled prefix, the lanes are in
// descending priority, so a newcomer joins the end of its lane and passes
// every lane of lower priority. Every operation costs O(1) plus O(L) for
// the L priorities with unsettled waiters (one, when nobody uses
// priorities); settling is amortized O(1) a waiter, as each settles once.
type Queue struct {
	head, tail *Waiter
	len        int
	permits    int

	settled        *Waiter // the last settled waiter, or nil
	settledLen     int
	settledPermits int
	lanes          []*lane // descending priority, in queue order
	spare          *lane   // an emptied lane, kept for reuse
	gen            uint64  // see Gen

	// MaxOvertakes bounds how many later arrivals may go ahead of one
	// waiter; 0 means DefaultMaxOvertakes, < 0 means none (pure FIFO).
	MaxOvertakes int
}

func (q *Queue) maxOvertakes() int {
	if q.MaxOvertakes == 0 {
		return DefaultMaxOvertakes
	}
	return max(q.MaxOvertakes, 0)
}

// Head is the first waiter, or nil.
func (q *Queue) Head() *Waiter {
	if q == nil {
		return nil
	}
	return q.head
}

// Tail is the last waiter, or nil.
func (q *Queue) Tail() *Waiter { return q.tail }

// Queued reports whether w is in a queue.
func (w *Waiter) Queued() bool { return w.queued }

// Gen changes whenever the queue changes otherwise than by a push at the
// tail or a grant of the head (a waiter left from elsewhere, or one went
// ahead of others), and on Bump: what an owner computed from the waiters
// in order stays true while Gen stays the same, for the waiters still
// queued.
func (q *Queue) Gen() uint64 { return q.gen }

// Bump changes Gen: the owner's state changed otherwise than by granting
// the head.
func (q *Queue) Bump() { q.gen++ }

// Len is the number of waiters.
func (q *Queue) Len() int {
	if q == nil {
		return 0
	}
	return q.len
}

// Permits is the sum of the waiters' N.
func (q *Queue) Permits() int { return q.permits }

// Fits reports whether n more permits may wait under limit (< 0: no limit).
func (q *Queue) Fits(n, limit int) bool { return limit < 0 || n <= limit-q.permits }

// lanesAhead is how many lanes (from the first) a newcomer of priority p
// queues behind: those of priority p or higher.
func (q *Queue) lanesAhead(p int) int {
	lo, hi := 0, len(q.lanes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if q.lanes[m].p >= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Behind returns the waiter a newcomer of priority p would queue behind,
// or nil if it would go first: the waiters from Head to Behind(p) are the
// ones ahead of it.
func (q *Queue) Behind(p int) *Waiter {
	if i := q.lanesAhead(p); i > 0 {
		return q.lanes[i-1].last
	}
	return q.settled
}

// Ahead returns how many waiters a newcomer of priority p would queue
// behind, the permits they ask for, and the last of them (nil if none),
// without walking them.
func (q *Queue) Ahead(p int) (n, permits int, last *Waiter) {
	if q == nil {
		return 0, 0, nil
	}
	n, permits, last = q.settledLen, q.settledPermits, q.settled
	for _, l := range q.lanes {
		if l.p < p {
			break
		}
		n += l.len
		permits += l.permits
		last = l.last
	}
	return n, permits, last
}

// Push queues w behind every waiter of its priority or higher, and ahead of
// those of lower priority that have not yet been overtaken MaxOvertakes
// times.
func (q *Queue) Push(w *Waiter) {
	limit := q.maxOvertakes()
	if limit == 0 { // pure FIFO: everyone is settled on arrival
		if t := q.tail; t != nil && t.lane != nil {
			q.settleThrough(t) // MaxOvertakes was changed under waiters
		}
		q.link(w, q.tail)
		q.settle(w)
		return
	}
	i := q.lanesAhead(w.Priority)
	var l *lane
	if i > 0 && q.lanes[i-1].p == w.Priority {
		l = q.lanes[i-1]
	} else {
		l = q.spare
		q.spare = nil
		if l == nil {
			l = new(lane)
		}
		*l = lane{p: w.Priority}
		q.lanes = append(q.lanes, nil)
		copy(q.lanes[i+1:], q.lanes[i:])
		q.lanes[i] = l
		i++
	}
	// Behind the last waiter of its lane, else of the lane before, else
	// the settled ones.
	at := l.last
	if at == nil {
		at = q.settled
		if i > 1 {
			at = q.lanes[i-2].last
		}
	}
	q.link(w, at)
	if w.next != nil {
		q.gen++ // it went ahead of others
	}
	w.lane, w.entry = l, l.passes
	if l.first == nil {
		l.first = w
	}
	l.last = w
	l.len++
	l.permits += w.N
	// It passes every lane behind its own; the lowest whose first waiter
	// has now been passed limit times settles, up to its last such waiter,
	// with everyone ahead of it.
	settle := -1
	for j := i; j < len(q.lanes); j++ {
		o := q.lanes[j]
		o.passes++
		if o.passes-o.first.entry >= limit {
			settle = j
		}
	}
	if settle >= 0 {
		o := q.lanes[settle]
		x := o.first
		for x.next != nil && x.next.lane == o && o.passes-x.next.entry >= limit {
			x = x.next
		}
		q.settleThrough(x)
	}
}

// link puts w into the list right behind at (at the head if at is nil).
func (q *Queue) link(w, at *Waiter) {
	w.prev = at
	if at != nil {
		w.next = at.next
		at.next = w
	} else {
		w.next = q.head
		q.head = w
	}
	if w.next != nil {
		w.next.prev = w
	} else {
		q.tail = w
	}
	w.queued = true
	q.len++
	q.permits += w.N
}

// settle adds w, right behind the settled prefix and in no lane, to it.
func (q *Queue) settle(w *Waiter) {
	q.settled = w
	q.settledLen++
	q.settledPermits += w.N
}

// settleThrough settles every waiter from the first unsettled one to x, a
// waiter of a lane, and drops the lanes it empties.
func (q *Queue) settleThrough(x *Waiter) {
	k := 0
	for _, l := range q.lanes {
		if x.lane != l {
			for w := l.first; ; w = w.next {
				w.lane = nil
				if w == l.last {
					break
				}
			}
			q.settledLen += l.len
			q.settledPermits += l.permits
			k++
			continue
		}
		for w := l.first; ; w = w.next {
			w.lane = nil
			l.len--
			l.permits -= w.N
			q.settledLen++
			q.settledPermits += w.N
			if w == x {
				break
			}
		}
		if l.len == 0 {
			k++
		} else {
			l.first = x.next
		}
		break
	}
	q.settled = x
	if k > 0 {
		q.spare = q.lanes[k-1]
		n := copy(q.lanes, q.lanes[k:])
		clear(q.lanes[n:])
		q.lanes = q.lanes[:n]
	}
}

// Remove takes w out of the queue. It reports whether w was the head (the
// owner then has a new head to serve) and does nothing if w is not queued.
func (q *Queue) Remove(w *Waiter) (wasHead bool) {
	if !w.queued {
		return false
	}
	q.gen++
	return q.remove(w)
}

func (q *Queue) remove(w *Waiter) (wasHead bool) {
	if l := w.lane; l != nil {
		l.len--
		l.permits -= w.N
		switch {
		case l.len == 0:
			q.dropLane(l)
		case l.first == w:
			l.first = w.next
		case l.last == w:
			l.last = w.prev
		}
		w.lane = nil
	} else {
		q.settledLen--
		q.settledPermits -= w.N
		if q.settled == w {
			q.settled = w.prev // settled too, or nil: they are a prefix
		}
	}
	wasHead = q.head == w
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.len--
	q.permits -= w.N
	return wasHead
}

// dropLane takes the emptied lane l out of the lanes.
func (q *Queue) dropLane(l *lane) {
	i := q.lanesAhead(l.p) - 1
	copy(q.lanes[i:], q.lanes[i+1:])
	q.lanes[len(q.lanes)-1] = nil
	q.lanes = q.lanes[:len(q.lanes)-1]
	q.spare = l
}

// Grant takes w out of the queue and wakes it with its permits.
func (q *Queue) Grant(w *Waiter) {
	if w.queued {
		if q.head != w {
			q.gen++
		}
		q.remove(w)
	}
	close(w.ready)
}

// Fail takes w out of the queue and wakes it with err.
func (q *Queue) Fail(w *Waiter, err error) {
	w.err = err
	q.Remove(w)
	close(w.ready)
}

// Wait blocks until w is granted or failed, or ctx ends, and returns nil
// for a grant, the failure's error, or ctx's error. It must be called
// without mu held.
//
// When ctx ends, the waiter leaves holding nothing, however the race with
// a grant goes: Wait locks mu and calls left with it held — granted true if
// the grant had landed (the owner gives the permits back), else with w
// already removed and wasHead reporting whether it was the head (the owner
// serves the new head). A ctx that ended before a grant was seen always
// wins, even when both are ready at once.
func (q *Queue) Wait(ctx context.Context, mu sync.Locker, w *Waiter, left func(granted, wasHead bool)) error {
	select {
	case <-w.ready:
		if w.err != nil || ctx.Err() == nil {
			return w.err
		}
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case <-w.ready:
		if w.err != nil {
			return w.err
		}
		left(true, false)
	default:
		left(false, q.Remove(w))
	}
	return ctx.Err()
}
