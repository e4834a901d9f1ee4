package ratelimitd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("ratelimitd: client closed")

var (
	_ repository.Repository = (*Client)(nil)
	_ repository.Admin      = (*Client)(nil)
	_ limiters.PermitHolder = (*Client)(nil)
)

// Client is a repository.Repository whose limits live in a ratelimitd
// service. Concurrent checks are sent together: a few sender goroutines
// (WithSenders) each take the checks waiting when they become free, at most
// WithBatch of them, and send them as one POST /v1/check/batch (a lone check
// as POST /v1/check). A check waits only for a sender, never for a timer, so
// batching adds no latency when the service keeps up. A Client is safe for
// concurrent use; Close stops its senders.
type Client struct {
	base     string
	hc       *http.Client
	endpoint string
	plan     string
	token    string
	batch    int
	senders  int
	timeout  time.Duration

	calls     chan *call
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

type call struct {
	check Check
	res   Result
	err   error
	done  chan struct{}
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client the Client sends with
// (default: a client of its own with keep-alive connections). A nil c
// means that default.
func WithHTTPClient(c *http.Client) Option { return func(cl *Client) { cl.hc = c } }

// WithEndpoint sets the endpoint that TryAcquire, Acquire and Peek check
// ("POST /api/ask"; default "/").
func WithEndpoint(e string) Option { return func(cl *Client) { cl.endpoint = e } }

// WithPlan sets the plan that TryAcquire, Acquire and Peek check (default:
// the policy's default plan).
func WithPlan(p string) Option { return func(cl *Client) { cl.plan = p } }

// WithAdminToken sets the bearer token Reset sends (the service's
// RATELIMITD_ADMIN_TOKEN).
func WithAdminToken(t string) Option { return func(cl *Client) { cl.token = t } }

// WithBatch bounds the checks sent in one batch (default 64, at most
// MaxBatch).
func WithBatch(n int) Option { return func(cl *Client) { cl.batch = min(max(n, 1), MaxBatch) } }

// WithSenders sets how many requests to the service may be in flight at
// once (default 4): the Client's goroutines, and its connections.
func WithSenders(n int) Option { return func(cl *Client) { cl.senders = max(n, 1) } }

// WithTimeout bounds each request to the service (default 5s).
func WithTimeout(d time.Duration) Option { return func(cl *Client) { cl.timeout = d } }

// New returns a Client of the service at baseURL ("http://127.0.0.1:8090")
// and starts its senders; Close stops them. A bad URL is an error; a nil
// option panics.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ratelimitd: base URL %q: want http://host:port", baseURL)
	}
	c := &Client{
		base:     strings.TrimRight(baseURL, "/"),
		endpoint: "/",
		batch:    64,
		senders:  4,
		timeout:  5 * time.Second,
		calls:    make(chan *call),
		closed:   make(chan struct{}),
	}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("ratelimitd: New: option %d of %d is nil", i+1, len(opts)))
		}
		o(c)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = c.senders
		c.hc = &http.Client{Transport: tr}
	}
	c.wg.Add(c.senders)
	for range c.senders {
		go c.send()
	}
	return c, nil
}

// send is a sender: it takes a check, and whatever others are waiting, up
// to the batch bound, and sends them in one request.
func (c *Client) send() {
	defer c.wg.Done()
	batch := make([]*call, 0, c.batch)
	for {
		select {
		case <-c.closed:
			return
		case first := <-c.calls:
			batch = append(batch[:0], first)
		more:
			for len(batch) < c.batch {
				select {
				case cl := <-c.calls:
					batch = append(batch, cl)
				default:
					break more
				}
			}
			c.exec(batch)
		}
	}
}

// exec sends batch and answers each of its calls.
func (c *Client) exec(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if len(batch) == 1 {
		cl := batch[0]
		cl.err = c.do(ctx, http.MethodPost, "/v1/check", cl.check, &cl.res)
		close(cl.done)
		return
	}
	req := BatchRequest{Checks: make([]Check, len(batch))}
	for i, cl := range batch {
		req.Checks[i] = cl.check
	}
	var resp BatchResponse
	err := c.do(ctx, http.MethodPost, "/v1/check/batch", req, &resp)
	if err == nil && len(resp.Results) != len(batch) {
		err = fmt.Errorf("ratelimitd: batch of %d checks answered with %d results", len(batch), len(resp.Results))
	}
	for i, cl := range batch {
		switch {
		case err != nil:
			cl.err = err
		case resp.Results[i].Error != nil:
			cl.err = resp.Results[i].Error
		default:
			cl.res = resp.Results[i].Result
		}
		close(cl.done)
	}
}

// do sends one request with a JSON body (nil for none) and decodes a 200
// answer into out, or returns the service's *Problem.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" && method == http.MethodDelete {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		p := &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		_ = json.Unmarshal(data, p)
		return p
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// Check sends one check, batched with others in flight, and returns the
// service's answer. It returns ctx's error if ctx is done first: before
// the call, nothing is sent (a select among ready cases picks at random,
// so a done ctx could have gone to the batch and been counted); once it
// is sent, the check may still have been counted.
func (c *Client) Check(ctx context.Context, chk Check) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	cl := &call{check: chk, done: make(chan struct{})}
	select {
	case c.calls <- cl:
	case <-c.closed:
		return Result{}, ErrClosed
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	select {
	case <-cl.done:
		return cl.res, cl.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// CheckBatch sends checks as one POST /v1/check/batch, as they are.
func (c *Client) CheckBatch(ctx context.Context, checks []Check) ([]BatchItem, error) {
	var resp BatchResponse
	if err := c.do(ctx, http.MethodPost, "/v1/check/batch", BatchRequest{Checks: checks}, &resp); err != nil {
		return nil, err
	}
	return resp.Results, nil
}

func (c *Client) check(key string, n int) Check {
	if n < 0 {
		panic("ratelimitd: negative permit count")
	}
	return Check{Key: key, Cost: &n, Endpoint: c.endpoint, Plan: c.plan}
}

// TryAcquire checks n permits for key at the service. n == 0 is a peek;
// a negative n panics (as it does for every repository.Repository), before
// anything is sent.
func (c *Client) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	r, err := c.Check(ctx, c.check(key, n))
	if err != nil {
		return limiters.Decision{}, err
	}
	return r.Decision(), nil
}

// Acquire checks n permits for key until the service grants them, waiting
// each refusal's retry_after in between. A negative n panics, as it does
// in TryAcquire. It fails at once with limiters.ErrExceedsLimit when the
// refusal is final (n is more than a limit ever admits), and with a
// *limiters.RejectedError when the wait would pass ctx's deadline. Unlike
// a local limiter's, the waits of several clients are not in FIFO order.
func (c *Client) Acquire(ctx context.Context, key string, n int) error {
	for {
		r, err := c.Check(ctx, c.check(key, n))
		if err != nil {
			return err
		}
		d := r.Decision()
		if d.Allowed {
			return nil
		}
		if r.Final || r.RetryAfter == nil {
			return limiters.ErrExceedsLimit
		}
		wait := max(d.RetryAfter, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return &limiters.RejectedError{Limiter: "ratelimitd", RetryAfter: wait, Reason: "the wait would pass the context's deadline", Cause: context.DeadlineExceeded}
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-c.closed:
			t.Stop()
			return ErrClosed
		}
	}
}

// Release does nothing: the service gives a check's concurrency permits
// back as soon as it has decided, so there is nothing to return.
func (c *Client) Release(context.Context, string, int) error { return nil }

// HoldsPermits reports false: see Release.
func (c *Client) HoldsPermits() bool { return false }

// Peek reports key's state for the Client's endpoint and plan (GET
// /v1/state/{key}), spending nothing.
func (c *Client) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	q := url.Values{"endpoint": {c.endpoint}}
	if c.plan != "" {
		q.Set("plan", c.plan)
	}
	var r Result
	if err := c.do(ctx, http.MethodGet, "/v1/state/"+url.PathEscape(key)+"?"+q.Encode(), nil, &r); err != nil {
		return limiters.Decision{}, err
	}
	return r.Decision(), nil
}

// Reset forgets key's state in every rule (DELETE /v1/state/{key}), with
// the admin token of WithAdminToken.
func (c *Client) Reset(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, "/v1/state/"+url.PathEscape(key), nil, nil)
}

// Close stops the senders, waiting for the requests in flight. Later calls
// fail with ErrClosed. It is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	c.wg.Wait()
	return nil
}
