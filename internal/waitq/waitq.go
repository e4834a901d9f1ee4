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
	overtaken  int // later arrivals that went ahead of it
	queued     bool
	prev, next *Waiter
}

// NewWaiter returns a waiter for n permits at priority p.
func NewWaiter(n, p int) *Waiter { return &Waiter{N: n, Priority: p, ready: make(chan struct{})} }

// Next is the waiter behind w, or nil.
func (w *Waiter) Next() *Waiter { return w.next }

// Queue is the wait queue. The zero value is an empty queue that allows
// DefaultMaxOvertakes.
type Queue struct {
	head, tail *Waiter
	len        int
	permits    int
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
func (q *Queue) Head() *Waiter { return q.head }

// Len is the number of waiters.
func (q *Queue) Len() int { return q.len }

// Permits is the sum of the waiters' N.
func (q *Queue) Permits() int { return q.permits }

// Fits reports whether n more permits may wait under limit (< 0: no limit).
func (q *Queue) Fits(n, limit int) bool { return limit < 0 || n <= limit-q.permits }

// Behind returns the waiter a newcomer of priority p would queue behind,
// or nil if it would go first: the waiters from Head to Behind(p) are the
// ones ahead of it.
func (q *Queue) Behind(p int) *Waiter {
	limit := q.maxOvertakes()
	w := q.tail
	for w != nil && w.Priority < p && w.overtaken < limit {
		w = w.prev
	}
	return w
}

// Push queues w behind every waiter of its priority or higher, and ahead of
// those of lower priority that have not yet been overtaken MaxOvertakes
// times.
func (q *Queue) Push(w *Waiter) {
	at := q.Behind(w.Priority)
	for o := q.tail; o != at; o = o.prev {
		o.overtaken++
	}
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

// Remove takes w out of the queue. It reports whether w was the head (the
// owner then has a new head to serve) and does nothing if w is not queued.
func (q *Queue) Remove(w *Waiter) (wasHead bool) {
	if !w.queued {
		return false
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

// Grant takes w out of the queue and wakes it with its permits.
func (q *Queue) Grant(w *Waiter) {
	q.Remove(w)
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
