package throttle

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// untilOK sends the request newReq makes through client again and again
// until one is answered 200, as a caller that retries its refusals does.
// A failed exchange fails t.
func untilOK(t *testing.T, client *http.Client, newReq func() *http.Request) {
	t.Helper()
	for {
		resp, err := client.Do(newReq())
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
	}
}

// drive runs total units of work over workers goroutines; a unit is retried
// until the server accepts it (so a 429 costs a request, as in real life).
// It returns the elapsed time.
func drive(t *testing.T, rt http.RoundTripper, workers, total int) time.Duration {
	t.Helper()
	client := &http.Client{Transport: rt}
	var next atomic.Int64
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(total) {
				for attempt := 0; ; attempt++ {
					resp, err := client.Get("http://api.test/items")
					if err != nil {
						failed.Add(1)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
					if attempt > 100 {
						failed.Add(1)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "requests failed")
	return time.Since(start)
}

// TestTransportAgainstServers drives 10 goroutines through the Transport
// against servers that enforce a real limit, each answering in its own
// (sometimes sloppy) way, and holds the Transport to few 429s and an elapsed
// time within 1.25× of what the server's limit allows.
func TestTransportAgainstServers(t *testing.T) {
	const (
		workers = 10
		total   = 200
		limit   = 20
		window  = time.Second
	)
	// The fastest any client can finish: the first window's permits at
	// once, then limit per window.
	ideal := time.Duration(total/limit-1) * window
	cases := []struct {
		name     string
		api      func() *api
		max429   int // a server that says nothing until it refuses costs one 429 per request in flight, once
		maxRatio float64
		jitter   bool
	}{
		{"github fixed window", func() *api { return githubAPI(limit, window, false) }, 2, 1.25, false},
		{"github window from first request", func() *api { return githubAPI(limit, window, true) }, 2, 1.25, false},
		// Windows that start at the first request, resets rounded down, and
		// a latency that varies: the reset's sub-second phase must be learnt.
		{"github window from first request, jittered latency", func() *api { return githubAPI(limit, window, true) }, 10, 1.25, true},
		{"ietf token bucket", func() *api { return ietfAPI(limiters.PerSecond(limit), limit) }, 2, 1.25, false},
		{"sliding log one slot at a time", func() *api { return slidingLogAPI(limit, window) }, 2, 1.25, false},
		{"retry-after only", func() *api { return retryAfterAPI(limit, window, false, 0, false) }, workers + 2, 1.25, false},
		{"retry-after only, window from first request", func() *api { return retryAfterAPI(limit, window, true, 0, false) }, workers + 2, 1.25, false},
		{"retry-after as UTC http-date", func() *api { return retryAfterAPI(limit, window, false, 0, true) }, workers + 2, 1.25, false},
		{"constant retry-after equal to window", func() *api { return retryAfterAPI(limit, window, true, window, false) }, workers + 2, 1.25, false},
		// A bare 429 from a window: the refusals that end the first burst
		// (the requests on the wire) hold the partition two windows, with
		// no probe; the pace's additive increase finds the limit once more.
		{"bare 429", func() *api { return silentAPI(limit, window) }, workers + 6, 1.25, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := tc.api()
				tr := NewTransport(handlerTransport{h: a, latency: 5 * time.Millisecond, jitter: tc.jitter})
				defer tr.Close()
				elapsed := drive(t, tr, workers, total)
				ok, limited := a.counts()
				t.Logf("%d ok, %d×429, elapsed %v (ideal %v, ratio %.2f)", ok, limited, elapsed, ideal, elapsed.Seconds()/ideal.Seconds())
				assert.Equal(t, total, ok)
				assert.LessOrEqual(t, limited, tc.max429, "429s")
				assert.LessOrEqual(t, elapsed.Seconds(), tc.maxRatio*ideal.Seconds()+0.1, "elapsed")
			})
		})
	}
}

// TestPlainClientGets429s is the control: without the Transport the same
// workload collects many 429s.
func TestPlainClientGets429s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := githubAPI(20, time.Second, false)
		done := make(chan struct{})
		go func() {
			defer close(done)
			client := &http.Client{Transport: handlerTransport{h: a, latency: 5 * time.Millisecond}}
			for range 100 {
				resp, err := client.Get("http://api.test/")
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
		<-done
		_, limited := a.counts()
		assert.Greater(t, limited, 50)
	})
}
