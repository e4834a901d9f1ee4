package throttle

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// wireCounter is a base transport that answers after latency with headers
// like GitHub's (resource names the bucket; "" sends none, as a server
// with the same quota fields but not GitHub's), and counts the requests
// on the wire: most is the most at once among those sent after the
// first answer came back (the first wave goes before the Transport can
// know whose the server is).
type wireCounter struct {
	latency  time.Duration
	resource string
	fail     func(n int64) bool // the n-th request (from 1) fails on the wire

	sent     atomic.Int64
	mu       sync.Mutex
	now      int
	answered bool
	most     int
}

func (o *wireCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	n := o.sent.Add(1)
	o.mu.Lock()
	o.now++
	if o.answered {
		o.most = max(o.most, o.now)
	}
	o.mu.Unlock()
	time.Sleep(o.latency)
	o.mu.Lock()
	o.now--
	o.answered = true
	o.mu.Unlock()
	if o.fail != nil && o.fail(n) {
		return nil, errors.New("connection reset")
	}
	h := http.Header{
		"X-Ratelimit-Limit":     {"5000"},
		"X-Ratelimit-Remaining": {"4000"},
		"X-Ratelimit-Reset":     {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
	}
	if o.resource != "" {
		h.Set("X-Ratelimit-Resource", o.resource)
	}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: req}, nil
}

func (o *wireCounter) mostAfterFirst() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most
}

// TestGitHubKeepsTenOnTheWire: once an answer shows the server is
// GitHub's, a partition keeps at most ten requests on the wire, as
// GitHub's own client does (its secondary limits count concurrent
// requests); the same fields from another server bound nothing.
func TestGitHubKeepsTenOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		resource string
		most     func(int) bool
	}{
		{"core", func(n int) bool { return n <= githubMaxWire }},
		{"", func(n int) bool { return n > githubMaxWire }},
	} {
		t.Run("resource="+tc.resource, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &wireCounter{latency: 50 * time.Millisecond, resource: tc.resource}
				tr := NewTransport(base)
				defer tr.Close()
				start := time.Now()
				drive(t, tr, 30, 300)
				elapsed := time.Since(start)
				most := base.mostAfterFirst()
				t.Logf("%d on the wire at most after the first answer; %v", most, elapsed)
				assert.True(t, tc.most(most), "%d on the wire at once", most)
				if tc.resource != "" {
					// 300 at ten every 50 ms, the first 30 at once:
					// 28 rounds of 50 ms, and not much more.
					assert.LessOrEqual(t, elapsed, 1500*time.Millisecond)
				}
			})
		})
	}
}

// TestGitHubBoundFreedByOwnGate: requests a GitHub partition let through
// before their route's bucket was known hold places on the wire that
// requests waiting at the bucket count; when they fail on the wire (no
// answer names the bucket) the places are freed all the same, and the
// waiting requests go.
func TestGitHubBoundFreedByOwnGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first request of the wave is answered; the other nine,
		// sent with it before any answer (a first wave is at most
		// waveMax), fail. The ten after them wait for the first answer,
		// then at the bucket it names, behind the nine on the wire.
		base := &wireCounter{latency: 50 * time.Millisecond, resource: "core", fail: func(n int64) bool { return n > 1 && n <= waveMax }}
		tr := NewTransport(base)
		defer tr.Close()
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var ok, failed atomic.Int64
		for i := range 20 {
			wg.Go(func() {
				if i > 0 {
					time.Sleep(time.Millisecond) // the first request goes first
				}
				resp, err := client.Get("http://api.test/repos/o/r")
				if err != nil {
					failed.Add(1)
					return
				}
				resp.Body.Close()
				ok.Add(1)
				// Each goroutine's next request: its route's bucket is
				// known, and goes through it.
				resp, err = client.Get("http://api.test/repos/o/r")
				require.NoError(t, err)
				resp.Body.Close()
				ok.Add(1)
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("requests waiting at the bucket were never let through")
		}
		assert.Equal(t, int64(waveMax-1), failed.Load())
		assert.Equal(t, int64(2*(20-waveMax+1)), ok.Load())
		assert.LessOrEqual(t, base.mostAfterFirst(), githubMaxWire)
	})
}

// TestGitHubCrawlerWaitsForCore: a crawler meets a new owner with every
// request (GET /repos/o17/r): a route not learned yet. Once core is spent,
// each goes as the routes of GET /repos learned went, through core's gate,
// and waits for its reset, as requests of one route learned do; none is
// sent into the pause to learn its bucket from a refusal (10 were).
func TestGitHubCrawlerWaitsForCore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := apisim.NewGitHub(apisim.GitHubConfig{Resources: map[string]apisim.GitHubResource{
			"core":   {Limit: 30, Window: time.Minute},
			"search": {Limit: 10, Window: time.Minute},
		}})
		tr := NewTransport(&apisim.Transport{Handler: gh, Latency: 20 * time.Millisecond})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				for i := next.Add(1); i <= 90; i = next.Add(1) {
					untilOK(t, client, func() *http.Request {
						return mustReq(t, fmt.Sprintf("http://api.github.test/repos/o%d/r", i), nil)
					})
				}
			})
		}
		wg.Wait()
		took, core := time.Since(start), gh.Snapshot().ByKey["core"]
		t.Logf("%v, %+v", took, core)
		assert.EqualValues(t, 90, core.Admitted)
		// A reset in epoch seconds is rounded down: a request sent at
		// the second it names may meet the window's last fraction of a
		// second. At most once a window, as with one route (1-2 in 12
		// runs).
		assert.LessOrEqual(t, core.Refused, int64(2))
		// Three windows; the last tenth of the third may be spread until
		// its end (quota.pace), as with one route (2m0s-2m48s in 12 runs).
		assert.Less(t, took, 2*time.Minute+50*time.Second)
	})
}
