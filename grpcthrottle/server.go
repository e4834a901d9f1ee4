package grpcthrottle

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/server"
)

// UnaryServerInterceptor admits each unary call through rl, as rl's
// Middleware admits an HTTP request: the call is seen as a POST whose
// path is the full method ("/pkg.Service/Method", what a Policy's rules
// match), whose host is its :authority, whose header is its incoming
// metadata and whose remote address is its peer's. Everything the
// RateLimiter does applies: its key, costs, policy, observer, fail mode,
// and permits of a concurrency limit held until the handler returns.
//
// An admitted call gets the rate-limit fields rl writes as header
// metadata (x-ratelimit-limit, ratelimit, ...). A refused call fails with
// RESOURCE_EXHAUSTED carrying google.rpc.RetryInfo (the wait rl's
// Retry-After says: whole seconds, rounded up) and google.rpc.QuotaFailure
// (one violation per violated policy, described by the refusal's detail),
// and the rate-limit fields as trailer metadata; a refusal rl answers with
// 503 (a fail-closed repository, temporary-reduced-capacity) is
// UNAVAILABLE with the same details, and one it answers with 403 (no key,
// a blocked caller) PERMISSION_DENIED.
func UnaryServerInterceptor(rl *server.RateLimiter) grpc.UnaryServerInterceptor {
	mw := rl.Middleware(http.HandlerFunc(admitted))
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var (
			resp any
			err  error
		)
		a := &admission{run: func(md metadata.MD) {
			if len(md) > 0 {
				_ = grpc.SetHeader(ctx, md)
			}
			resp, err = handler(ctx, req)
		}}
		if rerr := admit(ctx, mw, info.FullMethod, a); rerr != nil {
			_ = grpc.SetTrailer(ctx, a.md)
			return nil, rerr
		}
		return resp, err
	}
}

// StreamServerInterceptor admits each stream through rl, as
// UnaryServerInterceptor admits a unary call; the permits of a
// concurrency limit are held until the stream's handler returns.
func StreamServerInterceptor(rl *server.RateLimiter) grpc.StreamServerInterceptor {
	mw := rl.Middleware(http.HandlerFunc(admitted))
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var err error
		a := &admission{run: func(md metadata.MD) {
			if len(md) > 0 {
				_ = ss.SetHeader(md)
			}
			err = handler(srv, ss)
		}}
		if rerr := admit(ss.Context(), mw, info.FullMethod, a); rerr != nil {
			ss.SetTrailer(a.md)
			return rerr
		}
		return err
	}
}

// admission is one call on its way through the RateLimiter's Middleware.
type admission struct {
	run func(md metadata.MD) // runs the handler, with the header metadata to send
	w   recorder
	md  metadata.MD // the rate-limit fields, as metadata
	in  bool        // admitted: run ran
}

type admissionKey struct{}

// admitted is the Middleware's next handler: the call was admitted.
func admitted(w http.ResponseWriter, r *http.Request) {
	a := r.Context().Value(admissionKey{}).(*admission)
	a.in = true
	a.md = toMD(w.Header())
	a.run(a.md)
}

// admit runs the call described by ctx and method through mw. It returns
// the status error of a refusal, or nil when the call was admitted (and
// has run).
func admit(ctx context.Context, mw http.Handler, method string, a *admission) error {
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Path: method},
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     http.Header{},
		RequestURI: method,
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for k, vs := range md {
			switch {
			case k == ":authority":
				if len(vs) > 0 {
					r.Host = vs[0]
				}
			case strings.HasSuffix(k, "-bin"), strings.HasPrefix(k, ":"):
			default:
				r.Header[http.CanonicalHeaderKey(k)] = vs
			}
		}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		r.RemoteAddr = p.Addr.String()
	}
	a.w.h = http.Header{}
	mw.ServeHTTP(&a.w, r.WithContext(context.WithValue(ctx, admissionKey{}, a)))
	if a.in {
		return nil
	}
	a.md = toMD(a.w.h)
	return refusal(&a.w, time.Now())
}

// refusal is the gRPC status of a refusal rl wrote to w.
func refusal(w *recorder, now time.Time) error {
	var p server.Problem
	if strings.HasSuffix(w.h.Get("Content-Type"), "json") {
		_ = json.Unmarshal(w.body, &p)
	}
	msg := p.Detail
	if msg == "" {
		msg = http.StatusText(w.status)
	}
	code := codes.ResourceExhausted
	switch w.status {
	case http.StatusTooManyRequests:
	case http.StatusServiceUnavailable:
		code = codes.Unavailable
	case http.StatusForbidden:
		return status.Error(codes.PermissionDenied, "grpcthrottle: "+msg)
	default:
		return status.Error(codes.Internal, "grpcthrottle: "+msg)
	}
	st := status.New(code, "grpcthrottle: "+msg)
	var details []protoadapt.MessageV1
	if info := headers.Parse(w.h, now); info.HasRetryAfter || info.Delay(now) > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(max(info.Delay(now), info.RetryAfter))})
	}
	qf := &errdetails.QuotaFailure{}
	for _, name := range p.ViolatedPolicies {
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{Subject: name, Description: msg})
	}
	if len(qf.Violations) == 0 {
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{Description: msg})
	}
	details = append(details, qf)
	if ds, err := st.WithDetails(details...); err == nil {
		st = ds
	}
	return st.Err()
}

// toMD is a header's fields as metadata (lower-case keys).
func toMD(h http.Header) metadata.MD {
	md := metadata.MD{}
	for k, vs := range h {
		switch k {
		case "Content-Type", "Content-Length", "X-Content-Type-Options":
			continue
		}
		md[strings.ToLower(k)] = vs
	}
	return md
}

// recorder is the http.ResponseWriter the Middleware writes to: only a
// refusal writes, and what it writes becomes a status.
type recorder struct {
	h      http.Header
	status int
	body   []byte
}

func (w *recorder) Header() http.Header { return w.h }

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.body)+len(p) <= 64<<10 {
		w.body = append(w.body, p...)
	}
	return len(p), nil
}
