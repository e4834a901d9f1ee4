package throttle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// countingBody counts Close calls.
type countingBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *countingBody) Close() error { b.closed.Add(1); return nil }

// okHandler answers 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
	}
	io.WriteString(w, "ok")
})

// recordingRT records the requests it is given and answers with h.
type recordingRT struct {
	mu   sync.Mutex
	reqs []*http.Request
	h    http.Handler
	idle atomic.Int32
}

func (r *recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return handlerTransport{h: r.h}.RoundTrip(req)
}

func (r *recordingRT) CloseIdleConnections() { r.idle.Add(1) }

func (r *recordingRT) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func TestRoundTripDoesNotModifyRequest(t *testing.T) {
	base := &recordingRT{h: okHandler}
	tr := NewTransport(base, WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(100), 10)))
	defer tr.Close()
	req, err := http.NewRequest(http.MethodPost, "http://api.test:8080/x?q=1", strings.NewReader("body"))
	require.NoError(t, err)
	req.Header.Set("X-Test", "1")
	before := req.Header.Clone()
	u := *req.URL
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, before, req.Header)
	assert.Equal(t, u, *req.URL)
	assert.Equal(t, http.MethodPost, req.Method)
	require.Len(t, base.reqs, 1)
	assert.Same(t, req, base.reqs[0], "the request goes through as is, uncloned")
}

func TestRoundTripClosesBodyOnItsOwnErrors(t *testing.T) {
	t.Run("closed transport", func(t *testing.T) {
		tr := NewTransport(&recordingRT{h: okHandler})
		require.NoError(t, tr.Close())
		body := &countingBody{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/", body)
		resp, err := tr.RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, limiters.ErrClosed)
		assert.EqualValues(t, 1, body.closed.Load())
	})
	t.Run("rejected for max wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim := limiters.NewTokenBucket(limiters.Every(time.Minute), 1)
			base := &recordingRT{h: okHandler}
			tr := NewTransport(base, WithLimiter(lim), WithMaxWait(time.Second))
			defer tr.Close()
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
			body := &countingBody{Reader: strings.NewReader("x")}
			resp, err = tr.RoundTrip(mustReq(t, "http://api.test/", body))
			assert.Nil(t, resp)
			var rej *limiters.RejectedError
			require.ErrorAs(t, err, &rej)
			assert.ErrorIs(t, err, limiters.ErrRateLimited)
			assert.Greater(t, rej.RetryAfter, time.Second)
			assert.EqualValues(t, 1, body.closed.Load())
			assert.Equal(t, 1, base.count(), "the refused request is never sent")
		})
	})
	t.Run("cancelled context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim := limiters.NewTokenBucket(limiters.Every(time.Minute), 1)
			tr := NewTransport(&recordingRT{h: okHandler}, WithLimiter(lim))
			defer tr.Close()
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
			ctx, cancel := context.WithCancel(context.Background())
			body := &countingBody{Reader: strings.NewReader("x")}
			req := mustReq(t, "http://api.test/", body).WithContext(ctx)
			done := make(chan error)
			go func() {
				_, err := tr.RoundTrip(req)
				done <- err
			}()
			synctest.Wait()
			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
			assert.EqualValues(t, 1, body.closed.Load())
		})
	})
}

func mustReq(t *testing.T, u string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, body)
	require.NoError(t, err)
	return req
}

func TestTooManyRequestsIsAResponseNotAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		tr := NewTransport(handlerTransport{h: h})
		defer tr.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	})
}

func TestCloseIdleConnectionsIsForwarded(t *testing.T) {
	base := &recordingRT{h: okHandler}
	tr := NewTransport(base)
	defer tr.Close()
	tr.CloseIdleConnections()
	assert.EqualValues(t, 1, base.idle.Load())
	// http.Client.CloseIdleConnections reaches it too.
	(&http.Client{Transport: tr}).CloseIdleConnections()
	assert.EqualValues(t, 2, base.idle.Load())
}

func TestRejectedErrorReachableThroughURLError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		tr := NewTransport(handlerTransport{h: h}, WithMaxWait(10*time.Second))
		defer tr.Close()
		client := &http.Client{Transport: tr}
		resp, err := client.Get("http://api.test/")
		require.NoError(t, err)
		resp.Body.Close()
		_, err = client.Get("http://api.test/")
		var uerr *url.Error
		require.ErrorAs(t, err, &uerr)
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej)
		assert.InDelta(t, (120 * time.Second).Seconds(), rej.RetryAfter.Seconds(), 1)
	})
}

func TestConcurrencyPermitHeldUntilBodyDone(t *testing.T) {
	for _, finish := range []string{"close", "eof", "eof then close"} {
		t.Run(finish, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := limiters.NewConcurrency(1)
				tr := NewTransport(handlerTransport{h: okHandler}, WithLimiter(lim))
				defer tr.Close()
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
				require.NoError(t, err)
				assert.Equal(t, 0, lim.Stats().Available, "held while the body is open")

				second := make(chan *http.Response)
				go func() {
					r, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
					assert.NoError(t, err)
					second <- r
				}()
				synctest.Wait()
				assert.Equal(t, 1, lim.Stats().Queued, "the second request waits")

				switch finish {
				case "close":
					resp.Body.Close()
				case "eof":
					io.ReadAll(resp.Body)
				default:
					io.ReadAll(resp.Body)
					resp.Body.Close()
					resp.Body.Close()
				}
				r2 := <-second
				r2.Body.Close()
				assert.Equal(t, 1, lim.Stats().Available, "given back exactly once")
			})
		})
	}
}

func TestServerPauseKeepsQueuedRequestsUnsentAndInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		var order []string
		var mu sync.Mutex
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			mu.Lock()
			order = append(order, r.URL.Query().Get("i"))
			mu.Unlock()
			if n == 1 {
				w.Header().Set("Retry-After", "5")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
		})
		var paused, resumed atomic.Int32
		tr := NewTransport(handlerTransport{h: h}, WithObserver(func(e Event) {
			switch e.Kind {
			case EventPaused:
				paused.Add(1)
			case EventResumed:
				resumed.Add(1)
			}
		}))
		defer tr.Close()
		start := time.Now()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/?i=0", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.EqualValues(t, 1, paused.Load())

		var wg sync.WaitGroup
		for i := 1; i <= 5; i++ {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/?i="+string(rune('0'+i)), nil))
				if assert.NoError(t, err) {
					resp.Body.Close()
					assert.GreaterOrEqual(t, time.Since(start), 5*time.Second)
				}
			})
			synctest.Wait() // queue them in a known order
		}
		time.Sleep(4 * time.Second)
		assert.EqualValues(t, 1, calls.Load(), "nothing is sent during the pause")
		wg.Wait()
		assert.EqualValues(t, 6, calls.Load())
		// The head of the queue probes alone; once it is answered the rest
		// are let go together (their order on the wire is then up to the
		// goroutines).
		assert.Equal(t, []string{"0", "1"}, order[:2])
		assert.ElementsMatch(t, []string{"0", "1", "2", "3", "4", "5"}, order)
		// The resume is reported after the gate's lock is let go, by the
		// timer that ended the pause: the requests it let through may be
		// answered first. Wait for it to be done.
		synctest.Wait()
		assert.EqualValues(t, 1, resumed.Load())
	})
}

func TestHostileRetryAfterIsCapped(t *testing.T) {
	for _, ra := range []string{"2592000", "999999999"} { // 30 days; 31 years (dropped by headers.Parse)
		t.Run(ra, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Retry-After", ra)
					w.WriteHeader(http.StatusTooManyRequests)
				})
				for _, maxPause := range []time.Duration{time.Minute, 0} {
					var until time.Time
					tr := NewTransport(handlerTransport{h: h}, WithMaxPause(maxPause), WithObserver(func(e Event) {
						if e.Kind == EventPaused {
							until = e.Until
						}
					}))
					resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
					require.NoError(t, err)
					resp.Body.Close()
					limit := DefaultMaxPause
					if maxPause > 0 {
						limit = maxPause
					}
					require.False(t, until.IsZero(), "a 429 pauses")
					assert.LessOrEqual(t, time.Until(until), limit)
					tr.Close()
				}
			})
		})
	}
}

func TestCloseFailsWaitingRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := limiters.NewTokenBucket(limiters.Every(time.Hour), 1)
		tr := NewTransport(handlerTransport{h: okHandler}, WithLimiter(lim))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
				errs <- err
			}()
		}
		synctest.Wait()
		require.NoError(t, tr.Close())
		require.NoError(t, tr.Close(), "idempotent")
		for range 3 {
			assert.ErrorIs(t, <-errs, limiters.ErrClosed)
		}
	})
}

func TestPauseIsPerPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Host == "slow.test" {
				w.Header().Set("Retry-After", "60")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		tr := NewTransport(handlerTransport{h: h})
		defer tr.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://slow.test/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		start := time.Now()
		resp, err = tr.RoundTrip(mustReq(t, "http://fast.test/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Zero(t, time.Since(start), "another host is not paused")
		// The host includes the port: another port is another partition.
		resp, err = tr.RoundTrip(mustReq(t, "http://slow.test:8080/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Zero(t, time.Since(start))
	})
}

func TestRepositoryGivesEachKeyItsLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := repository.NewMemory(func(string) limiters.Limiter {
			return limiters.NewTokenBucket(limiters.Every(time.Minute), 2)
		})
		tr := NewTransport(handlerTransport{h: okHandler}, WithRepository(repo),
			WithKey(keyextract.Header("X-Tenant")), WithMaxWait(time.Second))
		defer tr.Close()
		send := func(tenant string) error {
			req := mustReq(t, "http://api.test/", nil)
			req.Header.Set("X-Tenant", tenant)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		require.NoError(t, send("a"))
		require.NoError(t, send("a"))
		assert.ErrorIs(t, send("a"), limiters.ErrRateLimited)
		require.NoError(t, send("b"))
		require.NoError(t, send("b"))
	})
}

func TestWaitingRequestsAreServedInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.URL.Query().Get("i"))
			mu.Unlock()
		})
		lim := limiters.NewTokenBucket(limiters.PerSecond(10), 1)
		tr := NewTransport(handlerTransport{h: h}, WithLimiter(lim))
		defer tr.Close()
		var want []string
		var wg sync.WaitGroup
		for i := range 20 {
			s := string(rune('a' + i))
			want = append(want, s)
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/?i="+s, nil))
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			})
			synctest.Wait()
		}
		start := time.Now()
		wg.Wait()
		assert.Equal(t, want, got)
		assert.Equal(t, 1900*time.Millisecond, time.Since(start))
	})
}

func TestObserverSeesAcquiredAndRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		kinds := map[EventKind]int{}
		var waited time.Duration
		lim := limiters.NewTokenBucket(limiters.PerSecond(1), 1)
		tr := NewTransport(handlerTransport{h: okHandler}, WithLimiter(lim), WithMaxWait(2*time.Second),
			WithObserver(func(e Event) {
				mu.Lock()
				kinds[e.Kind]++
				if e.Kind == EventAcquired {
					waited = max(waited, e.Wait)
				}
				mu.Unlock()
			}))
		defer tr.Close()
		for range 2 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil).WithContext(ctx))
		require.Error(t, err)
		assert.Equal(t, 2, kinds[EventAcquired])
		assert.Equal(t, 1, kinds[EventRejected])
		assert.Equal(t, time.Second, waited)
	})
}

// TestTransportOverLoopback runs the Transport over real sockets against a
// GitHub-style server (generous bounds: real time).
func TestTransportOverLoopback(t *testing.T) {
	a := githubAPI(30, time.Second, false)
	srv := httptest.NewServer(a)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := NewTransport(base)
	defer tr.Close()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var next atomic.Int32
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= 75 {
				for {
					resp, err := client.Get(srv.URL)
					if !assert.NoError(t, err) {
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	ok, limited := a.counts()
	t.Logf("%d ok, %d×429 in %v", ok, limited, time.Since(start))
	assert.Equal(t, 75, ok)
	assert.LessOrEqual(t, limited, 8)
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestRoundTripErrorFromBaseReleasesPermit(t *testing.T) {
	lim := limiters.NewConcurrency(1)
	failing := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("dial failed") })
	tr := NewTransport(failing, WithLimiter(lim))
	defer tr.Close()
	for range 3 {
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/", bytes.NewReader(nil)))
		require.Error(t, err)
	}
	assert.Equal(t, 1, lim.Stats().Available)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestInFlightRequestsCountAgainstRemaining: ten goroutines, a quota of 10
// per hour, 50 ms of latency. The answers that say "9 left", "8 left", …
// arrive after all ten requests are on the wire; the Transport must count
// those ten against what remains and send nothing more until the reset —
// no 429 at all.
func TestInFlightRequestsCountAgainstRemaining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := githubAPI(10, time.Hour, false)
		tr := NewTransport(handlerTransport{h: a, latency: 50 * time.Millisecond}, WithMaxWait(time.Minute))
		defer tr.Close()
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var ok, refused atomic.Int32
		for range 10 {
			wg.Go(func() {
				for range 2 {
					resp, err := client.Get("http://api.test/")
					if err != nil {
						var rej *limiters.RejectedError
						if assert.ErrorAs(t, err, &rej) {
							refused.Add(1)
						}
						continue
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		served, limited := a.counts()
		assert.Equal(t, 10, served)
		assert.Zero(t, limited, "no request was sent into an exhausted quota")
		assert.EqualValues(t, 10, ok.Load())
		assert.EqualValues(t, 10, refused.Load(), "the rest fail fast: the reset is past WithMaxWait")
	})
}

// TestLowQuotaIsSpreadUntilReset: with 5 of 100 left and a minute to the
// reset, a client with more work does not burn the 5 at once and then stall:
// it spreads them evenly until the reset.
func TestLowQuotaIsSpreadUntilReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		reset := start.Add(60 * time.Second)
		remaining := 6
		var sent []time.Duration
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sent = append(sent, time.Since(start))
			remaining--
			w.Header().Set("X-RateLimit-Limit", "100")
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		})
		tr := NewTransport(handlerTransport{h: h})
		defer tr.Close()
		for range 6 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		require.Len(t, sent, 6)
		// The first answer says 5 left with 60 s to go, in whole
		// seconds (rounded up, the window may end a second sooner):
		// the next goes at once, then one every 59s/5 = 11.8 s: spread
		// over the minute, all before the earliest the window may end.
		assert.Zero(t, sent[1])
		for i := 2; i < len(sent); i++ {
			assert.Equal(t, 11800*time.Millisecond, sent[i]-sent[i-1], "gap %d", i)
		}
		assert.Less(t, sent[5], 60*time.Second)
	})
}

// TestPartitionsAreForgotten: a client calling many hosts does not keep a
// gate for each forever; what the servers said nothing lasting about is
// swept, a few partitions at each new one, so that every stale one is gone
// after the next requests.
func TestPartitionsAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-RateLimit-Resource", "core") // a bucket's gate below each partition's
			w.Header().Set("X-RateLimit-Limit", "100")
			w.Header().Set("X-RateLimit-Remaining", "99")
			w.Header().Set("X-RateLimit-Reset", "60") // a minute from now
		})
		tr := NewTransport(handlerTransport{h: h})
		defer tr.Close()
		for i := range 5000 {
			if i == 2500 {
				time.Sleep(2 * time.Minute) // every quota so far is stale
			}
			resp, err := tr.RoundTrip(mustReq(t, "http://host"+strconv.Itoa(i)+".test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		tr.mu.RLock()
		n := len(tr.parts.ring)
		tr.mu.RUnlock()
		assert.Equal(t, 2500, n, "every stale partition was forgotten, every live one kept")
		assert.Equal(t, 2500, tr.Stats().Partitions/2, "a gate and its bucket's each")
	})
}

// wrapped is a user's own limiter: a wrapper that says nothing of permits.
type wrapped struct{ limiters.Limiter }

// spending is a repository that says its permits are spent when granted.
type spending struct{ repository.Repository }

func (spending) HoldsPermits() bool { return false }

// TestPermitsHeldAsTheLimiterSays: whether a response body carries a
// permit is limiters.HoldsPermits' answer, so a user's wrapper of a
// semaphore holds its permit until the body is done, and a repository that
// says its permits are spent gets no Release at all.
func TestPermitsHeldAsTheLimiterSays(t *testing.T) {
	t.Run("wrapped semaphore", func(t *testing.T) {
		lim := limiters.NewConcurrency(1)
		tr := NewTransport(handlerTransport{h: okHandler}, WithLimiter(wrapped{lim}))
		defer tr.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
		require.NoError(t, err)
		assert.Equal(t, 0, lim.Stats().Available, "held while the body is open")
		resp.Body.Close()
		assert.Equal(t, 1, lim.Stats().Available)
	})
	t.Run("repository whose permits are spent", func(t *testing.T) {
		repo := repository.NewMemory(func(string) limiters.Limiter { return limiters.NewConcurrency(1) })
		tr := NewTransport(handlerTransport{h: okHandler}, WithRepository(spending{repo}))
		defer tr.Close()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/", nil))
		require.NoError(t, err)
		_, isRelease := resp.Body.(*releaseBody)
		assert.False(t, isRelease, "nothing to give back")
		resp.Body.Close()
		d, err := repo.TryAcquire(t.Context(), "api.test", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "the Transport took the repository at its word")
	})
}
