package waitq_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle/internal/testutil/racectx"
	"github.com/throttlekit/throttle/internal/waitq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// order lists the waiters' ids from head to tail.
func order(q *waitq.Queue, ids map[*waitq.Waiter]int) []int {
	var out []int
	for w := q.Head(); w != nil; w = w.Next() {
		out = append(out, ids[w])
	}
	return out
}

func push(q *waitq.Queue, ids map[*waitq.Waiter]int, id, n, p int) *waitq.Waiter {
	w := waitq.NewWaiter(n, p)
	ids[w] = id
	q.Push(w)
	return w
}

func TestPriorityLanes(t *testing.T) {
	var q waitq.Queue
	ids := map[*waitq.Waiter]int{}
	push(&q, ids, 1, 1, 0)
	push(&q, ids, 2, 2, 0)
	push(&q, ids, 3, 1, 10)
	push(&q, ids, 4, 1, 5)
	push(&q, ids, 5, 1, 10)
	push(&q, ids, 6, 1, -1)
	push(&q, ids, 7, 1, 0)
	assert.Equal(t, []int{3, 5, 4, 1, 2, 7, 6}, order(&q, ids), "higher first; equal priorities FIFO")
	assert.Equal(t, 7, q.Len())
	assert.Equal(t, 8, q.Permits())
}

func TestBehind(t *testing.T) {
	var q waitq.Queue
	ids := map[*waitq.Waiter]int{}
	assert.Nil(t, q.Behind(0), "empty queue: first")
	a := push(&q, ids, 1, 1, 5)
	b := push(&q, ids, 2, 1, 0)
	assert.Equal(t, b, q.Behind(0))
	assert.Equal(t, a, q.Behind(5))
	assert.Nil(t, q.Behind(6))
}

// TestMaxOvertakesBoundsStarvation: a waiter yields to at most MaxOvertakes
// later arrivals of higher priority, then keeps its place.
func TestMaxOvertakesBoundsStarvation(t *testing.T) {
	for _, bound := range []int{0, 3} {
		q := waitq.Queue{MaxOvertakes: bound}
		want := bound
		if bound == 0 {
			want = waitq.DefaultMaxOvertakes
		}
		ids := map[*waitq.Waiter]int{}
		push(&q, ids, 0, 1, 0)
		for i := 1; i <= want+5; i++ {
			push(&q, ids, i, 1, 10)
		}
		got := order(&q, ids)
		pos := 0
		for i, id := range got {
			if id == 0 {
				pos = i
			}
		}
		assert.Equal(t, want, pos, "bound %d: the low-priority waiter is passed exactly %d times", bound, want)
	}
	q := waitq.Queue{MaxOvertakes: -1}
	ids := map[*waitq.Waiter]int{}
	push(&q, ids, 1, 1, 0)
	push(&q, ids, 2, 1, 10)
	assert.Equal(t, []int{1, 2}, order(&q, ids), "negative: pure FIFO")
}

func TestRemoveAndFits(t *testing.T) {
	var q waitq.Queue
	ids := map[*waitq.Waiter]int{}
	a := push(&q, ids, 1, 2, 0)
	b := push(&q, ids, 2, 3, 0)
	c := push(&q, ids, 3, 4, 0)
	assert.True(t, q.Fits(1, 10))
	assert.False(t, q.Fits(2, 10))
	assert.True(t, q.Fits(1<<40, -1))
	assert.False(t, q.Remove(b))
	assert.True(t, q.Remove(a))
	assert.False(t, q.Remove(a), "not queued: nothing happens")
	assert.Equal(t, []int{3}, order(&q, ids))
	assert.Equal(t, 4, q.Permits())
	assert.True(t, q.Remove(c))
	assert.Nil(t, q.Head())
	assert.Zero(t, q.Len())
}

func TestWaitGrantedAndFailed(t *testing.T) {
	var mu sync.Mutex
	var q waitq.Queue
	w := waitq.NewWaiter(1, 0)
	q.Push(w)
	q.Grant(w)
	require.NoError(t, q.Wait(context.Background(), &mu, w, func(bool, bool) { t.Fatal("left called") }))

	errBoom := errors.New("boom")
	w = waitq.NewWaiter(1, 0)
	q.Push(w)
	q.Fail(w, errBoom)
	require.ErrorIs(t, q.Wait(context.Background(), &mu, w, func(bool, bool) { t.Fatal("left called") }), errBoom)
	assert.Zero(t, q.Len())
}

func TestWaitCancelRacingGrant(t *testing.T) {
	var mu sync.Mutex
	var q waitq.Queue
	w := waitq.NewWaiter(1, 0)
	q.Push(w)
	ctx := racectx.GrantFirst(context.Background(), func() {
		mu.Lock()
		q.Grant(w)
		mu.Unlock()
	})
	var gotGranted bool
	err := q.Wait(ctx, &mu, w, func(granted, _ bool) { gotGranted = granted })
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, gotGranted, "the owner is told to give the grant back")
}

func TestWaitCancelledWhileQueued(t *testing.T) {
	var mu sync.Mutex
	var q waitq.Queue
	a := waitq.NewWaiter(1, 0)
	b := waitq.NewWaiter(1, 0)
	q.Push(a)
	q.Push(b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var head bool
	require.ErrorIs(t, q.Wait(ctx, &mu, a, func(granted, wasHead bool) {
		assert.False(t, granted)
		head = wasHead
	}), context.Canceled)
	assert.True(t, head)
	assert.Equal(t, b, q.Head())
	assert.Equal(t, 1, q.Len())

	done := make(chan error)
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- q.Wait(ctx2, &mu, b, func(bool, bool) {}) }()
	cancel2()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Zero(t, q.Len())
}

// TestNilQueueIsEmpty: a nil *Queue answers Len, Head and Ahead as an
// empty one does (an owner makes its queue with the first waiter).
func TestNilQueueIsEmpty(t *testing.T) {
	var q *waitq.Queue
	assert.Equal(t, 0, q.Len())
	assert.Nil(t, q.Head())
	n, permits, last := q.Ahead(5)
	assert.Zero(t, n)
	assert.Zero(t, permits)
	assert.Nil(t, last)
}
