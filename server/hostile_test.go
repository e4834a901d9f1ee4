package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// aliasBomb is the nested-alias policy of issue 14: a limits list &l whose
// n items are aliases of one spec &a, a rule &r holding it reused by n
// endpoints &e, and those endpoints reused by n plans. Expanded, it holds n³
// specs; written, it is O(n) bytes.
func aliasBomb(n int) []byte {
	var b strings.Builder
	b.WriteString("default_plan: p0\nplans:\n  p0:\n    endpoints: &e\n      \"/r0\": &r\n        limits: &l [&a {algorithm: gcra, rate: 1/s, limit: 1}")
	for range n - 1 {
		b.WriteString(", *a")
	}
	b.WriteString("]\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "      \"/r%d\": *r\n", i)
	}
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  p%d: {endpoints: *e}\n", i)
	}
	return []byte(b.String())
}

// flatPolicy is a policy of distinct endpoint rules, as many as fit in size
// bytes: the largest plain file MaxPolicySize allows.
func flatPolicy(size int) []byte {
	var b strings.Builder
	b.WriteString("plans:\n  p:\n    endpoints:\n")
	for i := 0; ; i++ {
		line := fmt.Sprintf("      \"GET /e%d\": {limits: [{algorithm: gcra, rate: 1/s, limit: 1}]}\n", i)
		if b.Len()+len(line) > size {
			return []byte(b.String())
		}
		b.WriteString(line)
	}
}

func TestPolicyAliasBombIsRefused(t *testing.T) {
	// n = 1000 is 38 KB; walked alias by alias, 10⁹ specs (hours).
	bomb := aliasBomb(1000)
	_, err := server.DecodePolicyConfig(bomb, "yaml")
	var pe *server.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "more than MaxPolicyNodes (262144) YAML nodes once aliases are expanded")
	assert.Positive(t, pe.Line)
	// Aliases used reasonably are fine: the same shape, small.
	p, err := server.ParsePolicy(aliasBomb(5), "yaml")
	require.NoError(t, err)
	defer p.Close()
	h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
	assert.Equal(t, 1, admitted(h, 2, "GET", "/r4", "192.0.2.1:1"))
}

func TestPolicySizeCap(t *testing.T) {
	base := "plans: {p: {default: {limits: [{algorithm: gcra, rate: 1/s, limit: 1}]}}}\n#"
	pad := func(size int) []byte { return []byte(base + strings.Repeat("x", size-len(base))) }

	p, err := server.ParsePolicy(pad(server.MaxPolicySize), "yaml")
	require.NoError(t, err, "a file of exactly MaxPolicySize bytes is read")
	p.Close()

	_, err = server.ParsePolicy(pad(server.MaxPolicySize+1), "yaml")
	var pe *server.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.EqualError(t, err, "server: policy: larger than MaxPolicySize (1048576 bytes)")

	// LoadPolicy reads no more than the cap, and names the file.
	path := filepath.Join(t.TempDir(), "huge.yaml")
	require.NoError(t, os.WriteFile(path, pad(10<<20), 0o600))
	_, err = server.LoadPolicy(path)
	assert.EqualError(t, err, "server: policy "+path+": larger than MaxPolicySize (1048576 bytes)")
}

// TestPolicyErrorsTruncateEchoedInput: whatever a file holds, an error
// quotes at most a few dozen bytes of it.
func TestPolicyErrorsTruncateEchoedInput(t *testing.T) {
	long := strings.Repeat("9", 100_000)
	word := strings.Repeat("w", 100_000)
	key := strings.Repeat("k", 1000) // YAML allows implicit keys of at most 1024 characters
	rule := "{limits: [{algorithm: concurrency, limit: 1}]}"
	cases := map[string]string{
		"integer too large":  "max_keys: " + long + "\nplans: {p: {default: " + rule + "}}",
		"string for integer": "max_keys: " + word + "\nplans: {p: {default: " + rule + "}}",
		"unknown field":      key + ": 1\nplans: {p: {default: " + rule + "}}",
		"duration":           "idle_timeout: " + word + "\nplans: {p: {default: " + rule + "}}",
		"plan name in path":  "plans: {" + key + ": {default: {limits: [{algorithm: concurrency, limit: 0}]}}}",
		"endpoint in path":   "plans: {p: {endpoints: {\"GET /" + key + "\": {limits: [{algorithm: concurrency, limit: 0}]}}}}",
		"action":             "plans: {p: {default: {action: " + word + ", limits: [{algorithm: concurrency, limit: 1}]}}}",
		"default plan":       "default_plan: " + word + "\nplans: {p: {default: " + rule + "}}",
		"block list":         "block: [" + word + "]\nplans: {p: {default: " + rule + "}}",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := server.ParsePolicy([]byte(body), "yaml")
			require.Error(t, err)
			assert.Less(t, len(err.Error()), 400, err.Error())
			assert.Contains(t, err.Error(), "…")
		})
	}
	_, err := server.ParsePolicy(nil, word)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 400)
}

// TestPolicyLimitsThatDoNotBuild: specs that validate but whose limiter
// constructor refuses them (or panics) fail NewPolicy with the path of the
// spec, or, where the limiter builds, serve requests; no panic either way.
func TestPolicyLimitsThatDoNotBuild(t *testing.T) {
	specs := map[string]limiters.Spec{
		"gcra of 4e9 at 1/s":             {Algorithm: limiters.AlgGCRA, Rate: limiters.PerSecond(1), Limit: 4_000_000_000},
		"token bucket of MaxInt":         {Algorithm: limiters.AlgTokenBucket, Rate: limiters.PerSecond(1), Limit: 1<<63 - 1},
		"leaky bucket of 1e8 at 1/d":     {Algorithm: limiters.AlgLeakyBucket, Rate: limiters.Rate{N: 1, Per: 24 * 60 * 60 * 1e9}, Limit: 100_000_000},
		"sliding log of MaxInt in 1ns":   {Algorithm: limiters.AlgSlidingLog, Limit: 1<<63 - 1, Window: 1},
		"concurrency of MaxInt":          {Algorithm: limiters.AlgConcurrency, Limit: 1<<63 - 1},
		"fixed window of MaxInt in 292y": {Algorithm: limiters.AlgFixedWindow, Limit: 1<<63 - 1, Window: 1<<63 - 1},
	}
	for name, s := range specs {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, s.Validate())
			var p *server.Policy
			var err error
			require.NotPanics(t, func() {
				p, err = server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"p": {
					Endpoints: map[string]server.Rule{"/x": {Limits: []limiters.Spec{fixed(5, 1e9), s}}},
				}}})
			})
			if err != nil {
				var pe *server.PolicyError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, `plans.p.endpoints["/x"].limits[1]`, pe.Path)
				assert.Nil(t, p)
				return
			}
			defer p.Close()
			h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
			require.NotPanics(t, func() { do(h, "GET", "/x", "192.0.2.1:1") })
		})
	}
}

func TestPolicyLimitThatDoesNotBuildInAFile(t *testing.T) {
	body := "plans:\n  p:\n    default:\n      limits:\n        - {algorithm: gcra, rate: 1/s, limit: 4000000000}\n"
	var err error
	require.NotPanics(t, func() {
		var p *server.Policy
		if p, err = server.ParsePolicy([]byte(body), "yaml"); err == nil {
			p.Close()
		}
	})
	if err != nil { // today's limiters panic in the constructor
		assert.Contains(t, err.Error(), "server: policy:5:11: plans.p.default.limits[0]: cannot build this limiter")
	}
}

// TestPolicyStorageErrors: a storage that fails to make a repository fails
// NewPolicy, closing what it made; one that fails on a request is a
// repository error (EventError, fail open or 503), never a panic.
func TestPolicyStorageErrors(t *testing.T) {
	boom := errors.New("no redis")
	var made []*closeCounter
	_, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"p": {
		Endpoints: map[string]server.Rule{
			"/a": {Limits: []limiters.Spec{fixed(1, 1e9)}},
			"/b": {Limits: []limiters.Spec{fixed(1, 1e9)}},
		},
	}}}, server.WithStorage(func([]limiters.Spec) (repository.Repository, error) {
		if len(made) == 1 {
			return nil, boom
		}
		c := &closeCounter{}
		made = append(made, c)
		return c, nil
	}))
	assert.ErrorIs(t, err, boom)
	assert.EqualError(t, err, `server: policy: plans.p.endpoints["/b"].limits: storage: no redis`)
	require.Len(t, made, 1)
	assert.Equal(t, 1, made[0].closed)

	rec := &recorder{}
	p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {
		Default: &server.Rule{Limits: []limiters.Spec{fixed(1, 1e9)}},
	}}}, server.WithStorage(func([]limiters.Spec) (repository.Repository, error) { return &fakeRepo{err: boom}, nil }))
	closed := server.New(nil, server.WithPolicy(p), server.WithFailOpen(false), server.WithObserver(rec.observe)).Middleware(ok)
	w := do(closed, "GET", "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.EqualValues(t, 503, problem(t, w)["status"])
	assert.Equal(t, server.EventError, rec.last().Kind)
	assert.ErrorIs(t, rec.last().Err, boom)
}

// closeCounter is a repository that counts its Close calls.
type closeCounter struct {
	fakeRepo
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// BenchmarkPolicyWorstCase measures parsing the worst policies the caps
// allow: the largest flat file (MaxPolicySize of distinct endpoint rules),
// the alias bomb of 38 KB and of 1 MiB (refused once its expansion passes
// MaxPolicyNodes), and the largest bomb that is accepted (32³ specs).
func BenchmarkPolicyWorstCase(b *testing.B) {
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"flat=1MiB", flatPolicy(server.MaxPolicySize), true},
		{"bomb=1000", aliasBomb(1000), false},
		{"aliases=32", aliasBomb(32), true},
		{"bomb=1MiB", aliasBomb(21000), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			require.LessOrEqual(b, len(c.data), server.MaxPolicySize)
			b.ReportAllocs()
			b.ReportMetric(float64(len(c.data)), "file-bytes")
			for b.Loop() {
				p, err := server.ParsePolicy(c.data, "yaml")
				require.Equal(b, c.ok, err == nil, "%v", err)
				if p != nil {
					p.Close()
				}
			}
		})
	}
}
