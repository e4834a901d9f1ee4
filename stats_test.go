package throttle

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// TestStatsCountsQueuedAndPaused: a partition paused by a 429 with
// Retry-After holds the requests that arrive meanwhile; Stats sees them
// queued and the partition paused, and sees nothing once they are through.
func TestStatsCountsQueuedAndPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		refuse := true
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if refuse {
				refuse = false
				w.Header().Set("Retry-After", "10")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		tr := NewTransport(&apisim.Transport{Handler: h, Latency: time.Millisecond})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		get := func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/", nil)
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, Stats{}, tr.Stats(), "a new Transport holds nothing")
		get() // the 429 that pauses api.test for 10 s
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(get)
		}
		synctest.Wait()
		assert.Equal(t, Stats{Partitions: 1, Queued: 5, Paused: 1}, tr.Stats())
		wg.Wait()
		s := tr.Stats()
		assert.Zero(t, s.Queued)
		assert.Zero(t, s.InFlight)
		assert.Zero(t, s.Paused)
	})
}
