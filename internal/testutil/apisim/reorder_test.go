package apisim

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// remainingInReplyOrder sends ten requests 1ms apart through a Reorder
// around a quota server and returns X-RateLimit-Remaining of each reply in
// the order the replies came back.
func remainingInReplyOrder(t *testing.T, maxDelay time.Duration, seed uint64) []string {
	t.Helper()
	var got []string
	synctest.Test(t, func(t *testing.T) {
		q := NewQuota(100, time.Hour, "K")
		o := &Reorder{Handler: q, Max: maxDelay, Seed: seed}
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				r := get(t, o, "/")
				assert.Equal(t, http.StatusOK, r.status)
				assert.LessOrEqual(t, time.Since(start), 10*time.Millisecond+maxDelay)
				mu.Lock()
				got = append(got, r.header.Get("X-RateLimit-Remaining"))
				mu.Unlock()
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		assert.Equal(t, int64(10), q.Snapshot().Admitted)
	})
	return got
}

func TestReorderShufflesAnswers(t *testing.T) {
	decided := []string{"99", "98", "97", "96", "95", "94", "93", "92", "91", "90"}
	assert.Equal(t, decided, remainingInReplyOrder(t, 0, 1), "no delay, no reordering")

	got := remainingInReplyOrder(t, 50*time.Millisecond, 1)
	assert.NotEqual(t, decided, got, "answers come back out of order")
	assert.ElementsMatch(t, decided, got, "but they were decided in arrival order")
	assert.Equal(t, got, remainingInReplyOrder(t, 50*time.Millisecond, 1), "the same seed, the same order")
}
