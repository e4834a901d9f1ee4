package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// The LLM round's API: per client, 100 requests and 5,000 tokens per 5 s,
// both refilling continuously, as OpenAI's limits do; a completion asks for
// 50 to 450 tokens.
const (
	llmRequests = 100
	llmTokens   = 5000
	llmWindow   = 5 * time.Second
	llmMin      = 50
	llmSpread   = 400
)

// sizes draws completion sizes from a generator of its own, safe for
// concurrent use.
type sizes struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (s *sizes) next() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return llmMin + s.rng.Int64N(llmSpread+1)
}

// completion builds a chat completion request asking for n tokens.
func completion(ctx context.Context, url, id string, n int64) (*http.Request, error) {
	body := fmt.Sprintf(`{"model":"gpt-4o","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Client", id)
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// runLLM runs the LLM-API round: an OpenAI-style API on loopback, one
// simulated organisation per client (chosen by X-Client), and the same
// three clients as run, each completing jobs completions of random sizes.
func runLLM(out io.Writer, tty bool, jobs, workers int) ([]*client, error) {
	orgs := map[string]*apisim.OpenAI{}
	for _, id := range []string{"plain", "retryablehttp", "throttle"} {
		orgs[id] = apisim.NewOpenAI(apisim.OpenAIConfig{RequestsPerWindow: llmRequests, TokensPerWindow: llmTokens, Window: llmWindow})
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org, ok := orgs[r.Header.Get("X-Client")]
		if !ok {
			http.Error(w, "unknown client", http.StatusUnauthorized)
			return
		}
		org.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"

	plain := &client{name: "plain http.Client"}
	plainSizes := &sizes{rng: rand.New(rand.NewPCG(1, 1))}
	plainHTTP := &http.Client{Transport: countingRT{&http.Transport{MaxIdleConnsPerHost: workers}, plain}}
	plain.do = func(ctx context.Context, url string) (int, error) {
		n := plainSizes.next()
		return retry429(50*time.Millisecond, func() (int, error) { return complete(ctx, plainHTTP, url, "plain", n) })
	}

	retrying := &client{name: "go-retryablehttp"}
	retryingSizes := &sizes{rng: rand.New(rand.NewPCG(1, 1))}
	rc := newRetryable(retrying, workers)
	retrying.do = func(ctx context.Context, url string) (int, error) {
		req, err := completion(ctx, url, "retryablehttp", retryingSizes.next())
		if err != nil {
			return 0, err
		}
		return doRetryable(rc, req)
	}

	throttled := &client{name: "throttle.Transport"}
	throttledSizes := &sizes{rng: rand.New(rand.NewPCG(1, 1))}
	tr := throttle.NewTransport(countingRT{&http.Transport{MaxIdleConnsPerHost: workers}, throttled})
	defer tr.Close()
	throttledHTTP := &http.Client{Transport: tr}
	throttled.do = func(ctx context.Context, url string) (int, error) {
		n := throttledSizes.next()
		ctx = throttle.WithCost(ctx, "tokens", n)
		return retry429(0, func() (int, error) { return complete(ctx, throttledHTTP, url, "throttle", n) })
	}

	clients := []*client{plain, retrying, throttled}
	fmt.Fprintf(out, "LLM API on %s: per client, %d requests and %d tokens per %v, refilling continuously (OpenAI's headers).\n",
		ln.Addr(), llmRequests, llmTokens, llmWindow)
	fmt.Fprintf(out, "Each client completes %d completions of %d–%d tokens with %d goroutines, all three at once.\n\n",
		jobs, llmMin, llmMin+llmSpread, workers)
	compete(out, tty, clients, url, jobs, workers)
	fmt.Fprintf(out, "\nThe tokens bind: about %d tokens a job, %d a second after the first %d.\n",
		llmMin+llmSpread/2, llmTokens/int(llmWindow/time.Second), llmTokens)
	return clients, nil
}

// complete asks, as client id, for a completion of n tokens through hc and
// returns the status, the body read and closed.
func complete(ctx context.Context, hc *http.Client, url, id string, n int64) (int, error) {
	req, err := completion(ctx, url, id, n)
	if err != nil {
		return 0, err
	}
	return drain(hc.Do(req))
}
