package throttle

import (
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
