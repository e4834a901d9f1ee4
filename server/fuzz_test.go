package server_test

import (
	"errors"
	"testing"

	"github.com/throttlekit/throttle/server"
)

// FuzzParsePolicy: any bytes, as YAML or JSON, give a policy or a
// *PolicyError — never a panic, never both, never neither.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`default_plan: free
plans:
  free:
    default: {limits: [{algorithm: gcra, rate: 60/m, limit: 10}]}
    endpoints:
      "POST /api/ask":
        action: delay
        max_delay: 2s
        limits: [{algorithm: sliding_window, limit: 10, window: 1m}, {algorithm: concurrency, limit: 5}]
        cost_caps: [{algorithm: fixed_window, limit: 1000, window: 1h}]
allow: ["10.0.0.0/8"]
block: ["203.0.113.7"]
`))
	f.Add([]byte(`{"default_plan":"free","plans":{"free":{"default":{"limits":[{"algorithm":"token_bucket","rate":"10/s","limit":20}]}}}}`))
	f.Add([]byte(`plans: {free: {endpoints: {"GET /items/{id}": {limits: [{algorithm: fixed_window, limit: 0, window: 1m}]}}}}`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []string{"yaml", "json"} {
			p, err := server.ParsePolicy(data, format)
			switch {
			case err != nil && p != nil:
				t.Fatalf("both a policy and an error: %v", err)
			case err == nil && p == nil:
				t.Fatal("neither a policy nor an error")
			case err != nil:
				var pe *server.PolicyError
				if !errors.As(err, &pe) {
					t.Fatalf("error is not a *PolicyError: %T %v", err, err)
				}
			default:
				p.Close()
			}
		}
	})
}

// FuzzPolicyAliases: the type check of a YAML policy with anchors and
// aliases, seeded with the nested-alias bomb. Whatever the aliases, it
// gives a config or a *PolicyError, never a panic, and visits at most
// MaxPolicyNodes nodes, so each input is decided quickly.
func FuzzPolicyAliases(f *testing.F) {
	f.Add(aliasBomb(3))
	f.Add(aliasBomb(40))
	f.Add(aliasBomb(1000))
	f.Add([]byte("plans:\n  a: &p {default: {limits: &l [{algorithm: concurrency, limit: 1}]}}\n  b: *p\n  c: {default: {limits: *l, cost_caps: *l}}\n"))
	f.Add([]byte("plans: &x {a: *x}\n"))
	f.Add([]byte("allow: &a [\"10.0.0.0/8\", *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := server.DecodePolicyConfig(data, "yaml")
		var pe *server.PolicyError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error is not a *PolicyError: %T %v", err, err)
		}
	})
}
