package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo runs a short demo over loopback: every client completes its
// jobs, the plain client collects 429s, and throttle.Transport (almost)
// none (real time: generous bounds).
func TestDemo(t *testing.T) {
	var out strings.Builder
	clients, err := run(&out, 50, 80, 5)
	require.NoError(t, err)
	t.Log("\n" + out.String()[strings.LastIndex(out.String(), "\r")+1:])
	require.Len(t, clients, 3)
	for _, c := range clients {
		assert.EqualValues(t, 80, c.done.Load(), c.name)
	}
	plain, throttled := clients[0], clients[2]
	assert.Greater(t, plain.limited.Load(), int64(10))
	assert.LessOrEqual(t, throttled.limited.Load(), int64(2))
	assert.Contains(t, out.String(), "p99 wait")
}
