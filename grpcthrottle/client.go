package grpcthrottle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// Client throttles the gRPC calls made through its interceptors. It is
// safe for concurrent use; Close it when done.
type Client struct {
	tr *throttle.Transport
}

// Option configures a Client. It is a throttle.Option: every option of
// the throttle Transport applies (throttle.WithKey, WithMaxPause,
// WithLogger, WithFeedbackStore, ...).
type Option = throttle.Option

// WithLimiter makes every call, whatever its partition, take a permit
// from l. The Client owns l: Close closes it.
func WithLimiter(l limiters.Limiter) Option { return throttle.WithLimiter(l) }

// WithRepository makes every call take a permit from its partition's
// limiter in r. The Client owns r: Close closes it.
func WithRepository(r repository.Repository) Option { return throttle.WithRepository(r) }

// WithMaxWait bounds how long a call may wait for its turn, on top of its
// context's deadline. A call that would wait longer fails at once with a
// *limiters.RejectedError.
func WithMaxWait(d time.Duration) Option { return throttle.WithMaxWait(d) }

// WithObserver receives the Transport's events for every call: permits
// acquired, calls refused, pauses and resumptions. Event.Key is the
// partition (the target).
func WithObserver(f func(throttle.Event)) Option { return throttle.WithObserver(f) }

// NewClient returns a Client; use its Unary and Stream as the
// ClientConn's interceptors (grpc.WithUnaryInterceptor,
// grpc.WithStreamInterceptor, or their chained forms).
func NewClient(opts ...Option) *Client {
	return &Client{tr: throttle.NewTransport(sender{}, opts...)}
}

// Close fails every waiting call with limiters.ErrClosed, closes the
// limiter or repository the Client was given, and makes later calls fail
// with limiters.ErrClosed. It is idempotent.
func (c *Client) Close() error { return c.tr.Close() }

// Unary is a grpc.UnaryClientInterceptor: the call waits for its turn,
// then invoker sends it; its status teaches the partition.
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	cl := &call{ctx: ctx, method: method, req: req, reply: reply, cc: cc, invoker: invoker, opts: opts}
	resp, err := c.tr.RoundTrip(request(cl))
	if !cl.sent {
		return refused(err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	return cl.err
}

// Stream is a grpc.StreamClientInterceptor: the stream waits for its
// turn, then streamer opens it; its final status teaches the partition
// when it comes.
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cl := &call{ctx: ctx, method: method, cc: cc, desc: desc, streamer: streamer, opts: opts}
	resp, err := c.tr.RoundTrip(request(cl))
	if !cl.sent {
		return nil, refused(err)
	}
	if cl.stream == nil {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, cl.err
	}
	cl.stream.start(resp.Body)
	return cl.stream, nil
}

// call is one gRPC call on its way through the Transport to sender.
type call struct {
	ctx      context.Context // the caller's
	method   string
	cc       *grpc.ClientConn
	opts     []grpc.CallOption
	req      any
	reply    any
	invoker  grpc.UnaryInvoker // a unary call
	desc     *grpc.StreamDesc  // a stream
	streamer grpc.Streamer

	sent   bool          // sender ran: err is the call's own
	err    error         // the call's own error
	stream *clientStream // the stream sender opened
}

type callKey struct{}

// request is the HTTP request the Transport sees for cl: the target as its
// host (the default partition), the full method as its path, the outgoing
// metadata as its header, cl's context (with its priority and costs).
func request(cl *call) *http.Request {
	target := ""
	if cl.cc != nil {
		target = cl.cc.Target()
	}
	h := http.Header{}
	if md, ok := metadata.FromOutgoingContext(cl.ctx); ok {
		for k, vs := range md {
			if !strings.HasSuffix(k, "-bin") {
				h[http.CanonicalHeaderKey(k)] = vs
			}
		}
	}
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Scheme: "grpc", Host: target, Path: cl.method},
		Host:       target,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     h,
	}
	return r.WithContext(context.WithValue(cl.ctx, callKey{}, cl))
}

// sender is the Transport's base RoundTripper: it performs the call the
// request carries and answers what its status says, as HTTP.
type sender struct{}

func (sender) RoundTrip(r *http.Request) (*http.Response, error) {
	cl, _ := r.Context().Value(callKey{}).(*call)
	if cl == nil {
		return nil, errors.New("grpcthrottle: a request that carries no gRPC call")
	}
	cl.sent = true
	if cl.invoker != nil {
		var hdr, trl metadata.MD
		opts := append(cl.opts[:len(cl.opts):len(cl.opts)], grpc.Header(&hdr), grpc.Trailer(&trl))
		cl.err = cl.invoker(cl.ctx, cl.method, cl.req, cl.reply, cl.cc, opts...)
		return answer(cl.err, hdr, trl)
	}
	cs, err := cl.streamer(cl.ctx, cl.desc, cl.cc, cl.method, cl.opts...)
	if err != nil {
		cl.err = err
		return answer(err, nil, nil)
	}
	cl.stream = &clientStream{ClientStream: cs, desc: cl.desc, body: &lateBody{}}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: cl.stream.body}, nil
}

// refused is the error of a call the Transport refused before sending it:
// err, which matches what it matched (limiters.ErrRateLimited,
// limiters.ErrClosed, ...), with a gRPC status.
func refused(err error) error {
	if err == nil {
		err = errors.New("no answer")
	}
	return &refusedError{err: err}
}

type refusedError struct{ err error }

func (e *refusedError) Error() string { return "grpcthrottle: call not sent: " + e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// GRPCStatus makes status.Code and status.FromError see the refusal.
func (e *refusedError) GRPCStatus() *status.Status {
	code := codes.Unknown
	switch {
	case errors.Is(e.err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(e.err, context.Canceled), errors.Is(e.err, limiters.ErrClosed):
		code = codes.Canceled
	case errors.Is(e.err, limiters.ErrRateLimited), errors.Is(e.err, limiters.ErrQueueFull),
		errors.Is(e.err, limiters.ErrExceedsLimit):
		code = codes.ResourceExhausted
	}
	return status.New(code, e.Error())
}

// clientStream is a stream a Client let through: when it ends, its
// status goes to the partition and its permit back to the limiter.
type clientStream struct {
	grpc.ClientStream
	desc *grpc.StreamDesc
	body *lateBody

	mu       sync.Mutex
	outer    io.Closer   // the Transport's response body, wrapping body
	stop     func() bool // stops the context.AfterFunc that ends the stream
	ended    bool
	admitted bool // the server's admission was learned
}

// start arms the stream's end: outer is the body the Transport returned.
func (s *clientStream) start(outer io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outer = outer
	// The stream ends when its context does, if not before (its callback
	// waits for the lock: stop is set before it can read it).
	s.stop = context.AfterFunc(s.Context(), func() { s.end(nil) })
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case err == nil:
		s.admit()
		if !s.desc.ServerStreams {
			s.end(nil) // the one response of a unary or client-streaming call
		}
	case err == io.EOF:
		s.admit()
		s.end(nil)
	default:
		s.end(err)
	}
	return err
}

// admit learns, once, that the server admitted the stream: a message came,
// or its end with an OK status. The partition counts it as a success
// then, not when it opened (the Transport does not: streamhook.Late),
// with the rate-limit fields its header metadata carry, and its trailer's
// once it has ended.
func (s *clientStream) admit() {
	s.mu.Lock()
	done := s.admitted
	s.admitted = true
	s.mu.Unlock()
	if done {
		return
	}
	h := http.Header{}
	if md, err := s.ClientStream.Header(); err == nil {
		copyMD(h, md)
	}
	copyMD(h, s.ClientStream.Trailer())
	s.body.learn(http.StatusOK, h)
}

// end ends the stream once: a refusal is learned, the permit goes back.
func (s *clientStream) end(err error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	outer, stop := s.outer, s.stop
	s.mu.Unlock()
	if err != nil {
		if resp, _ := answer(err, nil, s.Trailer()); resp != nil && resp.StatusCode >= 400 {
			s.body.learn(resp.StatusCode, resp.Header)
		}
	}
	if stop != nil {
		stop()
	}
	if outer != nil {
		outer.Close()
	}
}

// lateBody is a stream's response body: empty, and the way its answer —
// its admission, its final status — reaches the Transport
// (internal/streamhook.Late).
type lateBody struct {
	mu      sync.Mutex
	listen  func(status int, h http.Header)
	ok, bad bool // a success, a refusal learned
}

func (b *lateBody) Listen(learn func(status int, h http.Header)) {
	b.mu.Lock()
	b.listen = learn
	b.mu.Unlock()
}

// learn passes an answer on: at most one success, then at most one
// refusal (a refusal ends the stream: nothing is learned after it).
func (b *lateBody) learn(status int, h http.Header) {
	b.mu.Lock()
	f := b.listen
	switch {
	case b.bad, status < 400 && b.ok:
		f = nil
	case status < 400:
		b.ok = true
	default:
		b.bad = true
	}
	b.mu.Unlock()
	if f != nil {
		f(status, h)
	}
}

func (b *lateBody) Read([]byte) (int, error) { return 0, io.EOF }
func (b *lateBody) Close() error             { return nil }
