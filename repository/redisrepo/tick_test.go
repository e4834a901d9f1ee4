package redisrepo

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTripCtx: a round trip's context has the timeout's deadline; its Done
// closes no earlier than that and at most a tick (timeout/16) later, for
// every round trip of a tick alike; Err says why, the caller's
// cancellation first; closing the ticks closes every Done at once and
// leaves no timer behind.
func TestTripCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 1600 * time.Millisecond
		var ts ticks
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		type trip struct {
			ctx   *tripCtx
			begin time.Time
		}
		var trips []trip
		for i := range 40 {
			begin := time.Now()
			tk := ts.at(begin, timeout)
			require.NotNil(t, tk)
			trips = append(trips, trip{&tripCtx{Context: parent, dl: begin.Add(timeout), tick: tk}, begin})
			if i == 20 {
				cancel()
			}
			time.Sleep(7 * time.Millisecond)
		}
		assert.LessOrEqual(t, len(ts.live), int((40*7*time.Millisecond)/(timeout/16))+1, "one tick per 100ms")
		for _, tr := range trips {
			dl, ok := tr.ctx.Deadline()
			assert.True(t, ok)
			assert.Equal(t, tr.begin.Add(timeout), dl)
		}
		for _, tr := range trips {
			if before := tr.begin.Add(timeout - time.Microsecond); time.Now().Before(before) {
				time.Sleep(time.Until(before))
				select {
				case <-tr.ctx.Done():
					t.Fatalf("a trip begun at %v is done at %v, before its deadline", tr.begin.Sub(start), time.Since(start))
				default:
				}
				assert.NoError(t, tr.ctx.Err())
			}
			time.Sleep(time.Until(tr.begin.Add(timeout)))
			select {
			case <-tr.ctx.Done():
			case <-time.After(timeout/16 + time.Millisecond):
				t.Fatalf("a trip begun at %v is not done a tick after its deadline", tr.begin.Sub(start))
			}
			assert.ErrorIs(t, tr.ctx.Err(), context.Canceled, "the caller's error first")
		}
		// after Close, Done is closed at once and no tick is handed out
		tk := ts.at(time.Now(), timeout)
		ts.close()
		select {
		case <-tk.done:
		default:
			t.Fatal("close left a tick open")
		}
		assert.Nil(t, ts.at(time.Now(), timeout))
		c := &tripCtx{Context: context.Background(), dl: time.Now(), tick: tk}
		assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
	})
}
