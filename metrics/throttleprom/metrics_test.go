package throttleprom_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/metrics/throttleprom"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMetrics(t *testing.T, opts ...throttleprom.Option) (*throttleprom.Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m, err := throttleprom.New(reg, opts...)
	require.NoError(t, err)
	return m, reg
}

func TestServerDecisions(t *testing.T) {
	m, reg := newMetrics(t)
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewFixedWindow(2, time.Hour)
	})
	defer repo.Close()
	rl := server.New(repo, server.WithKey(keyextract.Header("X-User")), server.WithObserver(m.ServerObserver()))
	h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 50 { // 50 callers, 3 requests each: 2 allowed, 1 rejected
		for range 3 {
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-User", "user-"+string(rune('A'+i)))
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	const want = `
# HELP throttle_server_decisions_total Decisions of server-side rate limiting, by result (allowed, delayed, rejected, shadow_rejected, near_limit, bypassed, forbidden, error), policy (plan) and rule (endpoint pattern).
# TYPE throttle_server_decisions_total counter
throttle_server_decisions_total{policy="",result="allowed",rule=""} 100
throttle_server_decisions_total{policy="",result="near_limit",rule=""} 50
throttle_server_decisions_total{policy="",result="rejected",rule=""} 50
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_server_decisions_total"))
}

func TestKeyLabelIsOptInAndMapped(t *testing.T) {
	m, reg := newMetrics(t, throttleprom.WithKeyLabel(func(k string) string {
		if strings.HasPrefix(k, "vip-") {
			return "vip"
		}
		return "other"
	}))
	obs := m.ServerObserver()
	for _, k := range []string{"vip-1", "vip-2", "a", "b", "c"} {
		obs(server.Event{Kind: server.EventAllowed, Key: k, Plan: "free"})
	}
	n, err := testutil.GatherAndCount(reg, "throttle_server_decisions_total")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "one series per mapped value, not per key")
	const want = `
# HELP throttle_server_decisions_total Decisions of server-side rate limiting, by result (allowed, delayed, rejected, shadow_rejected, near_limit, bypassed, forbidden, error), policy (plan) and rule (endpoint pattern).
# TYPE throttle_server_decisions_total counter
throttle_server_decisions_total{key="other",policy="free",result="allowed",rule="default"} 3
throttle_server_decisions_total{key="vip",policy="free",result="allowed",rule="default"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_server_decisions_total"))
}

func TestTransport(t *testing.T) {
	m, reg := newMetrics(t)
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	lim := limiters.NewTokenBucket(limiters.PerSecond(1000), 10)
	require.NoError(t, m.WatchLimiter("outbound", lim))
	tr := throttle.NewTransport(nil, throttle.WithLimiter(lim), throttle.WithObserver(m.TransportObserver()))
	defer tr.Close()
	client := &http.Client{Transport: tr}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, get(context.Background())) // 429, Retry-After: 1: the partition pauses
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.Error(t, get(ctx)) // paused for 1s: refused before it is sent
	v := gather(t, reg)
	assert.Equal(t, 1.0, v["throttle_transport_pauses_total,status=429"])
	assert.Equal(t, 1.0, v["throttle_transport_paused_partitions"])
	assert.Equal(t, 1.0, v["throttle_transport_requests_total,result=rejected"])

	require.NoError(t, get(context.Background())) // waits out the pause
	v = gather(t, reg)
	assert.Equal(t, 2.0, v["throttle_transport_requests_total,result=acquired"])
	assert.Equal(t, 2.0, v["throttle_transport_wait_seconds"], "one observation per acquired request")
	assert.Equal(t, 0.0, v["throttle_transport_paused_partitions"])
	assert.Equal(t, 0.0, v["throttle_limiter_queued,limiter=outbound"])
	assert.Contains(t, v, "throttle_limiter_available,limiter=outbound")
}

// gather returns every sample by name and labels; a histogram by its count.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	fams, err := reg.Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, f := range fams {
		for _, mm := range f.Metric {
			name := f.GetName()
			for _, l := range mm.Label {
				name += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mm.Counter != nil:
				values[name] = mm.Counter.GetValue()
			case mm.Gauge != nil:
				values[name] = mm.Gauge.GetValue()
			case mm.Histogram != nil:
				values[name] = float64(mm.Histogram.GetSampleCount())
			}
		}
	}
	return values
}

func TestRedis(t *testing.T) {
	m, reg := newMetrics(t)
	obs := m.RedisObserver()
	boom := errors.New("down")
	obs(redisrepo.Event{Kind: redisrepo.EventFailClosed, Err: boom})
	obs(redisrepo.Event{Kind: redisrepo.EventFailClosed, Err: boom})
	obs(redisrepo.Event{Kind: redisrepo.EventFailOpen, Err: boom})
	obs(redisrepo.Event{Kind: redisrepo.EventBreaker, State: "open"})
	const want = `
# HELP throttle_redis_breaker_state The Redis circuit breaker's state: 0 closed, 1 half-open, 2 open.
# TYPE throttle_redis_breaker_state gauge
throttle_redis_breaker_state 2
# HELP throttle_redis_errors_total Calls decided without Redis because it failed, by the fail mode that decided them (open, local, closed).
# TYPE throttle_redis_errors_total counter
throttle_redis_errors_total{mode="closed"} 2
throttle_redis_errors_total{mode="open"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_redis_breaker_state", "throttle_redis_errors_total"))
	obs(redisrepo.Event{Kind: redisrepo.EventBreaker, State: "half-open"})
	n, _ := testutil.GatherAndCount(reg, "throttle_redis_breaker_state")
	assert.Equal(t, 1, n)
}

func TestRegisterTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := throttleprom.New(reg)
	require.NoError(t, err)
	_, err = throttleprom.New(reg)
	assert.Error(t, err)
}

// TestWatchTransport: the Transport's queue depth and requests on the wire
// are scraped from its Stats: a request held by a slow server counts as in
// flight while it is on the wire, and nothing remains once it is answered.
func TestWatchTransport(t *testing.T) {
	m, reg := newMetrics(t)
	release := make(chan struct{})
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(arrived)
		<-release
	}))
	defer srv.Close()
	tr := throttle.NewTransport(nil)
	defer tr.Close()
	require.NoError(t, m.WatchTransport("api", tr))
	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	want := `
# HELP throttle_transport_in_flight Requests the Transport let through and that are not yet answered.
# TYPE throttle_transport_in_flight gauge
throttle_transport_in_flight{transport="api"} 1
# HELP throttle_transport_queued Requests waiting for their turn in the Transport's partitions.
# TYPE throttle_transport_queued gauge
throttle_transport_queued{transport="api"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_transport_in_flight", "throttle_transport_queued"))
	close(release)
	require.NoError(t, <-done)
	want = strings.Replace(want, `{transport="api"} 1`, `{transport="api"} 0`, 1)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_transport_in_flight", "throttle_transport_queued"))
}
