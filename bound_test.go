package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// TestRefusalSaysWhatHeldItAndWhichBound: every refusal names the limiter
// and the partition, says which bound the wait would have passed, and
// matches context.DeadlineExceeded exactly when that bound was the
// context's deadline; it always matches ErrRateLimited and
// *limiters.RejectedError, through the *url.Error of http.Client.
func TestRefusalSaysWhatHeldItAndWhichBound(t *testing.T) {
	refuseAll := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	cases := []struct {
		name     string
		h        http.Handler
		lim      bool          // a token bucket "github" of 1 a minute, used up
		maxWait  time.Duration // WithMaxWait
		ctxWait  time.Duration // the context's timeout
		limiter  string        // RejectedError.Limiter
		reason   string        // RejectedError.Reason
		deadline bool          // errors.Is(err, context.DeadlineExceeded)
	}{
		{"limiter, max wait", okHandler, true, time.Second, 0,
			`github (partition "api.test")`, "its turn would come after WithMaxWait (1s)", false},
		{"limiter, context deadline", okHandler, true, 0, time.Second,
			`github (partition "api.test")`, "its turn would come after the context deadline", true},
		{"limiter, context deadline before max wait", okHandler, true, 10 * time.Second, time.Second,
			`github (partition "api.test")`, "its turn would come after the context deadline", true},
		{"limiter, max wait before context deadline", okHandler, true, time.Second, 10 * time.Second,
			`github (partition "api.test")`, "its turn would come after WithMaxWait (1s)", false},
		{"server pause, max wait", refuseAll, false, 10 * time.Second, 0,
			`server feedback (partition "api.test")`, "the server paused or paced the partition; its turn would come after WithMaxWait (10s)", false},
		{"server pause, context deadline", refuseAll, false, 0, 10 * time.Second,
			`server feedback (partition "api.test")`, "the server paused or paced the partition; its turn would come after the context deadline", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := []Option{WithMaxWait(tc.maxWait)}
				if tc.lim {
					opts = append(opts, WithLimiter(limiters.NewTokenBucket(limiters.Every(time.Minute), 1, limiters.WithName("github"))))
				}
				tr := NewTransport(handlerTransport{h: tc.h}, opts...)
				defer tr.Close()
				client := &http.Client{Transport: tr}
				resp, err := client.Get("http://api.test/")
				require.NoError(t, err)
				resp.Body.Close()

				ctx := context.Background()
				if tc.ctxWait > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxWait)
					defer cancel()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
				start := time.Now()
				_, err = client.Do(req)
				assert.Zero(t, time.Since(start), "refused at once")
				var uerr *url.Error
				require.ErrorAs(t, err, &uerr)
				var rej *limiters.RejectedError
				require.ErrorAs(t, err, &rej)
				assert.ErrorIs(t, err, limiters.ErrRateLimited)
				assert.Equal(t, tc.limiter, rej.Limiter)
				assert.Equal(t, tc.reason, rej.Reason)
				assert.Equal(t, tc.deadline, errors.Is(err, context.DeadlineExceeded))
				assert.Contains(t, err.Error(), `partition "api.test"`)
				assert.Greater(t, rej.RetryAfter, 10*time.Second)
			})
		})
	}
}

// TestMaxWaitBoundsAWaitNobodyCanForesee: when neither the gate nor the
// limiter can tell when a request's turn comes (it waits behind a probe
// whose answer is slow, or for a concurrency permit), WithMaxWait still
// ends the wait, with a refusal that says so.
func TestMaxWaitBoundsAWaitNobodyCanForesee(t *testing.T) {
	t.Run("behind a probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := refuseFirst(func(http.ResponseWriter, *http.Request) {
				time.Sleep(30 * time.Second) // a slow probe
			})
			tr := NewTransport(handlerTransport{h: h}, WithMaxWait(5*time.Second))
			defer tr.Close()
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
			time.Sleep(time.Second)
			probe := make(chan error)
			go func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
				if err == nil {
					resp.Body.Close()
				}
				probe <- err
			}()
			synctest.Wait()
			start := time.Now()
			_, err = tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			assert.Equal(t, 5*time.Second, time.Since(start), "waited WithMaxWait, no longer")
			var rej *limiters.RejectedError
			require.ErrorAs(t, err, &rej)
			assert.Equal(t, "the server paused or paced the partition; its turn did not come within WithMaxWait (5s)", rej.Reason)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, <-probe)
		})
	})
	t.Run("for a concurrency permit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := NewTransport(handlerTransport{h: okHandler}, WithMaxWait(5*time.Second),
				WithLimiter(limiters.NewConcurrency(1, limiters.WithName("pool"))))
			defer tr.Close()
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			require.NoError(t, err)
			defer resp.Body.Close()
			start := time.Now()
			_, err = tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			assert.Equal(t, 5*time.Second, time.Since(start))
			var rej *limiters.RejectedError
			require.ErrorAs(t, err, &rej)
			assert.Equal(t, `partition "api.test"`, rej.Limiter, "the limiter never refused: only the partition is known")
			assert.Equal(t, "its turn did not come within WithMaxWait (5s)", rej.Reason)
			io.Copy(io.Discard, resp.Body)
		})
	})
}
