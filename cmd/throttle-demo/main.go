// Command throttle-demo shows, in one process and with no set-up, what
// throttle.Transport changes for a client of a rate-limited API.
//
// It starts an API on a loopback port, protected by server.RateLimiter at
// 20 requests per second per client (GitHub-style and IETF headers), and
// drives it with the same workload from three clients at once — a plain
// http.Client that retries 429s after a short sleep, go-retryablehttp on
// its own, and throttle.Transport — then prints, for each, the requests it
// sent, the 429s it received, its successful requests per second and the
// p50/p99 time a job waited for its success. Every number is measured in
// that run.
//
// A second round does the same against an LLM-style API that limits
// requests and tokens (OpenAI's dialect, continuously refilling buckets),
// with completions of random sizes; throttle.Transport's requests declare
// their tokens with throttle.WithCost.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

func main() {
	rate := flag.Int("rate", 20, "the API's limit, requests per second per client")
	jobs := flag.Int("jobs", 200, "successful requests each client must complete")
	workers := flag.Int("workers", 10, "goroutines per client")
	llmJobs := flag.Int("llm-jobs", 60, "successful completions each client must get in the LLM-API round (0: skip it)")
	flag.Parse()
	tty := isTerminal(os.Stdout)
	if _, err := run(os.Stdout, tty, *rate, *jobs, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "throttle-demo:", err)
		os.Exit(1)
	}
	if *llmJobs > 0 {
		fmt.Println()
		if _, err := runLLM(os.Stdout, tty, *llmJobs, *workers); err != nil {
			fmt.Fprintln(os.Stderr, "throttle-demo:", err)
			os.Exit(1)
		}
	}
}

// client is one of the three contenders and what it measured.
type client struct {
	name string
	do   func(ctx context.Context, url string) (status int, err error)

	sent, limited, done atomic.Int64
	mu                  sync.Mutex
	waits               []time.Duration
	elapsed             time.Duration
	failed              atomic.Int64
}

// isTerminal reports whether f is a terminal (a character device), where a
// progress line may redraw itself with \r.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run runs the demo and writes its report to out. On a terminal (tty) the
// progress line redraws itself five times a second; elsewhere (a pipe, a
// file, a CI log) it is a new line once a second.
func run(out io.Writer, tty bool, rate, jobs, workers int) ([]*client, error) {
	// The API: 20 req/s per client (keyed by X-Client), burst of one second.
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewTokenBucket(limiters.PerSecond(rate), rate)
	}, repository.WithMaxKeys(1000))
	rl := server.New(repo, server.WithKey(keyextract.Header("X-Client")), server.WithHeaders(headers.Both))
	defer repo.Close()
	api := http.NewServeMux()
	api.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: rl.Middleware(api)}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/items"

	plain := &client{name: "plain http.Client"}
	plainHTTP := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	plain.do = func(ctx context.Context, url string) (int, error) {
		return retry429(50*time.Millisecond, func() (int, error) { return send(ctx, plainHTTP, url, "plain", plain) })
	}

	retrying := &client{name: "go-retryablehttp"}
	rc := newRetryable(retrying, workers)
	retrying.do = func(ctx context.Context, url string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-Client", "retryablehttp")
		return doRetryable(rc, req)
	}

	throttled := &client{name: "throttle.Transport"}
	tr := throttle.NewTransport(countingRT{&http.Transport{MaxIdleConnsPerHost: workers}, throttled})
	defer tr.Close()
	throttledHTTP := &http.Client{Transport: tr}
	throttled.do = func(ctx context.Context, url string) (int, error) {
		return retry429(0, func() (int, error) { return send(ctx, throttledHTTP, url, "throttle", nil) })
	}

	clients := []*client{plain, retrying, throttled}
	fmt.Fprintf(out, "API on %s: %d requests/s per client (token bucket, burst %d), GitHub-style and IETF headers.\n", ln.Addr(), rate, rate)
	fmt.Fprintf(out, "Each client completes %d successful requests with %d goroutines, all three at once.\n\n", jobs, workers)
	compete(out, tty, clients, url, jobs, workers)
	fmt.Fprintf(out, "\nThe API allows %d/s per client: at best %d jobs take about %.1fs (the first %d at once).\n",
		rate, jobs, float64(jobs-rate)/float64(rate), rate)
	return clients, nil
}

// retry429 calls do until its answer is not a 429, sleeping pause between
// tries (what hand-written retry loops do; the Transport needs no pause:
// it does the waiting).
func retry429(pause time.Duration, do func() (int, error)) (int, error) {
	for {
		status, err := do()
		if err != nil || status != http.StatusTooManyRequests {
			return status, err
		}
		time.Sleep(pause)
	}
}

// newRetryable returns go-retryablehttp with its defaults, counted as c.
func newRetryable(c *client, workers int) *retryablehttp.Client {
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	rc.RetryMax = 50
	rc.HTTPClient.Transport = countingRT{&http.Transport{MaxIdleConnsPerHost: workers}, c}
	return rc
}

// doRetryable sends req through rc and returns the final status, the body
// read and closed.
func doRetryable(rc *retryablehttp.Client, req *http.Request) (int, error) {
	rreq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return 0, err
	}
	return drain(rc.Do(rreq))
}

// drain reads and closes the body of what a request returned and gives
// its status.
func drain(resp *http.Response, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// compete runs the clients at once, each completing jobs successful
// requests with workers goroutines, shows their progress, and prints the
// table of what each measured.
func compete(out io.Writer, tty bool, clients []*client, url string, jobs, workers int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.run(ctx, url, jobs, workers) })
	}
	stop := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		showProgress(out, tty, clients, stop)
	}()
	wg.Wait()
	close(stop)
	<-progressDone

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "client\trequests sent\t429s received\tsucceeded\tsuccess/s\tp50 wait\tp99 wait\t")
	for _, c := range clients {
		p50, p99 := c.percentiles()
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.1f\t%v\t%v\t\n", c.name, c.sent.Load(), c.limited.Load(), c.done.Load(),
			float64(c.done.Load())/c.elapsed.Seconds(), p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	}
	w.Flush()
	for _, c := range clients {
		if n := c.failed.Load(); n > 0 {
			fmt.Fprintf(out, "%s: %d jobs gave up\n", c.name, n)
		}
	}
}

// showProgress writes the clients' progress to out until stop is closed,
// then their final counts once more: on a terminal as one line redrawn with
// \r every 200 ms, elsewhere as a new line every second.
func showProgress(out io.Writer, tty bool, clients []*client, stop <-chan struct{}) {
	every, format := time.Second, "%s\n"
	if tty {
		every, format = 200*time.Millisecond, "\r%s"
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			fmt.Fprintf(out, format, progress(clients))
			if tty {
				fmt.Fprintln(out) // end the redrawn line
			}
			fmt.Fprintln(out)
			return
		case <-tick.C:
			fmt.Fprintf(out, format, progress(clients))
		}
	}
}

func progress(cs []*client) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += " | "
		}
		s += fmt.Sprintf("%s: %d ok, %d×429", c.name, c.done.Load(), c.limited.Load())
	}
	return s
}

// run completes jobs successful requests with workers goroutines, recording
// how long each job took to succeed.
func (c *client) run(ctx context.Context, url string, jobs, workers int) {
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(jobs) {
				t0 := time.Now()
				status, err := c.do(ctx, url)
				if err != nil || status != http.StatusOK {
					c.failed.Add(1)
					if errors.Is(err, context.DeadlineExceeded) {
						return
					}
					continue
				}
				c.done.Add(1)
				c.mu.Lock()
				c.waits = append(c.waits, time.Since(t0))
				c.mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.elapsed = time.Since(start)
}

func (c *client) percentiles() (p50, p99 time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waits) == 0 {
		return 0, 0
	}
	s := slices.Clone(c.waits)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)*99/100, len(s)-1)]
}

// send makes one GET as the given client; counted is non-nil when the
// client's transport does not count for itself.
func send(ctx context.Context, hc *http.Client, url, id string, counted *client) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Client", id)
	resp, err := hc.Do(req)
	if counted != nil {
		counted.count(resp)
	}
	return drain(resp, err)
}

func (c *client) count(resp *http.Response) {
	c.sent.Add(1)
	if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
		c.limited.Add(1)
	}
}

// countingRT counts what actually goes on the wire.
type countingRT struct {
	base http.RoundTripper
	c    *client
}

func (t countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Client") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("X-Client", "throttle")
	}
	resp, err := t.base.RoundTrip(req)
	t.c.count(resp)
	return resp, err
}
