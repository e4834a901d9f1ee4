// Command throttle-fleet-demo shows what a shared FeedbackStore changes for
// a fleet of processes behind one API key.
//
// It starts a redis-server on a free loopback port and a limited API on
// another (internal/testutil/apisim's Quota: 100 requests a second per API key,
// X-RateLimit-* headers, 429 with Retry-After past the limit), then runs
// two rounds of the same workload: four worker processes (this program,
// run again with THROTTLE_FLEET_WORKER=1), each with its own
// throttle.Transport and eight goroutines, send 100 requests each with one
// API key, retrying every 429. In the first round each Transport learns
// alone; in the second they share what they learn through
// redisrepo.NewFeedbackStore. It prints, per round, the 429s the API
// refused, the requests it admitted, the elapsed time and the throughput.
// Every number is measured in that run.
//
// It needs redis-server on PATH (make demo-fleet installs it when absent).
//
//	go run ./cmd/throttle-fleet-demo [-procs 4] [-goroutines 8] [-requests 100] [-limit 100]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/testutil/apisim"
	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/repository/redisrepo"
)

// workerEnv selects the worker mode; its value is ignored but for "1".
const workerEnv = "THROTTLE_FLEET_WORKER"

func main() {
	if os.Getenv(workerEnv) == "1" {
		if err := worker(os.Stdout, os.Getenv("FLEET_URL"), os.Getenv("FLEET_REDIS"),
			atoi(os.Getenv("FLEET_GOROUTINES")), atoi(os.Getenv("FLEET_REQUESTS"))); err != nil {
			fmt.Fprintln(os.Stderr, "throttle-fleet-demo worker:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.IntVar(&c.procs, "procs", 4, "worker processes")
	flag.IntVar(&c.goroutines, "goroutines", 8, "goroutines per worker process")
	flag.IntVar(&c.requests, "requests", 100, "requests per worker process")
	flag.IntVar(&c.limit, "limit", 100, "the API's limit, requests per second per API key")
	flag.Parse()
	exe, err := os.Executable()
	if err == nil {
		err = run(os.Stdout, c, exe)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "throttle-fleet-demo:", err)
		os.Exit(1)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

type config struct {
	procs, goroutines, requests, limit int
}

// result is what a worker process reports, one JSON line on its stdout.
type result struct {
	OK      int64 `json:"ok"`
	Limited int64 `json:"limited"`
}

// round is what one round measured.
type round struct {
	name              string
	refused, admitted int64
	took              time.Duration
}

// run starts Redis and the API, runs the two rounds with the worker
// binary exe, and prints the table to w.
func run(w io.Writer, c config, exe string) error {
	dir, err := os.MkdirTemp("", "throttle-fleet-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rs, err := redistest.Launch(dir)
	if err != nil {
		return fmt.Errorf("start redis-server (is it on PATH? make demo-fleet installs it): %w", err)
	}
	defer rs.Stop()

	fmt.Fprintf(w, "%d processes × %d goroutines, %d requests each, one API key; the API admits %d a second.\n\n",
		c.procs, c.goroutines, c.requests, c.limit)
	var rounds []round
	for _, shared := range []bool{false, true} {
		r, err := runRound(c, exe, rs.Addr, shared)
		if err != nil {
			return err
		}
		rounds = append(rounds, r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Transports\t429s\tadmitted\telapsed\tadmitted/s\t")
	for _, r := range rounds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2fs\t%.0f\t\n", r.name, r.refused, r.admitted,
			r.took.Seconds(), float64(r.admitted)/r.took.Seconds())
	}
	return tw.Flush()
}

// runRound serves a fresh API on loopback and runs c.procs workers against
// it, sharing the store on Redis at addr if shared.
func runRound(c config, exe, addr string, shared bool) (round, error) {
	r := round{name: "each alone"}
	env := []string{workerEnv + "=1", "FLEET_GOROUTINES=" + strconv.Itoa(c.goroutines),
		"FLEET_REQUESTS=" + strconv.Itoa(c.requests)}
	if shared {
		r.name = "sharing a FeedbackStore on Redis"
		env = append(env, "FLEET_REDIS="+addr)
	}
	api := apisim.NewQuota(c.limit, time.Second, "X-API-Key")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	env = append(env, "FLEET_URL=http://"+l.Addr().String()+"/v1/items")

	// Both rounds start on a window's start (the API's windows are on the
	// clock's seconds), so that their times compare.
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
	start := time.Now()
	errs := make(chan error, c.procs)
	var wg sync.WaitGroup
	for range c.procs {
		wg.Go(func() {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				errs <- fmt.Errorf("worker: %w", err)
				return
			}
			var res result
			if err := json.Unmarshal(out, &res); err != nil {
				errs <- fmt.Errorf("worker said %q: %w", out, err)
			}
		})
	}
	wg.Wait()
	r.took = time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	s := api.Snapshot()
	r.refused, r.admitted = s.Refused, s.Admitted
	return r, nil
}

// worker sends requests GETs to url with goroutines goroutines through one
// Transport (sharing a FeedbackStore on the Redis at redisAddr, if set),
// retrying each 429, and writes its result as JSON to w. A failure of the
// store fails the worker: the figures would not be the store's.
func worker(w io.Writer, url, redisAddr string, goroutines, requests int) error {
	var storeErr atomic.Pointer[error]
	opts := []throttle.Option{throttle.WithKey(keyextract.Header("X-API-Key")),
		throttle.WithObserver(func(e throttle.Event) {
			if e.Kind == throttle.EventStoreUnavailable {
				storeErr.CompareAndSwap(nil, &e.Err)
			}
		})}
	if redisAddr != "" {
		client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
		defer client.Close()
		fs := redisrepo.NewFeedbackStore(client)
		defer fs.Close()
		opts = append(opts, throttle.WithFeedbackStore(fs))
	}
	tr := throttle.NewTransport(nil, opts...)
	defer tr.Close()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var res result
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(requests) {
				for {
					status, err := get(hc, url)
					if err != nil {
						firstErr.CompareAndSwap(nil, &err)
						return
					}
					if status == http.StatusOK {
						atomic.AddInt64(&res.OK, 1)
						break
					}
					atomic.AddInt64(&res.Limited, 1)
				}
			}
		})
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return *p
	}
	if p := storeErr.Load(); p != nil {
		return fmt.Errorf("the feedback store failed: %w", *p)
	}
	return json.NewEncoder(w).Encode(res)
}

func get(hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-API-Key", "team-key")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
