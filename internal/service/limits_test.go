package service

import (
	"encoding/json"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chainedPolicy is the rule: two windows and a cost cap.
const chainedPolicy = `plans:
  free:
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: sliding_window, limit: 10, window: 1m}
          - {algorithm: fixed_window, limit: 1000, window: 24h}
        cost_caps:
          - {algorithm: fixed_window, limit: 1000, window: 1h}
      "POST /api/tokens":
        cost_caps:
          - {algorithm: fixed_window, limit: 1000, window: 1h}
`

// TestCheckListsEveryLimit: the JSON answer's numbers are one limit's,
// every limit is listed by its policy name, and a refusal names its wait.
func TestCheckListsEveryLimit(t *testing.T) {
	f := start(t, nil, func(c *Config) { c.Policy, c.PolicyFile = []byte(chainedPolicy), "" })
	var r = f.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`)
	require.True(t, r.Allowed)
	require.Len(t, r.Limits, 3)
	names := []string{r.Limits[0].Name, r.Limits[1].Name, r.Limits[2].Name}
	assert.Equal(t, []string{"POST /api/ask 10/1m", "POST /api/ask 1000/1d", "POST /api/ask cost 1000/1h"}, names)
	assert.Equal(t, []any{10, 9, 60.0}, []any{r.Limit, r.Remaining, r.Limits[0].Window})
	assert.Equal(t, "cost", r.Limits[2].Unit)
	for range 9 {
		require.True(t, f.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`).Allowed)
	}
	r = f.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`)
	require.False(t, r.Allowed)
	assert.Equal(t, []any{10, 0}, []any{r.Limit, r.Remaining}, "the minute's numbers, not the day's")
	require.NotNil(t, r.RetryAfter)
	assert.Positive(t, *r.RetryAfter)
	assert.LessOrEqual(t, r.ResetAfter, 120.0, "the minute's reset, not the day's")
	assert.GreaterOrEqual(t, r.ResetAfter, *r.RetryAfter)
	require.Len(t, r.Limits, 2, "the cost caps were not reached")
	assert.True(t, r.Limits[0].Refused)
	assert.False(t, r.Limits[1].Refused)
	assert.Equal(t, "10", r.Headers["X-Ratelimit-Limit"])
}

// TestCheckFinal: a cost no wait can admit is final, with retry_after null,
// in memory and in Redis.
func TestCheckFinal(t *testing.T) {
	backends(t, func(t *testing.T, rc func(*testing.T) redis.UniversalClient) {
		f := start(t, rc(t), func(c *Config) {
			c.Policy, c.PolicyFile = []byte(chainedPolicy), ""
		})
		var raw map[string]any
		f.call(t, "POST", "/v1/check", `{"key":"bob","endpoint":"POST /api/tokens","cost":5000}`, nil, &raw)
		assert.Equal(t, false, raw["allowed"])
		assert.Equal(t, true, raw["final"])
		v, present := raw["retry_after"]
		assert.True(t, present, "retry_after is there, and null")
		assert.Nil(t, v)
		h, _ := raw["headers"].(map[string]any)
		assert.NotContains(t, h, "Retry-After")
		ls, _ := raw["limits"].([]any)
		require.Len(t, ls, 1)
		l, _ := ls[0].(map[string]any)
		assert.Equal(t, "POST /api/tokens cost 1000/1h", l["name"])
		assert.Equal(t, true, l["final"])
		b, _ := json.Marshal(raw)
		assert.NotContains(t, string(b), `"retry_after":0`)
		// A cost that fits is admitted.
		assert.True(t, f.check(t, `{"key":"bob","endpoint":"POST /api/tokens","cost":900}`).Allowed)
	})
}
