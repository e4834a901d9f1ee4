package main

import (
	"net/http"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsCountDecisions scrapes /metrics after known decisions and
// checks that the counts match them.
func TestMetricsCountDecisions(t *testing.T) {
	p := launch(t, "--policy", writePolicy(t, policy))
	want := map[[3]string]int{}
	for i := range 5 { // 3 allowed, 2 rejected
		r := p.check(t, `{"key":"m","endpoint":"POST /api/ask"}`)
		want[[3]string{map[bool]string{true: "allowed", false: "rejected"}[r.Allowed], "free", "POST /api/ask"}]++
		assert.Equal(t, i < 3, r.Allowed)
	}
	for range 7 { // 5 allowed, 2 rejected, on the default rule
		r := p.check(t, `{"key":"m0"}`)
		want[[3]string{map[bool]string{true: "allowed", false: "rejected"}[r.Allowed], "free", "default"}]++
	}
	require.Equal(t, 3, want[[3]string{"allowed", "free", "POST /api/ask"}])
	require.Equal(t, 2, want[[3]string{"rejected", "free", "default"}])

	resp, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	fam := fams["throttle_server_decisions_total"]
	require.NotNil(t, fam)
	got := map[[3]string]int{}
	for _, m := range fam.Metric {
		l := map[string]string{}
		for _, lp := range m.Label {
			l[lp.GetName()] = lp.GetValue()
		}
		assert.NotContains(t, l, "key", "no label carries a caller's key")
		if l["result"] == "near_limit" {
			continue
		}
		got[[3]string{l["result"], l["policy"], l["rule"]}] = int(m.GetCounter().GetValue())
	}
	assert.Equal(t, want, got)
	assert.Contains(t, fams, "go_goroutines")
	assert.Contains(t, fams, "throttle_redis_breaker_state")
	assert.Equal(t, 0, p.stop(t))
}
