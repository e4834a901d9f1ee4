package server_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/server"
)

const policyYAML = `# a SaaS API
default_plan: free
allow: ["10.0.0.0/8"]
block: ["203.0.113.7"]
max_keys: 10000
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 3, window: 1h}
    endpoints:
      "POST /api/ask":
        action: delay
        max_delay: 2s
        limits:
          - {algorithm: token_bucket, rate: 1/s, limit: 1}
          - {algorithm: fixed_window, limit: 1000, window: 24h}
          - {algorithm: concurrency, limit: 5}
        cost_caps:
          - algorithm: fixed_window
            limit: 100000
            window: 1h
  pro:
    default:
      limits:
        - {algorithm: gcra, rate: 100/s, limit: 200, queue_limit: 10}
`

const policyJSON = `{
  "default_plan": "free",
  "plans": {
    "free": {
      "default": {"limits": [{"algorithm": "fixed_window", "limit": 3, "window": "1h"}]},
      "endpoints": {
        "POST /api/ask": {
          "action": "shadow",
          "limits": [{"algorithm": "sliding_window", "limit": 10, "window": "1m"}]
        }
      }
    },
    "pro": {"default": {"limits": [{"algorithm": "gcra", "rate": "100/s", "limit": 200}]}}
  }
}`

func TestSpecDecodesFromYAML(t *testing.T) {
	var s limiters.Spec
	require.NoError(t, yaml.Unmarshal([]byte("{algorithm: gcra, rate: 10/s, limit: 5, window: 1m, queue_limit: 3}"), &s))
	assert.Equal(t, limiters.Spec{Algorithm: "gcra", Rate: limiters.PerSecond(10), Limit: 5, Window: time.Minute, QueueLimit: 3}, s)
	// Through a file, too.
	cfg, err := server.DecodePolicyConfig([]byte(policyYAML), "yaml")
	require.NoError(t, err)
	ask := cfg.Plans["free"].Endpoints["POST /api/ask"]
	assert.Equal(t, []limiters.Spec{
		{Algorithm: "token_bucket", Rate: limiters.PerSecond(1), Limit: 1},
		{Algorithm: "fixed_window", Limit: 1000, Window: 24 * time.Hour},
		{Algorithm: "concurrency", Limit: 5},
	}, ask.Limits)
	assert.Equal(t, server.Delay, ask.Action)
	assert.Equal(t, 2*time.Second, ask.MaxDelay)
	assert.Equal(t, limiters.Spec{Algorithm: "gcra", Rate: limiters.PerSecond(100), Limit: 200, QueueLimit: 10}, cfg.Plans["pro"].Default.Limits[0])
	assert.Equal(t, []string{"10.0.0.0/8"}, cfg.Allow)
	assert.Equal(t, 10000, cfg.MaxKeys)
}

func TestLoadPolicyFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"p.yaml": policyYAML, "p.json": policyJSON} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
			synctest.Test(t, func(t *testing.T) {
				p, err := server.LoadPolicy(path)
				require.NoError(t, err)
				defer p.Close()
				h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
				assert.Equal(t, 3, admitted(h, 5, "GET", "/x", "192.0.2.1:1"))
			})
		})
	}
	json := filepath.Join(dir, "p.json")
	cfgJ, err := server.DecodePolicyConfig([]byte(policyJSON), "json")
	require.NoError(t, err)
	assert.Equal(t, server.Shadow, cfgJ.Plans["free"].Endpoints["POST /api/ask"].Action)
	assert.Equal(t, limiters.Spec{Algorithm: "gcra", Rate: limiters.PerSecond(100), Limit: 200}, cfgJ.Plans["pro"].Default.Limits[0])

	_, err = server.LoadPolicy(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_ = json
}

func TestPolicyFileErrors(t *testing.T) {
	yamlCases := []struct {
		name, body, want string
	}{
		{"bad rate", "plans:\n  p:\n    default:\n      limits:\n        - {algorithm: gcra, rate: 10/fortnight, limit: 5}\n",
			`server: policy:5:35: plans.p.default.limits[0].rate: limiters: invalid rate "10/fortnight"`},
		{"unknown field", "plans:\n  p:\n    default:\n      limits:\n        - algorithm: fixed_window\n          limit: 5\n          windw: 1m\n",
			`server: policy:7:11: plans.p.default.limits[0]: unknown field "windw"; want one of algorithm, limit, rate, window, queue_limit`},
		{"number for a duration", "plans:\n  p:\n    default:\n      limits:\n        - {algorithm: fixed_window, limit: 5, window: 60}\n",
			`server: policy:5:55: plans.p.default.limits[0].window: want a duration string such as "1m" or "2s", got the number 60`},
		{"spec invalid", "plans:\n  pro:\n    endpoints:\n      \"POST /api/ask\":\n        limits:\n          - {algorithm: fixed_window, limit: 5, window: 1m}\n          - {algorithm: token_bucket, limit: 5}\n",
			`server: policy:7:13: plans.pro.endpoints["POST /api/ask"].limits[1]: limiters: spec rate: token_bucket needs a positive rate`},
		{"bad pattern", "plans:\n  p:\n    endpoints:\n      \"GET items\":\n        limits: [{algorithm: concurrency, limit: 1}]\n",
			`server: policy:5:9: plans.p.endpoints["GET items"]: invalid endpoint pattern`},
		{"conflicting patterns", "plans:\n  p:\n    endpoints:\n      \"GET /items/{id}\":\n        limits: [{algorithm: concurrency, limit: 1}]\n      \"GET /items/{name}\":\n        limits: [{algorithm: concurrency, limit: 1}]\n",
			`plans.p.endpoints["GET /items/{name}"]: invalid endpoint pattern`},
		{"unknown action", "plans:\n  p:\n    default:\n      action: throttle\n      limits: [{algorithm: concurrency, limit: 1}]\n",
			`server: policy:4:15: plans.p.default.action: unknown action "throttle"; want block, delay or shadow`},
		{"delay without bound", "plans:\n  p:\n    default:\n      action: delay\n      limits: [{algorithm: concurrency, limit: 1}]\n",
			`server: policy:4:7: plans.p.default.max_delay: the delay action needs a positive max_delay`},
		{"bad CIDR", "block: [\"10.0.0.0/33\"]\nplans:\n  p:\n    default:\n      limits: [{algorithm: concurrency, limit: 1}]\n",
			`server: policy:1:9: block[0]: want an IP address or CIDR prefix, got "10.0.0.0/33"`},
		{"no default plan", "plans:\n  a:\n    default: {limits: [{algorithm: concurrency, limit: 1}]}\n  b:\n    default: {limits: [{algorithm: concurrency, limit: 1}]}\n",
			`default_plan: missing`},
		{"unknown default plan", "default_plan: gold\nplans:\n  a:\n    default: {limits: [{algorithm: concurrency, limit: 1}]}\n",
			`server: policy:1:15: default_plan: no plan named "gold"`},
		{"string for a limit", "plans:\n  p:\n    default: {limits: [{algorithm: concurrency, limit: many}]}\n",
			`server: policy:3:56: plans.p.default.limits[0].limit: want an integer, got "many"`},
		{"syntax", "plans:\n  p: [\n", `server: policy:2: did not find expected node content`},
		{"empty rule", "plans:\n  p:\n    default: {}\n", `plans.p.default: a rule needs limits or cost_caps`},
		{"concurrency cost cap", "plans:\n  p:\n    default: {cost_caps: [{algorithm: concurrency, limit: 1}]}\n", `plans.p.default.cost_caps[0].algorithm: a cost cap cannot be a concurrency limit`},
	}
	for _, c := range yamlCases {
		t.Run(c.name, func(t *testing.T) {
			p, err := server.ParsePolicy([]byte(c.body), "yaml")
			require.Error(t, err)
			assert.Nil(t, p)
			assert.Contains(t, err.Error(), c.want)
			var pe *server.PolicyError
			assert.True(t, errors.As(err, &pe))
		})
	}

	jsonCases := []struct {
		name, body, want string
	}{
		{"syntax", "{\n  \"plans\": {\n    \"p\": {,}\n  }\n}", `server: policy:3:11: invalid character ','`},
		{"truncated", "{\"plans\": {", `empty or truncated JSON`},
		{"unknown field", "{\"plans\": {\"p\": {\"default\": {\"limits\": [{\"algorithm\": \"concurrency\", \"limit\": 1, \"queue\": 2}]}}}}",
			`server: policy:1:82: plans.p.default.limits[0]: unknown field "queue"`},
		{"bad rate", "{\"plans\": {\"p\": {\"default\": {\"limits\": [\n  {\"algorithm\": \"gcra\", \"limit\": 1, \"rate\": \"ten per second\"}]}}}}",
			`server: policy:2:45: plans.p.default.limits[0].rate: limiters: invalid rate "ten per second"`},
		{"invalid spec", "{\"plans\": {\"p\": {\"endpoints\": {\"POST /api/ask\": {\"limits\": [\n  {\"algorithm\": \"gcra\", \"rate\": \"1/s\"}]}}}}}",
			`server: policy:2:3: plans.p.endpoints["POST /api/ask"].limits[0]: limiters: spec limit: must be positive, got 0`},
		{"not an object", "[1]", `want a JSON object`},
		{"trailing data", "{} {}", `data after the top-level value`},
	}
	for _, c := range jsonCases {
		t.Run("json "+c.name, func(t *testing.T) {
			p, err := server.ParsePolicy([]byte(c.body), "json")
			require.Error(t, err)
			assert.Nil(t, p)
			assert.Contains(t, err.Error(), c.want)
		})
	}

	// LoadPolicy names the file.
	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yamlCases[0].body), 0o600))
	_, err := server.LoadPolicy(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server: policy "+path+":5:35: plans.p.default.limits[0].rate")
}

func TestPolicyFromGoValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"only": {
			Default: &server.Rule{Limits: []limiters.Spec{{Algorithm: limiters.AlgGCRA, Rate: limiters.PerMinute(60), Limit: 2}}},
		}}})
		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		assert.Equal(t, 2, admitted(h, 3, "GET", "/", "192.0.2.1:1"))
		time.Sleep(time.Second)
		assert.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.1:1").Code)
	})
	_, err := server.NewPolicy(server.PolicyConfig{})
	assert.EqualError(t, err, "server: policy: plans: no plans")
}

func TestPolicyFileRepeatedKeys(t *testing.T) {
	for body, want := range map[string]string{
		"plans:\n  p: {default: {limits: [{algorithm: concurrency, limit: 1}]}}\n  p: {default: {limits: [{algorithm: concurrency, limit: 2}]}}\n": `server: policy:3:3: plans: key "p" given twice`,
		"plans: {p: {default: {limits: [{algorithm: concurrency, limit: 1, limit: 2}]}}}\n":                                                        `server: policy:1:67: plans.p.default.limits[0]: field "limit" given twice`,
	} {
		_, err := server.ParsePolicy([]byte(body), "yaml")
		assert.EqualError(t, err, want)
	}
}
