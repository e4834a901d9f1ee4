package throttleotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/metrics/throttleotel"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMetrics(t *testing.T, opts ...throttleotel.Option) (*throttleotel.Metrics, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := throttleotel.New(mp, opts...)
	require.NoError(t, err)
	return m, reader
}

// collect reads every instrument back: name → its data.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, throttleotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sums is a counter's value for each attribute set, written "k=v,k=v".
func sums(t *testing.T, a metricdata.Aggregation) map[string]int64 {
	s, ok := a.(metricdata.Sum[int64])
	require.True(t, ok, "%T", a)
	assert.True(t, s.IsMonotonic)
	out := map[string]int64{}
	for _, dp := range s.DataPoints {
		out[attrs(dp.Attributes)] = dp.Value
	}
	return out
}

func gauges(t *testing.T, a metricdata.Aggregation) map[string]int64 {
	g, ok := a.(metricdata.Gauge[int64])
	require.True(t, ok, "%T", a)
	out := map[string]int64{}
	for _, dp := range g.DataPoints {
		out[attrs(dp.Attributes)] = dp.Value
	}
	return out
}

func attrs(s attribute.Set) string {
	var b []byte
	for i, kv := range s.ToSlice() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, string(kv.Key)+"="+kv.Value.String()...)
	}
	return string(b)
}

func TestServerDecisions(t *testing.T) {
	m, reader := newMetrics(t)
	repo := repository.NewMemory(func(string) limiters.Limiter { return limiters.NewFixedWindow(2, time.Hour) })
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
	got := sums(t, collect(t, reader)["throttle.server.decisions"])
	assert.Equal(t, map[string]int64{
		"policy=,result=allowed,rule=":    100,
		"policy=,result=near_limit,rule=": 50,
		"policy=,result=rejected,rule=":   50,
	}, got, "no key attribute: bounded")
}

func TestTransportInstruments(t *testing.T) {
	m, reader := newMetrics(t, throttleotel.WithKeyAttribute(func(string) string { return "api" }))
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 2 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	l := limiters.NewTokenBucket(limiters.PerSecond(1000), 10)
	tr := throttle.NewTransport(srv.Client().Transport, throttle.WithObserver(m.TransportObserver()),
		throttle.WithMaxWait(time.Millisecond), throttle.WithLimiter(l))
	defer tr.Close()
	defer tr.CloseIdleConnections()
	_, err := m.WatchTransport("api", tr)
	require.NoError(t, err)
	reg, err := m.WatchLimiter("outbound", l)
	require.NoError(t, err)
	c := &http.Client{Transport: tr}
	for range 3 { // ok, 429 (pauses for an hour), refused unsent
		resp, err := c.Get(srv.URL)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	got := collect(t, reader)
	assert.Equal(t, map[string]int64{"key=api,result=acquired": 2, "key=api,result=rejected": 1},
		sums(t, got["throttle.transport.requests"]))
	assert.Equal(t, map[string]int64{"status=429": 1}, sums(t, got["throttle.transport.pauses"]))
	assert.Equal(t, map[string]int64{"": 1}, gauges(t, got["throttle.transport.paused_partitions"]))
	h, ok := got["throttle.transport.wait"].(metricdata.Histogram[float64])
	require.True(t, ok)
	require.Len(t, h.DataPoints, 1)
	assert.Equal(t, "key=api", attrs(h.DataPoints[0].Attributes))
	assert.EqualValues(t, 2, h.DataPoints[0].Count)
	assert.Equal(t, []float64{0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60}, h.DataPoints[0].Bounds)
	assert.Equal(t, map[string]int64{"transport=api": 0}, gauges(t, got["throttle.transport.queued"]))
	assert.Equal(t, map[string]int64{"transport=api": 0}, gauges(t, got["throttle.transport.in_flight"]))
	assert.Equal(t, map[string]int64{"limiter=outbound": 0}, gauges(t, got["throttle.limiter.queued"]))
	assert.Contains(t, []int64{8, 9, 10}, gauges(t, got["throttle.limiter.available"])["limiter=outbound"])

	require.NoError(t, reg.Unregister())
	assert.NotContains(t, collect(t, reader), "throttle.limiter.queued", "unregistered")
}

func TestRedisInstruments(t *testing.T) {
	m, reader := newMetrics(t)
	obs := m.RedisObserver()
	obs(redisrepo.Event{Kind: redisrepo.EventFailOpen})
	obs(redisrepo.Event{Kind: redisrepo.EventFailOpen})
	obs(redisrepo.Event{Kind: redisrepo.EventFailClosed})
	obs(redisrepo.Event{Kind: redisrepo.EventBreaker, State: "open"})
	got := collect(t, reader)
	assert.Equal(t, map[string]int64{"mode=open": 2, "mode=closed": 1}, sums(t, got["throttle.redis.errors"]))
	assert.Equal(t, map[string]int64{"": 2}, gauges(t, got["throttle.redis.breaker_state"]))
}

// TestObserversAllocateLittleOnceSeen: once an attribute combination has
// been seen, an event costs no attribute set, only what the SDK's
// variadic options cost (1 or 2 allocations in sdk/metric v1.47).
func TestObserversAllocateLittleOnceSeen(t *testing.T) {
	m, _ := newMetrics(t)
	obs := m.TransportObserver()
	ev := throttle.Event{Kind: throttle.EventAcquired, Key: "api.example.com", Wait: time.Millisecond}
	obs(ev)
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { obs(ev) }), 3.0)
	sobs := m.ServerObserver()
	sev := server.Event{Kind: server.EventAllowed, Key: "k"}
	sobs(sev)
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { sobs(sev) }), 3.0)
}
