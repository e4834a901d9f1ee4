package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/feedbackstore"
	"github.com/throttlekit/throttle/limiters"
)

// outage answers 429 with Retry-After: 1 to every request until its end,
// and an empty 200 after it.
func outageAPI(end time.Time) *api {
	return &api{decide: func(now time.Time, h http.Header) bool {
		if now.Before(end) {
			h.Set("Retry-After", "1")
			return false
		}
		return true
	}}
}

// fleet is n Transports, each with its own store client (s, or none when
// s is nil), sending to h in memory with latency each way.
func fleet(n int, s FeedbackStore, h http.Handler, latency time.Duration, opts ...Option) []*Transport {
	ts := make([]*Transport, n)
	for i := range ts {
		o := append([]Option(nil), opts...)
		if s != nil {
			o = append(o, WithFeedbackStore(s))
		}
		ts[i] = NewTransport(handlerTransport{h: h, latency: latency}, o...)
	}
	return ts
}

// work sends total requests through the fleet, workers goroutines per
// Transport, each request retried until admitted.
func work(t *testing.T, ts []*Transport, workers, total int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, tr := range ts {
		c := &http.Client{Transport: tr}
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= int64(total) {
					for {
						resp, err := c.Get("http://api.test/v1")
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
	}
	wg.Wait()
	for _, tr := range ts {
		tr.Close()
	}
}

// TestFleetSendsOneProbePerPause: four Transports × five goroutines sharing
// a MemoryFeedbackStore wait out a five-second outage that answers
// Retry-After: 1. Each pause ends with one probe for the whole fleet, so
// the server refuses one request per pause; without the store, each
// Transport probes for itself.
func TestFleetSendsOneProbePerPause(t *testing.T) {
	run := func(s FeedbackStore) (limited int) {
		synctest.Test(t, func(t *testing.T) {
			a := outageAPI(time.Now().Add(5 * time.Second))
			ts := fleet(4, s, a, 10*time.Millisecond)
			// The first refusal, before the fleet is busy: it starts the
			// first pause.
			resp, err := ts[0].RoundTrip(mustReq(t, "http://api.test/v1", nil))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			work(t, ts, 5, 100)
			ok, l := a.counts()
			assert.Equal(t, 100, ok)
			limited = l
		})
		return limited
	}
	shared := run(NewMemoryFeedbackStore())
	// The first refusal (answered at 20 ms: a pause until 1.02 s), then
	// the one probe at the end of each pause that ends inside the outage
	// (1.02, 2.04, 3.06, 4.08 s; the probe of 5.1 s is admitted).
	assert.Equal(t, 5, shared, "429s with a shared store")
	alone := run(nil)
	assert.GreaterOrEqual(t, alone, 3*shared, "429s without a store (%d with)", shared)
	t.Logf("429s over a 5 s outage: %d with a shared store, %d without", shared, alone)
}

// quotaAPI is a fixed window of limit requests on the epoch, answered with
// X-RateLimit-* (the reset in epoch seconds) and Retry-After on 429s.
func quotaAPI(limit int, window time.Duration) *api {
	f := &fixedWindow{limit: limit, window: window}
	return &api{decide: func(now time.Time, h http.Header) bool {
		ok, rem, end := f.hit(now)
		h.Set("X-RateLimit-Limit", fmt.Sprint(limit))
		h.Set("X-RateLimit-Remaining", fmt.Sprint(rem))
		h.Set("X-RateLimit-Reset", fmt.Sprint(end.Unix()))
		if !ok {
			h.Set("Retry-After", fmt.Sprint(int(end.Sub(now).Seconds()+0.999)))
		}
		return ok
	}}
}

// TestFleetSharesAQuota: eight Transports × ten goroutines spend a quota of
// 100 a second in five windows' worth of requests. Sharing what remains
// less what the fleet has on the wire, they are refused a handful of times
// at most and take at most 1.2× the ideal time; each alone spends "what
// remains" eight times over (hundreds of 429s).
func TestFleetSharesAQuota(t *testing.T) {
	run := func(s FeedbackStore) (limited int, took time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			a := quotaAPI(100, time.Second)
			ts := fleet(8, s, a, 5*time.Millisecond)
			start := time.Now()
			work(t, ts, 10, 500)
			took = time.Since(start)
			_, limited = a.counts()
		})
		return limited, took
	}
	ideal := 4 * time.Second // 500 at 100 a window: the fifth window starts 4 s in
	limited, took := run(NewMemoryFeedbackStore())
	assert.LessOrEqual(t, limited, 5, "429s with a shared store")
	assert.LessOrEqual(t, took, ideal*12/10, "elapsed with a shared store")
	alone, tookAlone := run(nil)
	t.Logf("500 requests, 8 Transports × 10 goroutines, 100/s: %d 429s in %v with a shared store; %d in %v without",
		limited, took, alone, tookAlone)
	assert.Greater(t, alone, 5*limited)
}

// countingStore counts the calls made to a store, and fails them all when
// down is set.
type countingStore struct {
	FeedbackStore
	calls atomic.Int64
	down  atomic.Bool
}

var errDown = errors.New("store down")

func (c *countingStore) call() error {
	c.calls.Add(1)
	if c.down.Load() {
		return errDown
	}
	return nil
}

func (c *countingStore) Pause(ctx context.Context, key, id string, until time.Time) error {
	if err := c.call(); err != nil {
		return err
	}
	return c.FeedbackStore.Pause(ctx, key, id, until)
}

func (c *countingStore) Resume(ctx context.Context, key, id string) error {
	if err := c.call(); err != nil {
		return err
	}
	return c.FeedbackStore.Resume(ctx, key, id)
}

func (c *countingStore) Probe(ctx context.Context, key, id string, d time.Duration) (time.Time, error) {
	if err := c.call(); err != nil {
		return time.Time{}, err
	}
	return c.FeedbackStore.Probe(ctx, key, id, d)
}

func (c *countingStore) Claim(ctx context.Context, key string) (feedbackstore.Grant, error) {
	if err := c.call(); err != nil {
		return feedbackstore.Grant{}, err
	}
	return c.FeedbackStore.Claim(ctx, key)
}

func (c *countingStore) Settle(ctx context.Context, key string, g feedbackstore.Grant, q feedbackstore.SharedQuota) error {
	if err := c.call(); err != nil {
		return err
	}
	return c.FeedbackStore.Settle(ctx, key, g, q)
}

// TestQuietPartitionMakesNoStoreCall: requests through a partition whose
// server says nothing of its limits make no call to the store.
func TestQuietPartitionMakesNoStoreCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{FeedbackStore: NewMemoryFeedbackStore()}
		a := &api{decide: func(time.Time, http.Header) bool { return true }}
		work(t, fleet(2, s, a, time.Millisecond), 3, 60)
		assert.Zero(t, s.calls.Load())
	})
}

// TestStoreDownFallsBackToLocal: with every call to the store failing, a
// Transport still honours what it learned itself (one 429 and its pause),
// and its observer hears of the outage once.
func TestStoreDownFallsBackToLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{FeedbackStore: NewMemoryFeedbackStore()}
		s.down.Store(true)
		a := outageAPI(time.Now().Add(500 * time.Millisecond))
		var events []Event
		var mu sync.Mutex
		tr := NewTransport(handlerTransport{h: a, latency: time.Millisecond}, WithFeedbackStore(s),
			WithObserver(func(e Event) {
				if e.Kind == EventStoreUnavailable {
					mu.Lock()
					events = append(events, e)
					mu.Unlock()
				}
			}))
		work(t, []*Transport{tr}, 4, 20)
		ok, limited := a.counts()
		assert.Equal(t, 20, ok)
		assert.LessOrEqual(t, limited, 4, "the in-flight requests of the first moment, then the pause")
		require.Len(t, events, 1)
		assert.ErrorIs(t, events[0].Err, errDown)
		assert.Equal(t, "api.test", events[0].Key)
		assert.NotZero(t, s.calls.Load())
	})
}

// TestProbeAnswerThatPausesNothingResumesTheFleet: after a pause, the
// elected prober's answer (here a 404) pauses nothing, so the Transport
// that lost the election goes at once instead of waiting out the lease.
func TestProbeAnswerThatPausesNothingResumesTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.WriteHeader(http.StatusNotFound)
		})
		ts := fleet(2, NewMemoryFeedbackStore(), h, 10*time.Millisecond)
		defer ts[0].Close()
		defer ts[1].Close()
		resp, err := ts[0].RoundTrip(mustReq(t, "http://api.test/v1", nil))
		require.NoError(t, err)
		resp.Body.Close()
		start := time.Now()
		var wg sync.WaitGroup
		for _, tr := range ts {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/v1", nil))
				if assert.NoError(t, err) {
					resp.Body.Close()
					assert.Equal(t, http.StatusNotFound, resp.StatusCode)
				}
			})
		}
		wg.Wait()
		assert.Less(t, time.Since(start), 1100*time.Millisecond, "the pause, two round trips, not the probe lease")
	})
}

// settleCounter counts claims granted and claims settled.
type settleCounter struct {
	FeedbackStore
	claims, settled atomic.Int64
}

func (c *settleCounter) Claim(ctx context.Context, key string) (feedbackstore.Grant, error) {
	g, err := c.FeedbackStore.Claim(ctx, key)
	if g.Seq > 0 {
		c.claims.Add(1)
	}
	return g, err
}

func (c *settleCounter) Settle(ctx context.Context, key string, g feedbackstore.Grant, q feedbackstore.SharedQuota) error {
	if g.Seq > 0 {
		c.settled.Add(1)
	}
	return c.FeedbackStore.Settle(ctx, key, g, q)
}

// TestClaimOfARequestNeverSentGoesBack: a request that claimed a unit of
// the fleet's quota and then was refused by the Transport's own limiter
// gives its claim back.
func TestClaimOfARequestNeverSentGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &settleCounter{FeedbackStore: NewMemoryFeedbackStore()}
		tr := NewTransport(handlerTransport{h: quotaAPI(100, time.Second), latency: time.Millisecond},
			WithFeedbackStore(s), WithLimiter(limiters.NewConcurrency(1)), WithMaxWait(10*time.Millisecond))
		defer tr.Close()
		held, err := tr.RoundTrip(mustReq(t, "http://api.test/v1", nil)) // learns the quota; holds the permit
		require.NoError(t, err)
		_, err = tr.RoundTrip(mustReq(t, "http://api.test/v1", nil))
		require.ErrorIs(t, err, limiters.ErrRateLimited)
		held.Body.Close()
		assert.Equal(t, int64(1), s.claims.Load())
		assert.Equal(t, int64(1), s.settled.Load())
	})
}

// TestMemoryFeedbackStoreForgets: leases that ran out and quotas whose
// reset passed are forgotten once many keys were used.
func TestMemoryFeedbackStoreForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryFeedbackStore().(*memoryFeedbackStore)
		reset := time.Now().Add(time.Second)
		for i := range 3 * maxIdleGates {
			key := fmt.Sprint(i)
			_, err := s.Probe(ctx, key, "a", time.Second)
			require.NoError(t, err)
			g, err := s.Claim(ctx, key)
			require.NoError(t, err)
			require.NoError(t, s.Settle(ctx, key, g, feedbackstore.SharedQuota{Known: true, Remaining: 1, Reset: reset}))
			if i == maxIdleGates {
				time.Sleep(2 * time.Second) // what came before has run out
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		assert.LessOrEqual(t, len(s.probes), 2*maxIdleGates+2)
		assert.LessOrEqual(t, len(s.quotas), 2*maxIdleGates+2)
		assert.Contains(t, s.quotas, fmt.Sprint(3*maxIdleGates-1), "a key in use is kept")
	})
}

// lateLoserStore is a memory FeedbackStore whose answer to a Transport
// that lost the election comes late: only once the winner's probe has
// been answered and its notice that the pause is over published (to a
// Transport not yet holding, which it finds with nothing to resume).
type lateLoserStore struct{ *memoryFeedbackStore }

func (s lateLoserStore) Probe(ctx context.Context, key, id string, lease time.Duration) (time.Time, error) {
	held, err := s.memoryFeedbackStore.Probe(ctx, key, id, lease)
	for !held.IsZero() {
		s.mu.Lock()
		_, leased := s.probes[key]
		s.mu.Unlock()
		if !leased { // the winner's Resume ended its lease
			break
		}
		time.Sleep(time.Millisecond)
	}
	return held, err
}

// TestLoserOfTheElectionMissingTheNoticeAsksAgain: two Transports share a
// store; the outage ends, both probe, one wins, and the other hears it
// lost only after the winner's "resume" went by. It must not wait out the
// winner's whole lease (five seconds): it asks the store again after
// probeRecheck. (Against a real Redis, TestFeedbackStoreSharesAQuota took
// five seconds longer in about one run in four.)
func TestLoserOfTheElectionMissingTheNoticeAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := outageAPI(start.Add(time.Second))
		ts := fleet(2, lateLoserStore{NewMemoryFeedbackStore().(*memoryFeedbackStore)}, a, 10*time.Millisecond)
		resp, err := ts[0].RoundTrip(mustReq(t, "http://api.test/v1", nil))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		synctest.Wait() // the pause notice reaches the other Transport
		work(t, ts, 1, 2)
		took := time.Since(start)
		assert.Less(t, took, time.Second+probeRecheck+200*time.Millisecond, "the loser waited out the lease")
		t.Logf("done after %v", took)
	})
}
