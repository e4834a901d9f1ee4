package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlekit/throttle/headers"
)

// TestWholeSecond holds the whole-second model alone to its rules: a
// whole-second reset ahead is waited for (plus the phase learnt), one that
// has passed while nothing remains is probed after 50 ms, 100 ms, … up to
// a second past it, and the probe that gets through teaches the phase.
func TestWholeSecond(t *testing.T) {
	r := time.Unix(1_000_000, 0)
	var w wholeSecond
	q := headers.Quota{Limit: 10, Remaining: 0, Reset: r}
	assert.Equal(t, r, w.resetFor(&q, r.Add(-300*time.Millisecond)), "ahead: the reset itself")
	assert.Equal(t, r, w.resetTime(), "the reset the pause waits for")
	at := r.Add(10 * time.Millisecond)
	assert.Equal(t, at.Add(50*time.Millisecond), w.resetFor(&q, at), "passed: probe after 50 ms")
	assert.Equal(t, at.Add(100*time.Millisecond), w.resetFor(&q, at), "refused again: 100 ms")
	assert.Equal(t, r.Add(time.Second), w.resetFor(&q, r.Add(900*time.Millisecond)), "never past a second after it")

	// The probe sent 300 ms after the reset opened a new window: the phase.
	w = wholeSecond{reset: r.Unix()}
	a := answer{status: 200, info: headers.Info{Quotas: []headers.Quota{{Limit: 10, Remaining: 9, Reset: r.Add(time.Second)}}}}
	w.learn(&a, r.Add(300*time.Millisecond))
	assert.Equal(t, 300*time.Millisecond, w.phase.d())
	assert.Zero(t, w.reset)
	next := headers.Quota{Limit: 10, Remaining: 0, Reset: r.Add(time.Second)}
	assert.Equal(t, r.Add(1300*time.Millisecond), w.resetFor(&next, r.Add(500*time.Millisecond)), "the next reset, plus the phase")
}

// TestWholeSecondDelay: a refusal's delay is the longest any field asks
// for, except that a quota at zero written in whole seconds waits only as
// long as a Retry-After written to the millisecond says within the same
// second (retry-after-ms beside Retry-After: 1 and RateLimit t=1).
func TestWholeSecondDelay(t *testing.T) {
	now := time.Unix(1_000_000, 123_000_000)
	var w wholeSecond
	coarse := headers.Quota{Limit: 10, Remaining: 0, Reset: now.Add(time.Second)}
	fine := headers.Info{Quotas: []headers.Quota{coarse}, RetryAfter: 100 * time.Millisecond, HasRetryAfter: true}
	assert.Equal(t, 100*time.Millisecond, w.delay(fine, now), "the millisecond field, within the rounded second")
	whole := headers.Info{Quotas: []headers.Quota{coarse}, RetryAfter: time.Second, HasRetryAfter: true}
	assert.Equal(t, time.Second+resetSlack, w.delay(whole, now), "whole seconds both: the longest")
	far := headers.Info{Quotas: []headers.Quota{{Limit: 10, Remaining: 0, Reset: now.Add(5 * time.Second)}}, RetryAfter: 100 * time.Millisecond, HasRetryAfter: true}
	assert.Equal(t, 5*time.Second+resetSlack, w.delay(far, now), "a quota empty for longer than the Retry-After's second: the quota")
}

// TestServerClockBehindOurs: koa-ratelimit's memory driver keeps its own
// clock — Date.now() when it loaded, in whole milliseconds, plus the
// monotonic time since — up to a millisecond behind ours, and writes its
// reset to the microsecond by it. A request sent at that reset by our
// clock reaches it before the window's end by its own, and is refused
// with "Retry-After: 0" and the same reset, now passed. Taken for a reset
// rounded down ("not yet": a second), every window's first request was
// refused and a window lost after it (2.01x, a loaded machine, real
// koa-ratelimit); the lag it shows is waited for from then on (lagged).
func TestServerClockBehindOurs(t *testing.T) {
	b := modelBehaviour{
		name: "koa-ratelimit memory, its clock 1.5 ms behind ours",
		serve: func(q simQuota) (http.Handler, func()) {
			return &koaMemory{max: q.n, duration: q.window, lag: 1500 * time.Microsecond}, nil
		},
		ideal: idealWindowed, method: http.MethodGet,
	}
	r := runModel(t, b, modelRun{rate: 10, window: time.Second, workers: 10, total: 250, method: b.method})
	r.holds(t, 2, 1.02)
}

// TestLaggedLearnsFromRefusalsAfterAFineReset: a refusal at zero of a
// request sent after a reset told finer than the second shows the
// server's clock behind ours by at least that much; a second such
// refusal doubles what was learnt; resets in whole seconds, and requests
// sent before the reset, teach nothing.
func TestLaggedLearnsFromRefusalsAfterAFineReset(t *testing.T) {
	reset := t0.Add(1234567 * time.Microsecond)
	at := func() headers.Info {
		return headers.Info{Quotas: []headers.Quota{{Limit: 10, Remaining: 0, Reset: reset}}}
	}
	var w wholeSecond
	w.lagged(at(), reset.Add(-time.Millisecond), reset)
	assert.Zero(t, w.lagging(), "sent before the reset: the window had not turned")
	w.lagged(at(), reset.Add(2*time.Millisecond), reset.Add(3*time.Millisecond))
	assert.Equal(t, 3*time.Millisecond, w.lagging(), "sent 2 ms after it, and the reset's slack")
	assert.Equal(t, reset.Add(3*time.Millisecond+resetSlack), w.resetFor(&headers.Quota{Limit: 10, Remaining: 0, Reset: reset}, reset.Add(-10*time.Millisecond)), "its resets are waited for that much longer")
	w.lagged(at(), reset.Add(time.Millisecond), reset.Add(2*time.Millisecond))
	assert.Equal(t, 6*time.Millisecond, w.lagging(), "refused again: twice")
	for range 20 {
		w.lagged(at(), reset.Add(time.Millisecond), reset.Add(2*time.Millisecond))
	}
	assert.Equal(t, notYet, w.lagging(), "at most notYet")

	var whole wholeSecond
	r := t0.Add(2 * time.Second)
	whole.lagged(headers.Info{Quotas: []headers.Quota{{Limit: 10, Remaining: 0, Reset: r}}}, r.Add(time.Millisecond), r.Add(2*time.Millisecond))
	assert.Zero(t, whole.lagging(), "a reset in whole seconds is rounded: no lag to learn")
	passed := whole.resetFor(&headers.Quota{Limit: 10, Remaining: 0, Reset: reset}, reset.Add(5*time.Millisecond))
	assert.Equal(t, reset.Add(5*time.Millisecond+resetSlack), passed, "a fine reset passed at zero: a moment, not notYet")
}
