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

	"github.com/hashicorp/go-retryablehttp"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/apisim"
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
		for {
			req, err := completion(ctx, url, "plain", n)
			if err != nil {
				return 0, err
			}
			status, err := complete(plainHTTP, req)
			if err != nil || status != http.StatusTooManyRequests {
				return status, err
			}
			time.Sleep(50 * time.Millisecond) // what hand-written retry loops do
		}
	}

	retrying := &client{name: "go-retryablehttp"}
	retryingSizes := &sizes{rng: rand.New(rand.NewPCG(1, 1))}
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	rc.RetryMax = 50
	rc.HTTPClient.Transport = countingRT{&http.Transport{MaxIdleConnsPerHost: workers}, retrying}
	retrying.do = func(ctx context.Context, url string) (int, error) {
		req, err := completion(ctx, url, "retryablehttp", retryingSizes.next())
		if err != nil {
			return 0, err
		}
		rreq, err := retryablehttp.FromRequest(req)
		if err != nil {
			return 0, err
		}
		resp, err := rc.Do(rreq)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	throttled := &client{name: "throttle.Transport"}
	throttledSizes := &sizes{rng: rand.New(rand.NewPCG(1, 1))}
	tr := throttle.NewTransport(countingRT{&http.Transport{MaxIdleConnsPerHost: workers}, throttled})
	defer tr.Close()
	throttledHTTP := &http.Client{Transport: tr}
	throttled.do = func(ctx context.Context, url string) (int, error) {
		n := throttledSizes.next()
		ctx = throttle.WithCost(ctx, "tokens", n)
		for {
			req, err := completion(ctx, url, "throttle", n)
			if err != nil {
				return 0, err
			}
			status, err := complete(throttledHTTP, req)
			if err != nil || status != http.StatusTooManyRequests {
				return status, err
			}
		}
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

// complete sends req with hc and returns the status, the body read and
// closed.
func complete(hc *http.Client, req *http.Request) (int, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
