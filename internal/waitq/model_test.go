package waitq_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/waitq"
)

// refQueue is the queue as it was first written: a list walked from the
// tail, each waiter counting its own overtakes. The lanes must order
// waiters exactly as it does while waiters leave from the head.
type refQueue struct {
	ws    []*refWaiter
	limit int
}

type refWaiter struct {
	id, p, overtaken int
}

func (r *refQueue) push(id, p int) {
	i := len(r.ws)
	for i > 0 && r.ws[i-1].p < p && r.ws[i-1].overtaken < r.limit {
		i--
	}
	for _, o := range r.ws[i:] {
		o.overtaken++
	}
	r.ws = append(r.ws[:i], append([]*refWaiter{{id: id, p: p}}, r.ws[i:]...)...)
}

func TestLanesMatchTheWalk(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 64, -1} {
		rng := rand.New(rand.NewPCG(uint64(limit+10), 7))
		q := waitq.Queue{MaxOvertakes: limit}
		ref := refQueue{limit: max(limit, 0)}
		ids := map[*waitq.Waiter]int{}
		for step := range 1500 {
			if rng.IntN(3) == 0 && q.Head() != nil {
				q.Remove(q.Head())
				ref.ws = ref.ws[1:]
			} else {
				p := rng.IntN(4) - 1
				push(&q, ids, step, 1+rng.IntN(3), p)
				ref.push(step, p)
			}
			got := order(&q, ids)
			var want []int
			for _, w := range ref.ws {
				want = append(want, w.id)
			}
			require.Equal(t, want, got, "limit %d step %d", limit, step)
		}
	}
}

// TestAheadCountsWhatBehindNames: Ahead's counts are those of the waiters
// from the head to Behind, through pushes and removals anywhere.
func TestAheadCountsWhatBehindNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := waitq.Queue{MaxOvertakes: 3}
	var live []*waitq.Waiter
	for range 1500 {
		if rng.IntN(3) == 0 && len(live) > 0 {
			i := rng.IntN(len(live))
			q.Remove(live[i])
			live = append(live[:i], live[i+1:]...)
		} else {
			w := waitq.NewWaiter(1+rng.IntN(5), rng.IntN(5)-2)
			q.Push(w)
			live = append(live, w)
		}
		total, permits := 0, 0
		for w := q.Head(); w != nil; w = w.Next() {
			total++
			permits += w.N
		}
		require.Equal(t, len(live), total)
		require.Equal(t, q.Len(), total)
		require.Equal(t, q.Permits(), permits)
		for p := -3; p <= 3; p++ {
			n, perm, last := q.Ahead(p)
			require.Equal(t, q.Behind(p), last)
			wn, wp := 0, 0
			if last != nil {
				for w := q.Head(); ; w = w.Next() {
					wn++
					wp += w.N
					if w == last {
						break
					}
				}
			}
			require.Equal(t, wn, n, "priority %d", p)
			require.Equal(t, wp, perm, "priority %d", p)
			// Nobody ahead of a newcomer has a lower priority unless a
			// waiter at or behind it has settled.
		}
	}
}
