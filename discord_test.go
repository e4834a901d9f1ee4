package throttle

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// discordBot posts perChannel messages to each of channels Discord
// channels (POST /api/v10/channels/{id}/messages, 5 per 5 s each), the
// channels interleaved, from workers goroutines that each retry a
// refused message until it goes. It returns how long that took, the
// simulator's counts, and how many requests reached it while a global
// refusal's wait held, after that refusal's answer was back.
func discordBot(t *testing.T, channels, perChannel, workers int, seed uint64) (time.Duration, apisim.Stats, int) {
	t.Helper()
	d := apisim.NewDiscord(apisim.DiscordConfig{})
	var mu sync.Mutex
	var known, until time.Time // the last global refusal's answer is back by known; its wait ends at until
	inPause := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		mu.Lock()
		if now.After(known) && now.Before(until) {
			inPause++
		}
		mu.Unlock()
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, r)
		if wait, ok := discordRetryAfter(rec.Body.Bytes()); ok && rec.Header().Get("X-RateLimit-Scope") == "global" {
			mu.Lock()
			// Its answer is back within a way back and a jittered way
			// there of the next request.
			known, until = now.Add(20*time.Millisecond+30*time.Millisecond), now.Add(wait)
			mu.Unlock()
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
	tr := NewTransport(&apisim.Transport{Handler: h, Latency: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: seed})
	defer tr.Close()
	client := &http.Client{Transport: tr}
	jobs := make(chan string, channels*perChannel)
	for range perChannel {
		for c := 1; c <= channels; c++ {
			jobs <- fmt.Sprintf("http://discord.test/api/v10/channels/%d/messages", c)
		}
	}
	close(jobs)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for url := range jobs {
				untilOK(t, client, func() *http.Request {
					req, err := http.NewRequest(http.MethodPost, url, nil)
					require.NoError(t, err)
					return req
				})
			}
		})
	}
	wg.Wait()
	return time.Since(start), d.Snapshot(), inPause
}

// TestDiscordChannelsApart: Discord's bucket hash is the same for every
// channel's messages, and each channel's limit is counted apart; four
// channels take as long as one: six windows of 5 s for thirty messages
// each. Counted as one bucket, they took 30.8 s, and the windows they
// shared were half spent.
func TestDiscordChannelsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		took, st, _ := discordBot(t, 4, 30, 20, 1)
		t.Logf("%v, %d refused", took, st.Refused)
		assert.EqualValues(t, 120, st.Admitted)
		assert.LessOrEqual(t, st.Refused, int64(4), "the first window's, at most one a channel")
		assert.Less(t, took, 26*time.Second)
	})
}

// TestDiscordGlobalLimit: a hundred or two hundred channels, five
// messages each: the channels' limits allow them all at once, Discord's
// global limit (50 a second) does not. Its refusals name no bucket: the
// partition's gate, which every request passes once Discord's buckets are
// known, paces the partition at the documented fifty a second and learns
// from them. Learned in each channel's gate instead, the first run drew
// 180 refusals; learned from alone, with no documented rate, 20 and
// 1.27x.
func TestDiscordGlobalLimit(t *testing.T) {
	for _, tc := range []struct {
		channels, workers int
		refusals          int64
		took              time.Duration
	}{
		{100, 20, 5, 11 * time.Second},
		{200, 50, 8, 22 * time.Second},
	} {
		t.Run(fmt.Sprintf("%d channels, %d goroutines", tc.channels, tc.workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				took, st, inPause := discordBot(t, tc.channels, 5, tc.workers, 1)
				global := st.ByKey["global"].Refused
				t.Logf("%v, %d refused (%d global)", took, st.Refused, global)
				assert.EqualValues(t, 5*tc.channels, st.Admitted)
				assert.Equal(t, global, st.Refused, "every refusal the global limit's")
				assert.LessOrEqual(t, global, tc.refusals)
				assert.Zero(t, inPause, "requests sent while a global refusal's wait held")
				// At fifty a second: 10 s, 20 s.
				assert.Less(t, took, tc.took)
			})
		})
	}
}

// TestDiscordRetryAfterBody: the retry_after of a Discord refusal's body,
// to the millisecond; anything else is not a wait.
func TestDiscordRetryAfterBody(t *testing.T) {
	for body, want := range map[string]time.Duration{
		`{"message": "You are being rate limited.", "retry_after": 0.412, "global": true}`: 412 * time.Millisecond,
		`{"retry_after": 64.57}`: 64570 * time.Millisecond,
		`{"retry_after": 0}`:     0,
	} {
		d, ok := discordRetryAfter([]byte(body))
		assert.True(t, ok, body)
		assert.InDelta(t, want, d, float64(time.Microsecond), body)
	}
	for _, body := range []string{``, `{}`, `null`, `[1]`, `{"retry_after": -1}`, `{"retry_after": "1"}`,
		`{"retry_after": 1e300}`, `{"retry_after": null}`, `{"retry_after": 1`, `<html>429</html>`} {
		_, ok := discordRetryAfter([]byte(body))
		assert.False(t, ok, body)
	}
}

// TestDiscordInteractionsNotPaced: Discord's interaction endpoints are
// not bound to the global limit, and an interaction's answer is due
// within three seconds: a callback does not wait in the queue of the
// global pace, however long it is — the first ones, their family not
// learned yet, go through its scout (scout), not the partition's gate.
func TestDiscordInteractionsNotPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := apisim.NewDiscord(apisim.DiscordConfig{Routes: []apisim.DiscordRoute{
			{Method: http.MethodPost, Template: "/channels/{id}/messages", Bucket: "m", Limit: 5, Window: 5 * time.Second},
			{Method: http.MethodPost, Template: "/interactions/{id}/{id}/callback", Bucket: "cb", Limit: 1000, Window: time.Second},
		}})
		tr := NewTransport(&apisim.Transport{Handler: d, Latency: 20 * time.Millisecond})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		post := func(path string) {
			resp, err := client.Post("http://discord.test/api/v10"+path, "application/json", nil)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		post("/channels/1/messages")
		// Four hundred messages to a hundred channels: eight seconds of
		// the global pace's queue.
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				for i := range 20 {
					post(fmt.Sprintf("/channels/%d/messages", 2+(g*20+i)%100))
				}
			})
		}
		time.Sleep(time.Second)
		var took [10]time.Duration
		var cb sync.WaitGroup
		for i := range took {
			cb.Go(func() {
				start := time.Now()
				post(fmt.Sprintf("/interactions/%d/tok/callback", 2+i))
				took[i] = time.Since(start)
			})
		}
		cb.Wait()
		for i, d := range took {
			assert.Less(t, d, 100*time.Millisecond, "callback %d", i)
		}
		wg.Wait()
		assert.Zero(t, d.Snapshot().ByKey["cb "].Refused)
	})
}

// TestDiscordNewChannelFirstWave: a channel not posted to yet gets a
// gate of its own at once (its family's hash, counted for it), which
// knows nothing of it but what the family's answers told: five messages
// a window. Twenty goroutines posting to it send five before its first
// answer, not ten, and none is refused (five were).
func TestDiscordNewChannelFirstWave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := apisim.NewDiscord(apisim.DiscordConfig{})
		tr := NewTransport(&apisim.Transport{Handler: d, Latency: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		post := func(channel int) {
			untilOK(t, client, func() *http.Request {
				req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://discord.test/api/v10/channels/%d/messages", channel), nil)
				require.NoError(t, err)
				return req
			})
		}
		post(1)
		start := time.Now()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() { post(2) })
		}
		wg.Wait()
		took, st := time.Since(start), d.Snapshot().ByKey["80c17d2f203122d936070c88c8d10f33 channels/2"]
		t.Logf("%v, %+v", took, st)
		assert.EqualValues(t, 20, st.Admitted)
		assert.Zero(t, st.Refused)
		assert.Less(t, took, 16*time.Second) // four windows of five
	})
}
