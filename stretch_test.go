package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// flaskElasticReset is the reset Flask-Limiter writes for an elastic
// window of w hit at hit: int(expiry + 1) in epoch seconds.
func flaskElasticReset(hit time.Time, w time.Duration) time.Time {
	return hit.Add(w).Truncate(time.Second).Add(time.Second)
}

// TestStretchFitsAnElasticWindow: answers of a window every request
// restarts, each reset a window after its request (rounded up), keep
// the hypothesis and bound the window to the whole second it is.
func TestStretchFitsAnElasticWindow(t *testing.T) {
	for _, w := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 60 * time.Second} {
		var e stretch
		at := t0.Add(300 * time.Millisecond)
		for i := range 40 {
			sent := at.Add(time.Duration(i) * 137 * time.Millisecond)
			hit := sent.Add(12 * time.Millisecond)
			e.learn(flaskElasticReset(hit, w), sent, hit.Add(12*time.Millisecond))
		}
		assert.Equal(t, w, e.window(), "a window of %v", w)
	}
}

// TestStretchRejectsOtherWindows: a window whose answers do not all fit
// one every request restarts ends the hypothesis, for good.
func TestStretchRejectsOtherWindows(t *testing.T) {
	rtt := 20 * time.Millisecond
	t.Run("fixed window, refused probe", func(t *testing.T) {
		// Opened at t0+0.3 s, one second long: its reset (rounded up) is
		// t0+2 s for every request of it, the probe at t0+1.1 s too.
		var e stretch
		end := t0.Add(2 * time.Second)
		e.learn(end, t0.Add(300*time.Millisecond), t0.Add(300*time.Millisecond+rtt))
		assert.Equal(t, time.Second, e.window(), "a burst at the window's start fits either")
		e.learn(end, t0.Add(1100*time.Millisecond), t0.Add(1100*time.Millisecond+rtt))
		assert.Zero(t, e.window())
		// Answers that would fit again change nothing.
		e.learn(flaskElasticReset(t0.Add(3*time.Second), time.Second), t0.Add(3*time.Second), t0.Add(3*time.Second+rtt))
		assert.Zero(t, e.window())
	})
	t.Run("sliding window's grid", func(t *testing.T) {
		// go-chi/httprate: the reset is the end of the current fixed
		// window of the grid, within a window of any request.
		var e stretch
		for i := range 10 {
			sent := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			e.learn(sent.Truncate(time.Second).Add(time.Second), sent, sent.Add(rtt))
		}
		assert.Zero(t, e.window())
	})
	t.Run("sliding log's oldest entry", func(t *testing.T) {
		// Its reset, the oldest entry's expiry, comes nearer as the
		// requests after it go.
		var e stretch
		for i := range 10 {
			sent := t0.Add(time.Duration(i) * 150 * time.Millisecond)
			e.learn(t0.Add(2*time.Second), sent, sent.Add(rtt))
		}
		assert.Zero(t, e.window())
	})
	t.Run("shorter than a second", func(t *testing.T) {
		var e stretch
		e.learn(t0.Add(time.Second), t0.Add(400*time.Millisecond), t0.Add(400*time.Millisecond+rtt))
		assert.Zero(t, e.window(), "a reset 0.6 s after its request fits no whole second")
	})
	t.Run("longer than it keeps", func(t *testing.T) {
		var e stretch
		e.learn(flaskElasticReset(t0, time.Hour), t0, t0.Add(rtt))
		assert.Zero(t, e.window(), "an hour is past what it keeps")
	})
}

// TestStretchRoundsOutward: bounds kept in hundredths of a second never
// exclude the window the exact bounds allow.
func TestStretchRoundsOutward(t *testing.T) {
	var e stretch
	// Sent 1.0005 s before its reset: one second fits, just.
	reset := t0.Add(3 * time.Second)
	sent := reset.Add(-1000500 * time.Microsecond)
	e.learn(reset, sent, sent.Add(5*time.Millisecond))
	assert.Equal(t, time.Second, e.window())
	// Answered 1.9905 s before its reset: the window is longer than
	// 0.9905 s, and one second still fits.
	now := reset.Add(-1990500 * time.Microsecond)
	e.learn(reset, now.Add(-5*time.Millisecond), now)
	assert.Equal(t, time.Second, e.window())
}
