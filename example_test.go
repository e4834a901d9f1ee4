package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/testutil/apisim"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// An API that allows 5 requests per window and says so, GitHub style.
func quotaAPI() (*httptest.Server, *atomic.Int32) {
	var mu sync.Mutex
	var limited atomic.Int32
	used, windowEnd := 0, time.Now().Add(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); !now.Before(windowEnd) {
			used, windowEnd = 0, now.Add(time.Second)
		}
		h := w.Header()
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(windowEnd.Unix(), 10))
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(time.Until(windowEnd).Seconds(), 'f', 3, 64))
		if used == 5 {
			h.Set("X-RateLimit-Remaining", "0")
			limited.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		used++
		h.Set("X-RateLimit-Remaining", strconv.Itoa(5-used))
		io.WriteString(w, "ok")
	}))
	return srv, &limited
}

// Wrap an http.Client's transport: its goroutines share the server's quota
// and wait instead of collecting 429s.
func ExampleNewTransport() {
	srv, limited := quotaAPI()
	defer srv.Close()

	tr := throttle.NewTransport(nil) // per-host partitions, server feedback on
	defer tr.Close()
	client := &http.Client{Transport: tr}

	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				resp, err := client.Get(srv.URL)
				if err != nil {
					fmt.Println(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("succeeded:", ok.Load())
	fmt.Println("429s:", limited.Load())
	// Output:
	// succeeded: 12
	// 429s: 0
}

// One limiter shared by every host the client calls.
func ExampleWithLimiter() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	lim := limiters.NewTokenBucket(limiters.PerSecond(50), 5)
	client := &http.Client{Transport: throttle.NewTransport(nil, throttle.WithLimiter(lim))}
	defer client.Transport.(*throttle.Transport).Close()

	for range 10 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	fmt.Println("permits granted:", lim.Stats().Acquired)
	// Output: permits granted: 10
}

// At most two requests in flight per host; a request that cannot get its
// turn within WithMaxWait fails at once with a *limiters.RejectedError.
func ExampleWithRepository() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	repo := repository.NewMemory(func(host string) limiters.Limiter {
		return limiters.NewConcurrency(2)
	})
	tr := throttle.NewTransport(nil, throttle.WithRepository(repo), throttle.WithMaxWait(time.Second))
	defer tr.Close()
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 6 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err == nil {
				resp.Body.Close() // gives the permit back
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println("succeeded:", ok.Load())
	// Output: succeeded: 6
}

// go-retryablehttp on top: a 429 is retried when the server's reset comes,
// and retries wait in the same queue as first tries.
func ExampleNewRetryableClient() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "done")
	}))
	defer srv.Close()

	client := throttle.NewRetryableClient(nil, throttle.WithMaxWait(5*time.Second))
	defer client.HTTPClient.Transport.(*throttle.Transport).Close()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "calls")
	// Output: 200 done after 2 calls
}

// A caller forgets to close a response body. With one request in flight
// allowed, every later request would wait for ever; the lease gives the
// permit back and tells the observer which partition leaked.
func ExampleWithPermitLease() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	tr := throttle.NewTransport(nil,
		throttle.WithLimiter(limiters.NewConcurrency(1)),
		throttle.WithPermitLease(100*time.Millisecond),
		throttle.WithObserver(func(e throttle.Event) {
			if e.Kind == throttle.EventLeaseExpired && e.Key == srv.Listener.Addr().String() {
				fmt.Println("a body leaked in the server's partition; its permit is back")
			}
		}))
	defer tr.Close()
	client := &http.Client{Transport: tr}

	forgotten, err := client.Get(srv.URL) // its body is not closed in time
	if err != nil {
		fmt.Println(err)
		return
	}
	defer forgotten.Body.Close()
	resp, err := client.Get(srv.URL) // waits for the lease to run out
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("second request:", resp.StatusCode)
	// Output:
	// a body leaked in the server's partition; its permit is back
	// second request: 200
}

// An LLM client: each request declares the tokens it will spend, so the
// Transport sends it only when the API's tokens quota (learned from its
// x-ratelimit-*-tokens fields) has room, and interactive requests go
// before queued batch work.
func ExampleWithCost() {
	api := apisim.NewOpenAI(apisim.OpenAIConfig{RequestsPerWindow: 100, TokensPerWindow: 3000, Window: 2 * time.Second})
	srv := httptest.NewServer(api)
	defer srv.Close()

	tr := throttle.NewTransport(nil)
	defer tr.Close()
	client := &http.Client{Transport: tr}
	complete := func(ctx context.Context, maxTokens int64) (int, error) {
		body := fmt.Sprintf(`{"model":"gpt-4o","max_tokens":%d,"messages":[]}`, maxTokens)
		ctx = throttle.WithCost(ctx, "tokens", maxTokens)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	// The first answer teaches the Transport the API's quotas.
	if status, err := complete(context.Background(), 100); err != nil || status != http.StatusOK {
		fmt.Println(status, err)
		return
	}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		ctx := context.Background()
		if i%4 == 0 {
			ctx = throttle.WithPriority(ctx, 10) // interactive: ahead of the batch
		}
		wg.Go(func() {
			if status, err := complete(ctx, 700); err == nil && status == http.StatusOK {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	// 8,400 tokens through a 3,000-token bucket that refills in 2s: the
	// requests wait for it to refill instead of collecting 429s.
	fmt.Println("succeeded:", ok.Load())
	fmt.Println("refused by the API:", api.Snapshot().Refused)

	// A request that could never fit fails at once, unsent.
	_, err := complete(context.Background(), 5000)
	var tooBig *throttle.ExceedsQuotaError
	fmt.Println(errors.Is(err, limiters.ErrExceedsLimit), errors.As(err, &tooBig) && tooBig.Quota == "tokens")
	// Output:
	// succeeded: 12
	// refused by the API: 0
	// true true
}

// Two Transports share a MemoryFeedbackStore: the 429 one of them receives
// pauses the other too, before it sends anything.
func ExampleWithFeedbackStore() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	store := throttle.NewMemoryFeedbackStore()
	a := throttle.NewTransport(nil, throttle.WithFeedbackStore(store))
	defer a.Close()
	b := throttle.NewTransport(nil, throttle.WithFeedbackStore(store),
		throttle.WithObserver(func(e throttle.Event) {
			if e.Kind == throttle.EventPaused {
				fmt.Println("b paused, learned from another Transport:", e.Status == 0)
			}
		}))
	defer b.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := a.RoundTrip(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("a:", resp.StatusCode)
	a.CloseIdleConnections()
	// Output:
	// b paused, learned from another Transport: true
	// a: 429
}

// A misspelt quota name charges nothing: the Transport tells the observer
// (and WithLogger's logger), once per partition and name, which names the
// server did report. Here an Anthropic-style API reports input-tokens;
// "input_tokens" matches none.
func ExampleEventUnknownQuota() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("anthropic-ratelimit-requests-limit", "50")
		h.Set("anthropic-ratelimit-requests-remaining", "49")
		h.Set("anthropic-ratelimit-input-tokens-limit", "20000")
		h.Set("anthropic-ratelimit-input-tokens-remaining", "19000")
	}))
	defer srv.Close()
	tr := throttle.NewTransport(nil, throttle.WithObserver(func(e throttle.Event) {
		if e.Kind == throttle.EventUnknownQuota {
			fmt.Println(e.Kind, e.Quota)
			fmt.Println(strings.ReplaceAll(e.Err.Error(), srv.Listener.Addr().String(), "host"))
		}
	}))
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for _, quota := range []string{"input-tokens", "input_tokens", "input_tokens"} {
		ctx := throttle.WithCost(context.Background(), quota, 1000)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	// Output:
	// unknown_quota input_tokens
	// throttle: WithCost("input_tokens") names no quota the server of partition "host" reported (it reported ["input-tokens" "requests"])
}
