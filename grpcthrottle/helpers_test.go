package grpcthrottle_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The test service, registered by hand (no generated code): a unary Ping
// and a server-streaming Watch that sends three messages, both with the
// health service's messages.
const (
	pingMethod  = "/throttle.test.Echo/Ping"
	watchMethod = "/throttle.test.Echo/Watch"
)

type echo struct{}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "throttle.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Ping",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(healthpb.HealthCheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
			}
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: pingMethod}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			in := new(healthpb.HealthCheckRequest)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			for range 3 {
				if err := ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
					return err
				}
			}
			return nil
		},
	}},
}

var watchDesc = &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}

// serve starts a gRPC server on loopback with opts; it stops with the test.
func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(opts...)
	s.RegisterService(&echoDesc, echo{})
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().String()
}

// dial connects to addr through the interceptors given.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

func ping(ctx context.Context, cc *grpc.ClientConn) error {
	return cc.Invoke(ctx, pingMethod, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse))
}

// watch opens a Watch stream and reads it to its end.
func watch(ctx context.Context, cc *grpc.ClientConn) error {
	s, err := cc.NewStream(ctx, watchDesc, watchMethod)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&healthpb.HealthCheckRequest{}); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		if err := s.RecvMsg(new(healthpb.HealthCheckResponse)); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
	}
}

// windowServer refuses, past limit calls in a wall-clock second, with
// RESOURCE_EXHAUSTED carrying a RetryInfo that says when the next second
// begins (to the millisecond) and a QuotaFailure.
type windowServer struct {
	limit int

	mu       sync.Mutex
	window   int64
	n        int
	admitted int
	refused  int
	first    int64 // the first call's window
	later    int   // refusals after the first call's window
	log      []string
	start    time.Time
}

func (w *windowServer) take() (ok bool, wait time.Duration) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if sec := now.Unix(); sec != w.window {
		w.window, w.n = sec, 0
	}
	if w.start.IsZero() {
		w.start, w.first = now, now.Unix()
	}
	w.log = append(w.log, fmt.Sprintf("%v %d/%d", now.Sub(w.start).Round(time.Millisecond), w.n+1, w.window%100))
	if w.n < w.limit {
		w.n++
		w.admitted++
		return true, 0
	}
	w.refused++
	if w.window != w.first {
		w.later++
	}
	return false, time.Unix(w.window+1, 0).Sub(now)
}

func (w *windowServer) refusal(wait time.Duration) error {
	st, err := status.New(codes.ResourceExhausted, "quota exceeded: 5 calls a second").WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "calls-per-second", Description: "5 calls a second"}}},
	)
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (w *windowServer) counts() (admitted, refused, later int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.admitted, w.refused, w.later
}

func (w *windowServer) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if ok, wait := w.take(); !ok {
				return nil, w.refusal(wait)
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if ok, wait := w.take(); !ok {
				return w.refusal(wait)
			}
			return h(srv, ss)
		}),
	}
}
