package throttle

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
)

// hookCtx runs hook the first time Done is called: in gate.wait, that is
// while select evaluates its cases, before it picks one.
type hookCtx struct {
	context.Context
	hook func()
}

func (c *hookCtx) Done() <-chan struct{} {
	if c.hook != nil {
		h := c.hook
		c.hook = nil
		h()
	}
	return c.Context.Done()
}

// TestGateWaitCancelledAsLetThrough: the waiter's context ends and the gate
// lets it through in the same instant, before wait's select runs, so both
// of its cases are ready and Go picks one at random. Whichever it picks,
// wait returns the context's error and the admission is undone: the
// partition has nothing in flight and lets the next request through at once.
func TestGateWaitCancelledAsLetThrough(t *testing.T) {
	for range 50 { // both select orders, many times over
		synctest.Test(t, func(t *testing.T) {
			g := &gate{key: "api.test", maxPause: time.Minute}
			// A 429 with Retry-After: 1 pauses the partition; after it, the
			// first request through probes alone.
			var tk ticket
			w, err := g.enter(context.Background(), time.Time{}, nil, &tk)
			require.NoError(t, err)
			require.Nil(t, w)
			g.done(&tk, answerOf(&http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}), time.Now())
			time.Sleep(time.Second)
			var probe ticket
			w, err = g.enter(context.Background(), time.Time{}, nil, &probe)
			require.NoError(t, err)
			require.Nil(t, w, "the probe goes at once")
			w, err = g.enter(context.Background(), time.Time{}, nil, new(ticket))
			require.NoError(t, err)
			require.NotNil(t, w, "the next waits for the probe's answer")

			ctx, cancel := context.WithCancel(context.Background())
			hc := &hookCtx{Context: ctx, hook: func() {
				cancel()
				g.done(&probe, answerOf(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}}), time.Now())
			}}
			err = g.wait(hc, w, new(ticket))
			assert.ErrorIs(t, err, context.Canceled)

			g.mu.Lock()
			inflight, head := g.inflight, g.q.Head()
			g.mu.Unlock()
			assert.Zero(t, inflight, "the admission was given back")
			assert.Nil(t, head)
			w, err = g.enter(context.Background(), time.Time{}, nil, new(ticket))
			require.NoError(t, err)
			assert.Nil(t, w, "the next request goes at once")
		})
	}
}

// answerOf reads resp as RoundTrip does.
func answerOf(resp *http.Response) *answer {
	a := new(answer)
	a.read(resp, headers.PeekBody(resp), time.Now())
	return a
}
