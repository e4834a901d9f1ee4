package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo runs a short demo over loopback: every client completes its
// jobs, the plain client collects 429s, and throttle.Transport (almost)
// none (real time: generous bounds). 40 jobs past the first second's 20
// take two seconds at best, during which the plain client's five workers
// retry every 50 ms: about 200 tries for 40 permits, so even a machine ten
// times slower than usual sees well over ten 429s.
func TestDemo(t *testing.T) {
	var out strings.Builder
	clients, err := run(&out, false, 20, 60, 5)
	require.NoError(t, err)
	t.Log("\n" + out.String())
	require.Len(t, clients, 3)
	for _, c := range clients {
		assert.EqualValues(t, 60, c.done.Load(), c.name)
	}
	plain, throttled := clients[0], clients[2]
	assert.Greater(t, plain.limited.Load(), int64(10))
	assert.LessOrEqual(t, throttled.limited.Load(), int64(2))
	assert.Contains(t, out.String(), "p99 wait")
}

// TestLLMDemo runs a short LLM-API round over loopback: every client gets
// its completions; throttle.Transport's 429s are at most the requests it
// sent before the first answer taught it the quotas (one per worker), far
// fewer than the plain client's (real time: generous bounds).
func TestLLMDemo(t *testing.T) {
	var out strings.Builder
	clients, err := runLLM(&out, false, 30, 5)
	require.NoError(t, err)
	t.Log("\n" + out.String())
	require.Len(t, clients, 3)
	for _, c := range clients {
		assert.EqualValues(t, 30, c.done.Load(), c.name)
	}
	plain, throttled := clients[0], clients[2]
	assert.LessOrEqual(t, throttled.limited.Load(), int64(5))
	assert.Greater(t, plain.limited.Load(), throttled.limited.Load())
}

// TestProgressOffATerminal: written to a pipe or a file, the progress is
// a short line a second, never a line redrawn with \r; on a terminal it is
// redrawn in place. Both end with the final counts and a blank line.
func TestProgressOffATerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tty := range []bool{false, true} {
			var out strings.Builder
			stop := make(chan struct{})
			done := make(chan struct{})
			cs := []*client{{name: "a"}, {name: "b"}}
			go func() {
				defer close(done)
				showProgress(&out, tty, cs, stop)
			}()
			time.Sleep(3500 * time.Millisecond)
			cs[0].done.Store(7)
			close(stop)
			<-done
			s := out.String()
			if !tty {
				assert.NotContains(t, s, "\r")
				assert.Equal(t, strings.Repeat("a: 0 ok, 0×429 | b: 0 ok, 0×429\n", 3)+"a: 7 ok, 0×429 | b: 0 ok, 0×429\n\n", s)
				continue
			}
			assert.Equal(t, 18, strings.Count(s, "\r"), "redrawn every 200 ms, and once at the end")
			assert.True(t, strings.HasSuffix(s, "\ra: 7 ok, 0×429 | b: 0 ok, 0×429\n\n"), "%q", s)
		}
	})
}
