package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// TestLoadNoOverAdmission drives a real loopback server with many
// goroutines and 10,000 distinct keys, each sent more requests than its
// limit, and checks that every key is admitted exactly its limit: no
// over-admission, no under-admission. The window is so long (ten years,
// aligned to the epoch) that the whole test is one window. A second phase
// floods new keys and checks the repository never holds more than
// WithMaxKeys.
func TestLoadNoOverAdmission(t *testing.T) {
	const (
		keys    = 10_000
		limit   = 2
		perKey  = 3
		workers = 64
		window  = 10 * 365 * 24 * time.Hour
	)
	if testing.Short() {
		t.Skip("load test")
	}
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewFixedWindow(limit, window)
	}, repository.WithMaxKeys(keys))
	defer repo.Close()

	var mu sync.Mutex
	served := make(map[string]int, keys)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("X-Key")
		mu.Lock()
		served[k]++
		mu.Unlock()
	})
	rl := server.New(repo, server.WithKey(keyextract.Header("X-Key")))
	srv := httptest.NewServer(rl.Middleware(handler))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	send := func(key string) (int, error) {
		req, err := http.NewRequest("GET", srv.URL, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Requests for each key are spread over the workers, interleaved with
	// other keys, so that one key's requests race each other.
	jobs := make(chan string, workers)
	var ok200, got429, other atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range jobs {
				code, err := send(k)
				switch {
				case err != nil:
					other.Add(1)
				case code == http.StatusOK:
					ok200.Add(1)
				case code == http.StatusTooManyRequests:
					got429.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	for round := range perKey {
		for i := range keys {
			jobs <- "k" + strconv.Itoa((i*7919+round)%keys)
		}
	}
	close(jobs)
	wg.Wait()

	require.Zero(t, other.Load(), "transport errors or unexpected statuses")
	assert.EqualValues(t, keys*limit, ok200.Load())
	assert.EqualValues(t, keys*(perKey-limit), got429.Load())
	require.Len(t, served, keys)
	for k, n := range served {
		if n != limit {
			t.Fatalf("key %s admitted %d times, want exactly %d", k, n, limit)
		}
	}
	assert.LessOrEqual(t, repo.Len(), keys)

	// A flood of new keys never grows the repository past its bound.
	flood := make(chan string, workers)
	for range workers {
		wg.Go(func() {
			for k := range flood {
				_, _ = send(k)
				if n := repo.Len(); n > keys {
					t.Errorf("repository holds %d keys, bound %d", n, keys)
				}
			}
		})
	}
	for i := range keys / 2 {
		flood <- "flood" + strconv.Itoa(i)
	}
	close(flood)
	wg.Wait()
	assert.LessOrEqual(t, repo.Len(), keys)
}
