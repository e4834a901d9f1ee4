package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/repository/ratelimitd"
)

// batchBody is a batch request of checks.
func batchBody(checks []string) string { return `{"checks":[` + strings.Join(checks, ",") + `]}` }

// batch sends a batch and returns its results and the round trips it cost.
func (f *fixture) batch(t *testing.T, rt *roundTrips, checks []string) ([]ratelimitd.BatchItem, int64) {
	t.Helper()
	before := rt.n.Load()
	var out ratelimitd.BatchResponse
	require.Equal(t, http.StatusOK, f.call(t, "POST", "/v1/check/batch", batchBody(checks), nil, &out).StatusCode)
	require.Len(t, out.Results, len(checks))
	return out.Results, rt.n.Load() - before
}

// TestBatchRoundTrips: on a single node a batch of one rule's checks costs
// exactly one round trip to Redis, 200 distinct keys or 200 checks of 20
// keys; the checks of one key are decided in the batch's order.
func TestBatchRoundTrips(t *testing.T) {
	c := redisClient(t)
	rt := &roundTrips{}
	c.AddHook(rt)
	f := start(t, c)
	checks := func(prefix, plan string, keys int) []string {
		out := make([]string, 200)
		for i := range out {
			out[i] = fmt.Sprintf(`{"key":"%s%d","plan":%q}`, prefix, i%keys, plan)
		}
		return out
	}
	f.batch(t, rt, checks("warm", "pro", 200)) // loads the scripts
	f.batch(t, rt, checks("warm", "free", 200))
	for i := range 3 {
		res, trips := f.batch(t, rt, checks(fmt.Sprint("distinct", i, "-"), "pro", 200))
		assert.Equal(t, int64(1), trips, "a batch of 200 distinct keys")
		for _, r := range res {
			require.Nil(t, r.Error)
			require.True(t, r.Allowed)
			require.Equal(t, 99, r.Remaining)
		}
	}
	// Plan free: 5 per minute. Key i%20: its first 5 checks in the batch
	// are allowed, counting down, then it is refused.
	res, trips := f.batch(t, rt, checks("repeat", "free", 20))
	assert.Equal(t, int64(1), trips, "a batch of 20 keys, 10 checks each")
	for i, r := range res {
		require.Nil(t, r.Error)
		nth := i / 20
		assert.Equal(t, nth < 5, r.Allowed, "check %d, the %dth of its key", i, nth)
		assert.Equal(t, max(4-nth, 0), r.Remaining, "check %d", i)
	}
}

// batchPolicy is testPolicy with cost caps on POST /api/ask: three rules
// of limits and one of cost caps.
var batchPolicy = strings.Replace(testPolicy, "limit: 3, window: 1m}\n",
	"limit: 3, window: 1m}\n        cost_caps:\n          - {algorithm: fixed_window, limit: 8, window: 1h}\n", 1)

// TestBatchAcrossRules: a batch mixing rules, plans, repeated keys, costs
// and invalid checks is decided in Redis as in memory, where its checks go
// one by one; it costs one round trip per rule, plus one for the cost caps
// of the checks their limits admitted.
func TestBatchAcrossRules(t *testing.T) {
	var checks []string
	for i := range 300 {
		key := fmt.Sprintf("u%d", i%7)
		switch i % 5 {
		case 0:
			checks = append(checks, fmt.Sprintf(`{"key":%q}`, key))
		case 1:
			checks = append(checks, fmt.Sprintf(`{"key":%q,"endpoint":"POST /api/ask","cost":%d}`, key, i%3))
		case 2:
			checks = append(checks, fmt.Sprintf(`{"key":%q,"plan":"pro","cost":%d}`, key, i%4))
		case 3:
			checks = append(checks, fmt.Sprintf(`{"key":%q,"endpoint":"/x"}`, key))
		default:
			if i%25 == 4 {
				checks = append(checks, `{"key":""}`)
			} else {
				checks = append(checks, fmt.Sprintf(`{"key":%q,"endpoint":"POST /api/ask"}`, key))
			}
		}
	}
	run := func(t *testing.T, withRedis bool) ([]ratelimitd.BatchItem, int64) {
		rt := &roundTrips{}
		mod := func(c *Config) { c.Policy, c.PolicyFile = []byte(batchPolicy), "" }
		if !withRedis {
			return start(t, nil, mod).batch(t, rt, checks)
		}
		c := redisClient(t)
		c.AddHook(rt)
		f := start(t, c, mod)
		warm := make([]string, len(checks))
		for i, ch := range checks {
			warm[i] = strings.Replace(ch, `"key":"u`, `"key":"warm`, 1)
		}
		f.batch(t, rt, warm) // loads the scripts
		return f.batch(t, rt, checks)
	}
	want, _ := run(t, false)
	got, trips := run(t, true)
	assert.Equal(t, int64(4), trips, "three rules' limits, then one rule's cost caps")
	allowed := 0
	for i := range checks {
		w, g := want[i], got[i]
		if w.Error != nil {
			require.NotNil(t, g.Error, "check %d", i)
			assert.Equal(t, w.Error.Status, g.Error.Status)
			continue
		}
		require.Nil(t, g.Error, "check %d", i)
		assert.Equal(t, []any{w.Allowed, w.Limit, w.Remaining, w.Policy, w.Rule}, []any{g.Allowed, g.Limit, g.Remaining, g.Policy, g.Rule}, "check %d: %s", i, checks[i])
		if g.Allowed {
			allowed++
		}
	}
	assert.Greater(t, allowed, 50)
	assert.Less(t, allowed, 250)
}

// TestBatchConcurrencyLimit: a check gives its concurrency permit back
// once decided, so every check of a batch of one key finds the limit free,
// in Redis as in memory.
func TestBatchConcurrencyLimit(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		file := filepath.Join(t.TempDir(), "p.yaml")
		require.NoError(t, os.WriteFile(file, []byte("default_plan: free\nplans: {free: {default: {limits: [{algorithm: concurrency, limit: 2}]}}}\n"), 0o600))
		f := start(t, rc(t), func(c *Config) { c.PolicyFile = file })
		checks := make([]string, 6)
		for i := range checks {
			checks[i] = `{"key":"k"}`
		}
		res, _ := f.batch(t, &roundTrips{}, checks)
		for i, r := range res {
			require.Nil(t, r.Error)
			assert.True(t, r.Allowed, "check %d", i)
		}
	})
}

// TestBatchReloadUnderLoad: reloads while batches are gathered in Redis
// neither block nor lose a check, and a batch is decided under one policy,
// the one in force when it arrived, until its last check.
func TestBatchReloadUnderLoad(t *testing.T) {
	f := start(t, redisClient(t))
	checks := make([]string, 50)
	for i := range checks {
		checks[i] = fmt.Sprintf(`{"key":"r%d","plan":"pro","cost":0}`, i%5)
	}
	body := []byte(batchBody(checks))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				status, out := f.svc.handleBatch(context.Background(), body)
				var res ratelimitd.BatchResponse
				if !assert.Equal(t, http.StatusOK, status) || !assert.NoError(t, json.Unmarshal(out, &res)) {
					return
				}
				limit := res.Results[0].Limit
				assert.Contains(t, []int{100, 200}, limit)
				for _, r := range res.Results {
					assert.Nil(t, r.Error)
					assert.Equal(t, limit, r.Limit, "one batch, one policy")
				}
			}
		})
	}
	other := strings.Replace(testPolicy, "rate: 100/m, limit: 100", "rate: 200/m, limit: 200", 1)
	for i := range 40 {
		policy := testPolicy
		if i%2 == 0 {
			policy = other
		}
		require.NoError(t, os.WriteFile(f.file, []byte(policy), 0o600))
		require.NoError(t, f.svc.Reload())
	}
	stop.Store(true)
	wg.Wait()
}
