package throttle

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// githubStyle answers as GitHub does: a bucket named, 5000 an hour, the
// reset an hour ahead (epoch seconds).
func githubStyle() http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		h := http.Header{
			"X-Ratelimit-Limit":     {"5000"},
			"X-Ratelimit-Remaining": {"4999"},
			"X-Ratelimit-Used":      {"1"},
			"X-Ratelimit-Reset":     {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
			"X-Ratelimit-Resource":  {"core"},
		}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: req}, nil
	})
}

func partitionCount(tr *Transport) int {
	tr.mu.RLock()
	defer tr.mu.RUnlock()
	if len(tr.parts.m) != len(tr.parts.ring) {
		panic("partitions: map and ring disagree")
	}
	return len(tr.parts.ring)
}

func trip(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	resp, err := rt.RoundTrip(mustReq(t, url, nil))
	require.NoError(t, err)
	resp.Body.Close()
}

// TestMaxPartitions: past the bound, idle partitions are forgotten, least
// recently used first; one used all along, one with a request on the wire
// and one paused are kept.
func TestMaxPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		base := githubStyle()
		rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch req.URL.Host {
			case "busy.test":
				<-release
			case "paused.test":
				return &http.Response{StatusCode: http.StatusTooManyRequests, Body: http.NoBody, Request: req,
					Header: http.Header{"Retry-After": {"3600"}}}, nil
			}
			return base.RoundTrip(req)
		})
		tr := NewTransport(rt, WithMaxPartitions(100))
		defer tr.Close()
		var wg sync.WaitGroup
		wg.Go(func() { trip(t, tr, "http://busy.test/") })
		synctest.Wait()
		trip(t, tr, "http://paused.test/")
		for i := range 1000 {
			trip(t, tr, fmt.Sprintf("http://host%d.test/", i))
			trip(t, tr, "http://hot.test/")
		}
		assert.LessOrEqual(t, partitionCount(tr), 100)
		tr.mu.RLock()
		for _, k := range []string{"busy.test", "paused.test", "hot.test", "host999.test"} {
			assert.Contains(t, tr.parts.m, k)
		}
		assert.NotContains(t, tr.parts.m, "host0.test", "the least recently used went first")
		tr.mu.RUnlock()
		close(release)
		wg.Wait()
	})
}

// TestMaxPartitionsDefault: WithMaxPartitions(0) is the default bound.
func TestMaxPartitionsDefault(t *testing.T) {
	tr := NewTransport(githubStyle(), WithMaxPartitions(0))
	defer tr.Close()
	assert.Equal(t, DefaultMaxPartitions, tr.parts.max)
	assert.Equal(t, DefaultMaxPartitions, NewTransport(nil).parts.max)
}

// TestPartitionsSweptWhileKnownHostsAreCalled: partitions whose resets
// passed go even when the next requests are all to hosts already known.
func TestPartitionsSweptWhileKnownHostsAreCalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(githubStyle())
		defer tr.Close()
		for i := range 3000 {
			trip(t, tr, fmt.Sprintf("http://host%d.test/", i))
		}
		require.Equal(t, 3000, partitionCount(tr))
		time.Sleep(2 * time.Hour)
		for range 2000 {
			trip(t, tr, "http://host0.test/")
		}
		assert.Less(t, partitionCount(tr), 10, "the stale partitions are gone")
	})
}

// TestPartitionInUseIsKept: a partition one goroutine calls has nothing
// on the wire between two of its requests and knows no limit, but it is
// in use: the sweeping hand keeps it (and what its answers taught) for as
// long as it is used, and forgets it once it has not been for a round.
// It forgot it at the 64th request and every second after, and a bare
// refusal then found one success counted where 66 had gone: against
// HAProxy's stick table at 66 a second, one goroutine 1 ms away, 264
// requests took 12.5 times the ideal at one request a second.
func TestPartitionInUseIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		silent := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		})
		tr := NewTransport(silent)
		defer tr.Close()
		gateOf := func() *gate {
			tr.mu.RLock()
			defer tr.mu.RUnlock()
			if p := tr.parts.m["api.test"]; p != nil {
				return p.g
			}
			return nil
		}
		trip(t, tr, "http://api.test/")
		first := gateOf()
		for range 300 { // six seconds: five sweeps of the ring
			time.Sleep(20 * time.Millisecond)
			trip(t, tr, "http://api.test/")
			require.Same(t, first, gateOf(), "the partition in use was forgotten")
		}
		time.Sleep(2 * sweepRound)
		trip(t, tr, "http://other.test/") // a new partition takes a sweeping step: api.test was used since the last
		time.Sleep(2 * sweepRound)
		for range sweepEvery { // and so does every 64th request
			trip(t, tr, "http://other.test/")
		}
		assert.Equal(t, 1, partitionCount(tr), "the partition no longer used was forgotten")
	})
	b := modelBehaviourOf(t, "e/haproxy stick table")
	r := runModel(t, b, modelRun{rate: 66, workers: 1, total: 264, latency: time.Millisecond, method: b.method})
	assert.Less(t, r.ratio(), 1.25, "one goroutine against a bare window of 66 a second")
}

// TestManyHostsHeap: 200,000 hosts with GitHub-style answers through a
// Transport with default options hold a bounded heap (issue 21: at most
// 300 MB live), and one partition with GitHub-style headers (its gate, its
// bucket's gate and quota, its route, its place in the map and the ring)
// at most 1 KB: the heap's growth over the first 10,000 hosts, each
// called once. Under the race detector, whose shadow memory makes it
// slow, 40,000 hosts.
func TestManyHostsHeap(t *testing.T) {
	hosts := 200_000
	if raceEnabled {
		hosts = 40_000
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	tr := NewTransport(githubStyle())
	defer tr.Close()
	const sample = 10_000
	var per uint64
	for i := range hosts {
		trip(t, tr, "http://host"+strconv.Itoa(i)+".test/")
		if i+1 == sample {
			per = (heap() - before) / sample
		}
	}
	live := heap() - before
	t.Logf("%d hosts: %d partitions, %.1f MB live; a partition with GitHub-style headers costs %d B", hosts, partitionCount(tr), float64(live)/1e6, per)
	assert.LessOrEqual(t, partitionCount(tr), DefaultMaxPartitions)
	assert.Less(t, live, uint64(300<<20))
	assert.LessOrEqual(t, per, uint64(1024), "a partition with GitHub-style headers in at most 1 KB")
	runtime.KeepAlive(tr)
}

// TestDeepGateQueue: requests queued behind a paused partition with
// WithMaxWait cost the same at any depth (the turn is counted, not walked):
// 30,000 queue quickly (before issue 21, ~10 s of CPU). Under the race
// detector, whose goroutine limit is 8,128, 5,000.
func TestDeepGateQueue(t *testing.T) {
	n := 30_000
	if raceEnabled {
		n = 5_000
	}
	rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Body: http.NoBody, Request: req,
			Header: http.Header{"Retry-After": {"3600"}}}, nil
	})
	tr := NewTransport(rt, WithMaxWait(2*time.Hour))
	trip(t, tr, "http://paused.test/") // the answer pauses the partition for an hour
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := tr.RoundTrip(mustReq(t, "http://paused.test/", nil))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	for tr.Stats().Queued < n && time.Since(start) < time.Minute {
		time.Sleep(time.Millisecond) // polls an outcome, with a bound
	}
	took := time.Since(start)
	t.Logf("%d requests queued behind a pause in %v", n, took)
	assert.Equal(t, n, tr.Stats().Queued, "all queued within a minute")
	tr.Close() // fails them with ErrClosed
	wg.Wait()
}
