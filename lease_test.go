package throttle

import (
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// TestPermitLease: a body its caller never closes holds its concurrency
// permit only until the lease runs out; then the permit goes back exactly
// once (closing the body later gives nothing twice), the body stays
// readable, and the observer learns which partition leaked.
func TestPermitLease(t *testing.T) {
	cases := []struct {
		name  string
		opts  []Option
		lease time.Duration // 0: never comes back
	}{
		{"default", nil, DefaultPermitLease},
		{"one minute", []Option{WithPermitLease(time.Minute)}, time.Minute},
		{"off", []Option{WithPermitLease(0)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := limiters.NewConcurrency(1)
				var mu sync.Mutex
				var leaked []string
				opts := append([]Option{WithLimiter(lim), WithObserver(func(e Event) {
					if e.Kind == EventLeaseExpired {
						mu.Lock()
						leaked = append(leaked, e.Key)
						mu.Unlock()
					}
				})}, tc.opts...)
				tr := NewTransport(handlerTransport{h: okHandler}, opts...)
				defer tr.Close()
				forgotten, err := tr.RoundTrip(mustReq(t, "http://api.test:8080/", nil))
				require.NoError(t, err)

				start := time.Now()
				second := make(chan time.Duration, 1)
				go func() {
					resp, err := tr.RoundTrip(mustReq(t, "http://api.test:8080/", nil))
					if assert.NoError(t, err) {
						second <- time.Since(start)
						resp.Body.Close()
					}
				}()
				if tc.lease == 0 {
					time.Sleep(24 * time.Hour)
					synctest.Wait()
					assert.Empty(t, second, "no lease: the permit stays taken")
					assert.Empty(t, leaked)
					forgotten.Body.Close()
					assert.Zero(t, <-second-24*time.Hour)
					return
				}
				assert.Equal(t, tc.lease, <-second, "the permit came back when the lease ran out")
				synctest.Wait()
				assert.Equal(t, []string{"api.test:8080"}, leaked)
				b, err := io.ReadAll(forgotten.Body)
				require.NoError(t, err)
				assert.Equal(t, "ok", string(b), "the body stays readable")
				forgotten.Body.Close()
				assert.Equal(t, 1, lim.Stats().Available, "given back exactly once")
			})
		})
	}
}

// TestPermitLeaseStopsWhenBodyIsClosed: a body closed in time cancels its
// lease: nothing is given back twice and nothing is reported.
func TestPermitLeaseStopsWhenBodyIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := limiters.NewConcurrency(2)
		var events int
		tr := NewTransport(handlerTransport{h: okHandler}, WithLimiter(lim), WithPermitLease(time.Minute),
			WithObserver(func(e Event) {
				if e.Kind == EventLeaseExpired {
					events++
				}
			}))
		defer tr.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		time.Sleep(time.Hour)
		assert.Zero(t, events)
		assert.Equal(t, 2, lim.Stats().Available)
	})
}

// TestLeaseExpiryIsReportedBeforeThePermitGoesBack: the observer hears of
// the leak before the permit it frees lets the next request through, so
// whatever the observer does (log, count) comes first, as
// ExampleWithPermitLease prints it. The observer takes its time here: had
// the permit gone back first, the waiting request would be done by then.
func TestLeaseExpiryIsReportedBeforeThePermitGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var secondDone atomic.Bool
		doneWhenReported := make(chan bool, 1)
		tr := NewTransport(handlerTransport{h: okHandler}, WithLimiter(limiters.NewConcurrency(1)), WithPermitLease(time.Minute),
			WithObserver(func(e Event) {
				if e.Kind == EventLeaseExpired {
					time.Sleep(time.Second)
					doneWhenReported <- secondDone.Load()
				}
			}))
		defer tr.Close()
		forgotten, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
		require.NoError(t, err)
		defer forgotten.Body.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil)) // waits for the lease
		require.NoError(t, err)
		secondDone.Store(true)
		resp.Body.Close()
		assert.False(t, <-doneWhenReported, "the second request was done before the leak was reported")
	})
}
