package service

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/repository/ratelimitd"
	"github.com/throttlekit/throttle/server"
)

// testPolicy: plan free allows 3 per minute on POST /api/ask and 5 per
// minute elsewhere; plan pro allows 100 per minute everywhere.
const testPolicy = `default_plan: free
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 5, window: 1m}
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: sliding_log, limit: 3, window: 1m}
  pro:
    default:
      limits:
        - {algorithm: gcra, rate: 100/m, limit: 100}
`

const token = "t0ken"

type fixture struct {
	svc  *Service
	srv  *httptest.Server
	file string
	logs *syncBuffer
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a Service over testPolicy (in memory, or in Redis with rc).
func start(t *testing.T, rc redis.UniversalClient, mod ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{file: filepath.Join(t.TempDir(), "policy.yaml"), logs: &syncBuffer{}}
	require.NoError(t, os.WriteFile(f.file, []byte(testPolicy), 0o600))
	cfg := Config{PolicyFile: f.file, Redis: rc, AdminToken: token, Logger: slog.New(slog.NewTextHandler(f.logs, nil))}
	for _, m := range mod {
		m(&cfg)
	}
	svc, err := New(cfg)
	require.NoError(t, err)
	f.svc = svc
	f.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(func() {
		f.srv.Close()
		require.NoError(t, svc.Close())
	})
	return f
}

func redisClient(t *testing.T) *redis.Client {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// backends runs f in memory and on a real Redis.
func backends(t *testing.T, f func(t *testing.T, rc func(*testing.T) redis.UniversalClient)) {
	t.Run("memory", func(t *testing.T) { f(t, func(*testing.T) redis.UniversalClient { return nil }) })
	t.Run("redis", func(t *testing.T) {
		f(t, func(t *testing.T) redis.UniversalClient { return redisClient(t) })
	})
}

// call sends a request and decodes the answer into out (if not nil).
func (f *fixture) call(t *testing.T, method, path, body string, hdr map[string]string, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), "body %s", data)
	}
	return resp
}

func (f *fixture) check(t *testing.T, body string) ratelimitd.Result {
	t.Helper()
	var r ratelimitd.Result
	resp := f.call(t, "POST", "/v1/check", body, nil, &r)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return r
}

func TestCheck(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		for i := range 3 {
			r := f.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`)
			assert.True(t, r.Allowed)
			assert.Equal(t, 3, r.Limit)
			assert.Equal(t, 2-i, r.Remaining)
			assert.Equal(t, "free", r.Policy)
			assert.Equal(t, "POST /api/ask", r.Rule)
			assert.Equal(t, "3", r.Headers["X-Ratelimit-Limit"])
		}
		// The fourth is refused, still with 200.
		r := f.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`)
		assert.False(t, r.Allowed)
		require.NotNil(t, r.RetryAfter)
		assert.Greater(t, *r.RetryAfter, 0.0)
		assert.LessOrEqual(t, *r.RetryAfter, 60.0)
		assert.NotEmpty(t, r.Headers["Retry-After"])
		// Another caller, another endpoint, another plan: their own limits.
		assert.True(t, f.check(t, `{"key":"bob","endpoint":"POST /api/ask"}`).Allowed)
		r = f.check(t, `{"key":"alice","endpoint":"/other"}`)
		assert.Equal(t, []any{true, 5, "default"}, []any{r.Allowed, r.Limit, r.Rule})
		r = f.check(t, `{"key":"alice","plan":"pro","cost":7}`)
		assert.Equal(t, []any{true, 100, 93, "pro"}, []any{r.Allowed, r.Limit, r.Remaining, r.Policy})
		// An unknown plan is the default plan.
		assert.Equal(t, "free", f.check(t, `{"key":"carol","plan":"gold"}`).Policy)
	})
}

func TestBatch(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		var checks []string
		for range 6 {
			checks = append(checks, `{"key":"dave","endpoint":"/x"}`)
		}
		checks = append(checks, `{"key":"dave","cost":-1}`)
		var out ratelimitd.BatchResponse
		resp := f.call(t, "POST", "/v1/check/batch", `{"checks":[`+strings.Join(checks, ",")+`]}`, nil, &out)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Len(t, out.Results, 7)
		allowed := 0
		for _, r := range out.Results[:6] {
			require.Nil(t, r.Error)
			if r.Allowed {
				allowed++
			}
		}
		assert.Equal(t, 5, allowed, "the limit is 5 per minute")
		require.NotNil(t, out.Results[6].Error)
		assert.Equal(t, http.StatusBadRequest, out.Results[6].Error.Status)

		var p ratelimitd.Problem
		resp = f.call(t, "POST", "/v1/check/batch", `{"checks":[]}`, nil, &p)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, p.Detail, "1 to 1000")
	})
}

func TestBadInput(t *testing.T) {
	f := start(t, nil)
	long := strings.Repeat("k", ratelimitd.MaxKeyLen+1)
	cases := map[string]struct {
		path, body string
		status     int
		detail     string
	}{
		"malformed":       {"/v1/check", `{"key":`, 400, "malformed JSON"},
		"unknown field":   {"/v1/check", `{"key":"a","kee":"b"}`, 400, `unknown field "kee"`},
		"trailing data":   {"/v1/check", `{"key":"a"} {}`, 400, "data after"},
		"no key":          {"/v1/check", `{}`, 400, "key must be"},
		"long key":        {"/v1/check", `{"key":"` + long + `"}`, 400, "key must be"},
		"control byte":    {"/v1/check", `{"key":"a\u0001"}`, 400, "key must be"},
		"c1 control":      {"/v1/check", `{"key":"a\u0085"}`, 400, "key must be"},
		"negative cost":   {"/v1/check", `{"key":"a","cost":-1}`, 400, "cost must be"},
		"huge cost":       {"/v1/check", `{"key":"a","cost":2000000}`, 400, "cost must be"},
		"bad endpoint":    {"/v1/check", `{"key":"a","endpoint":"post /x"}`, 400, "endpoint must be"},
		"query":           {"/v1/check", `{"key":"a","endpoint":"/x?y=1"}`, 400, "endpoint must be"},
		"bad plan":        {"/v1/check", `{"key":"a","plan":"a b"}`, 400, "plan must be"},
		"string cost":     {"/v1/check", `{"key":"a","cost":"1"}`, 400, "malformed JSON"},
		"oversized":       {"/v1/check", `{"key":"` + strings.Repeat("a", maxCheckBody) + `"}`, 413, "larger than"},
		"oversized batch": {"/v1/check/batch", strings.Repeat(" ", ratelimitd.MaxBodySize+1), 413, "larger than"},
		"too many":        {"/v1/check/batch", `{"checks":[` + strings.Repeat(`{"key":"a"},`, ratelimitd.MaxBatch) + `{"key":"a"}]}`, 400, "1 to 1000"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var p ratelimitd.Problem
			resp := f.call(t, "POST", c.path, c.body, nil, &p)
			assert.Equal(t, c.status, resp.StatusCode)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			assert.Equal(t, c.status, p.Status)
			assert.Contains(t, p.Detail, c.detail)
		})
	}
}

func TestStatePeekSpendsNothing(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		f.check(t, `{"key":"erin","endpoint":"POST /api/ask","cost":2}`)
		for range 3 {
			var r ratelimitd.Result
			resp := f.call(t, "GET", "/v1/state/erin?endpoint=POST+/api/ask", "", nil, &r)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []any{true, 3, 1, "POST /api/ask"}, []any{r.Allowed, r.Limit, r.Remaining, r.Rule})
		}
		assert.True(t, f.check(t, `{"key":"erin","endpoint":"POST /api/ask"}`).Allowed)
		var r ratelimitd.Result
		f.call(t, "GET", "/v1/state/erin?endpoint=POST+/api/ask", "", nil, &r)
		assert.Equal(t, []any{false, 0}, []any{r.Allowed, r.Remaining})
	})
}

func TestReset(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		for range 4 {
			f.check(t, `{"key":"fay","endpoint":"POST /api/ask"}`)
		}
		require.False(t, f.check(t, `{"key":"fay","endpoint":"POST /api/ask"}`).Allowed)

		var p ratelimitd.Problem
		resp := f.call(t, "DELETE", "/v1/state/fay", "", nil, &p)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, `Bearer realm="ratelimitd"`, resp.Header.Get("WWW-Authenticate"))
		resp = f.call(t, "DELETE", "/v1/state/fay", "", map[string]string{"Authorization": "Bearer wrong"}, nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.False(t, f.check(t, `{"key":"fay","endpoint":"POST /api/ask"}`).Allowed, "an unauthorised reset resets nothing")

		resp = f.call(t, "DELETE", "/v1/state/fay", "", map[string]string{"Authorization": "Bearer " + token}, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		r := f.check(t, `{"key":"fay","endpoint":"POST /api/ask"}`)
		assert.Equal(t, []any{true, 2}, []any{r.Allowed, r.Remaining})
	})
}

func TestAdminDisabledWithoutToken(t *testing.T) {
	f := start(t, nil, func(c *Config) { c.AdminToken = "" })
	for _, path := range []string{"/v1/state/x", "/v1/policies/reload"} {
		method := "DELETE"
		if strings.HasSuffix(path, "reload") {
			method = "POST"
		}
		var p ratelimitd.Problem
		resp := f.call(t, method, path, "", map[string]string{"Authorization": "Bearer "}, &p)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		assert.Contains(t, p.Detail, "RATELIMITD_ADMIN_TOKEN")
	}
}

func TestReload(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		admin := map[string]string{"Authorization": "Bearer " + token}
		f.check(t, `{"key":"gus","endpoint":"POST /api/ask"}`)

		// A bad file: the answer says where, and the old policy stays.
		bad := strings.Replace(testPolicy, "limit: 3, window: 1m", "limit: 3, window: 60", 1)
		require.NoError(t, os.WriteFile(f.file, []byte(bad), 0o600))
		var p ratelimitd.Problem
		resp := f.call(t, "POST", "/v1/policies/reload", "", admin, &p)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		assert.Equal(t, 10, p.Line)
		assert.Positive(t, p.Column)
		assert.Contains(t, p.Detail, f.file+":10:")
		r := f.check(t, `{"key":"gus","endpoint":"POST /api/ask"}`)
		assert.Equal(t, []any{true, 3, 1}, []any{r.Allowed, r.Limit, r.Remaining}, "the old policy, and its state, are kept")
		assert.Contains(t, f.logs.String(), "policy reload failed")

		// A good file: the new limits apply; unchanged rules keep their state.
		good := strings.Replace(testPolicy, "limit: 5, window: 1m", "limit: 50, window: 1m", 1)
		require.NoError(t, os.WriteFile(f.file, []byte(good), 0o600))
		resp = f.call(t, "POST", "/v1/policies/reload", "", admin, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 50, f.check(t, `{"key":"gus"}`).Limit)
		r = f.check(t, `{"key":"gus","endpoint":"POST /api/ask"}`)
		assert.Equal(t, []any{true, 0}, []any{r.Allowed, r.Remaining}, "the unchanged rule kept its state")

		var info PolicyInfo
		f.call(t, "GET", "/v1/policies", "", nil, &info)
		assert.Equal(t, f.file, info.File)
		assert.Equal(t, 50, info.Plans["free"].Rules["default"].Limits[0].Limit)
	})
}

func TestReloadUnderLoad(t *testing.T) {
	f := start(t, nil)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var fails atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				res, p := f.svc.decide(context.Background(), ratelimitd.Check{Key: "h", Plan: "pro"}, false)
				if p != nil || res.Limit != 100 {
					fails.Add(1)
					t.Log(res, p)
				}
			}
		})
	}
	for range 20 {
		require.NoError(t, f.svc.Reload())
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, fails.Load(), "every check during reloads was decided")
}

func TestIdempotency(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		idem := map[string]string{"Idempotency-Key": "req-1"}
		first := ratelimitd.Result{}
		f.call(t, "POST", "/v1/check", `{"key":"ivy","endpoint":"POST /api/ask"}`, idem, &first)
		assert.Equal(t, 2, first.Remaining)
		// Concurrent retries: all get the first answer, none is counted.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				var r ratelimitd.Result
				resp := f.call(t, "POST", "/v1/check", `{"key":"ivy","endpoint":"POST /api/ask"}`, idem, &r)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, first, r)
			})
		}
		wg.Wait()
		assert.Equal(t, 1, f.check(t, `{"key":"ivy","endpoint":"POST /api/ask"}`).Remaining, "counted once")

		// The same key with another request is refused.
		var p ratelimitd.Problem
		resp := f.call(t, "POST", "/v1/check", `{"key":"ivy","cost":2}`, idem, &p)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

		// First-time concurrent requests with one key: counted once.
		idem2 := map[string]string{"Idempotency-Key": "req-2"}
		for range 8 {
			wg.Go(func() {
				resp := f.call(t, "POST", "/v1/check", `{"key":"jo","plan":"pro"}`, idem2, nil)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			})
		}
		wg.Wait()
		assert.Equal(t, 98, f.check(t, `{"key":"jo","plan":"pro"}`).Remaining)
	})
}

func TestMemoryIdemExpiresAndBounds(t *testing.T) {
	m := newMemoryIdem(time.Hour, 2)
	n := 0
	f := func() (int, []byte) { n++; return 200, []byte{byte(n)} }
	ctx := context.Background()
	_, a := m.do(ctx, "a", [32]byte{}, f)
	_, a2 := m.do(ctx, "a", [32]byte{}, f)
	assert.Equal(t, a, a2)
	m.do(ctx, "b", [32]byte{}, f)
	m.do(ctx, "c", [32]byte{}, f) // evicts a: at most 2
	_, a3 := m.do(ctx, "a", [32]byte{}, f)
	assert.NotEqual(t, a, a3)
	assert.LessOrEqual(t, len(m.m), 2)

	fail := func() (int, []byte) { n++; return 503, nil }
	m.do(ctx, "d", [32]byte{}, fail)
	before := n
	m.do(ctx, "d", [32]byte{}, fail)
	assert.Equal(t, before+1, n, "a 5xx answer is not remembered")
}

func TestHealth(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t))
		assert.Equal(t, http.StatusOK, f.call(t, "GET", "/healthz", "", nil, nil).StatusCode)
		assert.Equal(t, http.StatusOK, f.call(t, "GET", "/readyz", "", nil, nil).StatusCode)
	})
}

func TestReadyzWithRedisDown(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	f := start(t, c)
	s.Stop()
	var p ratelimitd.Problem
	resp := f.call(t, "GET", "/readyz", "", nil, &p)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, p.Detail, "redis")
	// FailClosed: a check answers 503; the change is logged once, and
	// the breaker's opening (after 5 failures) once.
	for range 10 {
		resp = f.call(t, "POST", "/v1/check", `{"key":"k"}`, nil, &p)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}
	logs := f.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "redis unreachable"), logs)
	assert.Equal(t, 1, strings.Count(logs, `msg="redis circuit breaker" state=open`), logs)
	assert.Equal(t, 3, strings.Count(logs, "\n"), "loaded, unreachable, breaker open; nothing per check: %s", logs)
}

func TestBadPolicyAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(file, []byte("plans: {free: {default: {limits: [{algorithm: nope, limit: 1}]}}}\n"), 0o600))
	_, err := New(Config{PolicyFile: file, Logger: slog.New(slog.DiscardHandler)})
	var pe *server.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, file, pe.File)
	assert.Equal(t, 1, pe.Line)
}

// roundTrips counts the round trips a go-redis client makes: single
// commands and pipelines.
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}
