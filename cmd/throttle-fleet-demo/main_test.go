package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
)

// TestMain runs the worker when the demo, under test, starts this binary
// as one of its worker processes.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// TestDemo runs both rounds with real worker processes (this test binary,
// run again) on a small workload: every request of every worker is
// admitted in each round, and the table has a row per round.
func TestDemo(t *testing.T) {
	redistest.Need(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, run(&out, config{procs: 2, goroutines: 4, requests: 30, limit: 40}, exe))
	t.Log("\n" + out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5)
	for _, l := range lines[3:] {
		f := strings.Fields(l)
		assert.Equal(t, "60", f[len(f)-3], "admitted: %s", l)
	}
	assert.Contains(t, lines[3], "each alone")
	assert.Contains(t, lines[4], "sharing a FeedbackStore on Redis")
}
