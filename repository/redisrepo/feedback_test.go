package redisrepo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/feedbackstore"
	"github.com/throttlekit/throttle/internal/testutil/apisim"
	"github.com/throttlekit/throttle/internal/testutil/feedbacktest"
	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/keyextract"
)

// fleetOf returns n Transports, each with its own Redis client and
// FeedbackStore on s (none when s is nil), partitioned by API key; all
// closed when t ends. A failed call to the store fails t.
func fleetOf(t *testing.T, s *redistest.Server, n int, opts ...throttle.Option) []*throttle.Transport {
	t.Helper()
	ts := make([]*throttle.Transport, n)
	for i := range ts {
		o := append([]throttle.Option{throttle.WithKey(keyextract.Header("X-API-Key")),
			throttle.WithObserver(func(e throttle.Event) {
				if e.Kind == throttle.EventStoreUnavailable {
					t.Errorf("the store failed: %v", e.Err)
				}
			})}, opts...)
		if s != nil {
			fs := NewFeedbackStore(newClient(t, s))
			t.Cleanup(func() { fs.Close() })
			o = append(o, throttle.WithFeedbackStore(fs))
		}
		tr := throttle.NewTransport(&http.Transport{MaxIdleConnsPerHost: 100}, o...)
		t.Cleanup(func() { tr.Close(); tr.CloseIdleConnections() })
		ts[i] = tr
	}
	return ts
}

// send sends one GET with the API key and returns its status.
func send(t *testing.T, rt http.RoundTripper, url, key string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", key)
	resp, err := rt.RoundTrip(req)
	if !assert.NoError(t, err) {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// drive sends total requests through the fleet, workers goroutines per
// Transport, each retried until admitted.
func drive(t *testing.T, ts []*throttle.Transport, workers, total int, url, key string) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, tr := range ts {
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= int64(total) {
					for tries := 0; send(t, tr, url, key) != http.StatusOK; tries++ {
						if !assert.Less(t, tries, 100) {
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
}

// outage counts per API key the requests it refused, and when: every
// request is refused with Retry-After: 1 until the outage's end, admitted
// after.
type outage struct {
	end     time.Time
	mu      sync.Mutex
	limited map[string]int
	times   []time.Time
}

// perPause is how many refusals each pause took: refusals less than half a
// second after the first of a pause belong to it (pauses are a second).
func (o *outage) perPause() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n []int
	var first time.Time
	for _, at := range o.times {
		if len(n) == 0 || at.Sub(first) >= 500*time.Millisecond {
			n, first = append(n, 0), at
		}
		n[len(n)-1]++
	}
	return n
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if now := time.Now(); now.Before(o.end) {
		o.mu.Lock()
		o.limited[r.Header.Get("X-API-Key")]++
		o.times = append(o.times, now)
		o.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// TestFeedbackStoreOneRefusalPerPause: four Transports × five goroutines,
// each Transport with its own Redis client, wait out a four-second outage
// of their API key that answers Retry-After: 1. Sharing pauses and
// electing one prober, the fleet is refused once per pause, not once per
// Transport; a second key, never refused, is untouched.
func TestFeedbackStoreOneRefusalPerPause(t *testing.T) {
	s := redistest.Start(t)
	run := func(s *redistest.Server) []int {
		o := &outage{end: time.Now().Add(4 * time.Second), limited: map[string]int{}}
		srv := httptest.NewServer(o)
		defer srv.Close()
		ts := fleetOf(t, s, 4)
		// The refusal that starts the first pause, before the fleet is busy.
		require.Equal(t, http.StatusTooManyRequests, send(t, ts[0], srv.URL, "k1"))
		time.Sleep(50 * time.Millisecond) // the notice is on its way to the other processes
		drive(t, ts, 5, 40, srv.URL, "k1")
		return o.perPause()
	}
	shared := run(s)
	alone := run(nil)
	t.Logf("429s per pause over a 4 s outage, 4 Transports × 5 goroutines: %v sharing a FeedbackStore on Redis, %v alone", shared, alone)
	assert.GreaterOrEqual(t, len(shared), 4)
	for i, n := range shared {
		assert.Equal(t, 1, n, "pause %d", i)
	}
	assert.Greater(t, slices.Max(alone), 1)
}

// TestFeedbackStoreSharesAQuota: eight Transports × ten goroutines, each
// Transport with its own Redis client, spend 500 requests of a quota of
// 100 a second (internal/testutil/apisim's Quota) in at most 1.5× the ideal time
// (1.04× quiet; 1.17× on 2 cores beside two CPU-bound processes),
// refused a handful of times at most (10: most runs see 0, a loaded
// machine under -race has shown 6); alone, each Transport spends what
// remains as if it were the only one (hundreds of 429s).
func TestFeedbackStoreSharesAQuota(t *testing.T) {
	s := redistest.Start(t)
	run := func(s *redistest.Server) (refused int64, took, ideal time.Duration) {
		q := apisim.NewQuota(100, time.Second, "X-API-Key")
		srv := httptest.NewServer(q)
		defer srv.Close()
		ts := fleetOf(t, s, 8)
		// Start 20 ms into a window: the fifth window starts 3.98 s later.
		now := time.Now()
		time.Sleep(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now))
		start := time.Now()
		drive(t, ts, 10, 500, srv.URL, "key")
		return q.Snapshot().Refused, time.Since(start), start.Truncate(time.Second).Add(4 * time.Second).Sub(start)
	}
	refused, took, ideal := run(s)
	t.Logf("500 requests at 100/s, 8 Transports × 10 goroutines sharing a FeedbackStore on Redis: %d 429s, %v (ideal %v, %.2fx)",
		refused, took.Round(time.Millisecond), ideal, float64(took)/float64(ideal))
	assert.LessOrEqual(t, refused, int64(10), "a handful: 0 in most runs; a loaded machine under -race has shown 6")
	assert.LessOrEqual(t, took, ideal*15/10+100*time.Millisecond, "a loaded machine adds latency: 1.17x has been seen")
	alone, tookAlone, _ := run(nil)
	t.Logf("alone: %d 429s, %v", alone, tookAlone.Round(time.Millisecond))
	assert.Greater(t, alone, 3*refused)
}

// TestFeedbackStoreQuietPartitionNoRoundTrip: requests through a partition
// whose server says nothing of its limits make no round trip to Redis.
func TestFeedbackStoreQuietPartitionNoRoundTrip(t *testing.T) {
	s := redistest.Start(t)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	c := newClient(t, s)
	var calls atomic.Int64
	c.AddHook(countHook{&calls})
	fs := NewFeedbackStore(c)
	defer fs.Close()
	tr := throttle.NewTransport(nil, throttle.WithFeedbackStore(fs))
	defer tr.Close()
	before := calls.Load() // the subscription
	for range 50 {
		assert.Equal(t, http.StatusOK, send(t, tr, srv.URL, "k"))
	}
	assert.Equal(t, before, calls.Load())
	tr.CloseIdleConnections()
}

type countHook struct{ n *atomic.Int64 }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestFeedbackStoreRedisDown: with Redis gone, a Transport tells its
// observer once (EventStoreUnavailable, an error matching ErrUnavailable)
// and goes on with what it learned itself: it still honours its own pause.
func TestFeedbackStoreRedisDown(t *testing.T) {
	s := redistest.Start(t)
	o := &outage{end: time.Now().Add(1500 * time.Millisecond), limited: map[string]int{}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	defer c.Close()
	fs := NewFeedbackStore(c)
	defer fs.Close()
	var events []throttle.Event
	var mu sync.Mutex
	tr := throttle.NewTransport(nil, throttle.WithFeedbackStore(fs), throttle.WithKey(keyextract.Header("X-API-Key")),
		throttle.WithObserver(func(e throttle.Event) {
			if e.Kind == throttle.EventStoreUnavailable {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		}))
	defer tr.Close()
	s.Stop()
	drive(t, []*throttle.Transport{tr}, 1, 3, srv.URL, "k")
	tr.CloseIdleConnections()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, 1)
	assert.True(t, errors.Is(events[0].Err, ErrUnavailable), "%v", events[0].Err)
	assert.LessOrEqual(t, o.limited["k"], 3, "one refusal per pause of a second: the Transport's own")
}

// TestFeedbackStoreContract holds the Redis store to the contract every
// store keeps (internal/testutil/feedbacktest), its clock Redis's.
func TestFeedbackStoreContract(t *testing.T) {
	require.Equal(t, feedbacktest.Blind, blind)
	s := redistest.Start(t)
	fs := NewFeedbackStore(newClient(t, s))
	defer fs.Close()
	feedbacktest.Contract(t, fs, 5*time.Millisecond)
}

// TestFeedbackStoreLateJoiner: a Transport created (with its own client
// and store: a new replica of the fleet) while another's pause is in force
// honours it: its first request reaches the server only once the pause
// ends, not at once.
func TestFeedbackStoreLateJoiner(t *testing.T) {
	s := redistest.Start(t)
	var mu sync.Mutex
	var refusedAt time.Time
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if refusedAt.IsZero() {
			refusedAt = time.Now()
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		arrivals = append(arrivals, time.Now())
	}))
	defer srv.Close()
	first := fleetOf(t, s, 1)[0]
	require.Equal(t, http.StatusTooManyRequests, send(t, first, srv.URL, "k"))
	time.Sleep(100 * time.Millisecond)
	late := fleetOf(t, s, 1)[0]
	assert.Equal(t, http.StatusOK, send(t, late, srv.URL, "k"))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, arrivals, 1)
	waited := arrivals[0].Sub(refusedAt)
	t.Logf("the late joiner's first request reached the server %v after the 429 (Retry-After: 2)", waited.Round(time.Millisecond))
	assert.GreaterOrEqual(t, waited, 2*time.Second-50*time.Millisecond, "the late joiner did not honour the pause in force")
}

// TestFeedbackStoreFairShares: three processes (each a Transport with its
// own client and store, five goroutines each) sharing one quota through the
// store each send 120 requests: they finish within 20% of each other.
// While the store counted each window's claims afresh, the process that
// got the CPU first won the unmetered claims at each reset and the last
// permits of each window (23–25 of 60 against 17, window after window),
// and a loaded run spread 29%; and while the processes waiting for a
// window did not count as asking at its start, the prober's took 35–37 of
// 60 there (33–44% apart, a few runs in twenty beside two CPU hogs). Now
// forty such runs spread 0.3–1.8%.
func TestFeedbackStoreFairShares(t *testing.T) {
	s := redistest.Start(t)
	q := apisim.NewQuota(60, time.Second, "X-API-Key")
	srv := httptest.NewServer(q)
	defer srv.Close()
	ts := fleetOf(t, s, 3)
	const each = 120
	start := time.Now()
	took := make([]time.Duration, len(ts))
	var all sync.WaitGroup
	for i, tr := range ts {
		all.Go(func() {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 5 {
				wg.Go(func() {
					for next.Add(1) <= each {
						for tries := 0; send(t, tr, srv.URL, "key") != http.StatusOK; tries++ {
							if !assert.Less(t, tries, 100) {
								return
							}
						}
					}
				})
			}
			wg.Wait()
			took[i] = time.Since(start)
		})
	}
	all.Wait()
	lo, hi := slices.Min(took), slices.Max(took)
	t.Logf("3 processes × %d requests at 60/s through one quota: finished after %v (spread %.1f%%); %d refused",
		each, took, 100*(float64(hi)/float64(lo)-1), q.Snapshot().Refused)
	assert.LessOrEqual(t, float64(hi), 1.2*float64(lo), "the processes' shares are not fair")
}

// TestFeedbackStoreClaimsCountAcrossWindows: what one window's split left
// unequal is made up in the next: a store that ended a window ten claims
// ahead is held in the next while the other asks, and a store new to the
// quota starts level with the least served, owed nothing.
func TestFeedbackStoreClaimsCountAcrossWindows(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	a, b, c := NewFeedbackStore(newClient(t, s)), NewFeedbackStore(newClient(t, s)), NewFeedbackStore(newClient(t, s))
	defer a.Close()
	defer b.Close()
	defer c.Close()
	const key = "api"
	reset := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	rem := int64(100)
	require.NoError(t, a.Settle(ctx, key, feedbackstore.Grant{}, feedbackstore.SharedQuota{Known: true, Remaining: rem, Reset: reset}))
	take := func(st *FeedbackStore) feedbackstore.Grant {
		t.Helper()
		return claimSettled(t, ctx, st, key, &rem, reset)
	}
	// b asks for the probe while a claims: it counts as asking throughout.
	asks := func() {
		_, err := b.Probe(ctx, key, "b", time.Millisecond)
		require.NoError(t, err)
	}
	require.NotZero(t, take(b).Seq)
	asks()
	for range 11 {
		require.NotZero(t, take(a).Seq, "room is plenty: a is not held")
	}
	// The next window: 8 remain, a is 11 claims ahead of b, who asks.
	reset, rem = reset.Add(time.Minute), 8
	require.NoError(t, a.Settle(ctx, key, feedbackstore.Grant{}, feedbackstore.SharedQuota{Known: true, Remaining: rem, Reset: reset}))
	asks()
	g := take(a)
	assert.Zero(t, g.Seq, "a, ahead from the last window, claimed while b asks")
	assert.False(t, g.Spent)
	require.NotZero(t, take(b).Seq, "b, behind, is held")
	// c joins: it starts level with b (2 claims), not at 0.
	asks()
	require.NotZero(t, take(c).Seq)
	v, err := newClient(t, s).HGet(ctx, a.key(key, "quota"), "n:"+c.id).Result()
	require.NoError(t, err)
	assert.Equal(t, "3", claimCount(t, v), "c's count after its first claim (%q)", v)
	// Past a reset, before an answer tells the new window, a newcomer
	// starts level with those that claimed too.
	const gap = "gap"
	require.NoError(t, a.Settle(ctx, gap, feedbackstore.Grant{}, feedbackstore.SharedQuota{Known: true, Remaining: 100, Reset: time.Now().Add(-time.Second)}))
	for range 5 {
		g, err := a.Claim(ctx, gap)
		require.NoError(t, err)
		require.NotZero(t, g.Seq, "past the reset nothing holds a claim back")
	}
	d := NewFeedbackStore(newClient(t, s))
	defer d.Close()
	g, err = d.Claim(ctx, gap)
	require.NoError(t, err)
	require.NotZero(t, g.Seq)
	v, err = newClient(t, s).HGet(ctx, d.key(gap, "quota"), "n:"+d.id).Result()
	require.NoError(t, err)
	assert.Equal(t, "6", claimCount(t, v), "d's count after its first claim past the reset (%q)", v)
}

// claimCount is the count in a store's field of a shared quota.
func claimCount(t *testing.T, v string) string {
	t.Helper()
	_, rest, _ := strings.Cut(v, ":")
	count, _, _ := strings.Cut(rest, ":")
	return count
}

// TestFeedbackStoreWindowStart: a store whose last claim was in the last
// window counts as asking for a moment after it ends (its Transport waits
// for the new window without claiming), so the store that claims first in
// the new window is held to its equal part of the room.
func TestFeedbackStoreWindowStart(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	a, b := NewFeedbackStore(newClient(t, s)), NewFeedbackStore(newClient(t, s))
	defer a.Close()
	defer b.Close()
	const key = "start"
	end := time.Now().Add(150 * time.Millisecond).Truncate(time.Millisecond)
	rem := int64(100)
	take := func(st *FeedbackStore, reset time.Time) feedbackstore.Grant {
		t.Helper()
		return claimSettled(t, ctx, st, key, &rem, reset)
	}
	require.NoError(t, a.Settle(ctx, key, feedbackstore.Grant{}, feedbackstore.SharedQuota{Known: true, Remaining: rem, Reset: end}))
	require.NotZero(t, take(b, end).Seq)
	for range 4 {
		require.NotZero(t, take(a, end).Seq, "room is plenty")
	}
	// b waits for the next window; a, four ahead (it started level with
	// b's 1), is first in it.
	time.Sleep(time.Until(end) + 20*time.Millisecond)
	next := end.Add(time.Minute)
	rem = 11
	require.NoError(t, a.Settle(ctx, key, feedbackstore.Grant{}, feedbackstore.SharedQuota{Known: true, Remaining: rem, Reset: next}))
	require.NotZero(t, take(a, next).Seq, "a, four ahead of b, may take one of 11 (its part: 5)")
	g := take(a, next)
	// b counts as asking for asking (500ms) past the window's end: on a
	// machine slower than that here, a may take the room, as it should.
	if late := time.Since(end); late < asking {
		assert.Zero(t, g.Seq, "a took more than its part while b waits for the window")
	} else {
		t.Logf("%v past the window's end: b no longer counts as asking", late)
	}
}

// claimSettled claims key at st and, when granted, settles the claim with
// one unit fewer of *rem remaining until reset, as an answer would.
func claimSettled(t *testing.T, ctx context.Context, st *FeedbackStore, key string, rem *int64, reset time.Time) feedbackstore.Grant {
	t.Helper()
	g, err := st.Claim(ctx, key)
	require.NoError(t, err)
	if g.Seq > 0 {
		*rem--
		require.NoError(t, st.Settle(ctx, key, g, feedbackstore.SharedQuota{Known: true, Remaining: *rem, Reset: reset}))
	}
	return g
}
