package grpcthrottle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/throttlekit/throttle/grpcthrottle"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// fivePerSecond is a RateLimiter of 5 calls a second per caller.
func fivePerSecond(t *testing.T, opts ...server.Option) *server.RateLimiter {
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewTokenBucket(limiters.PerSecond(5), 5)
	})
	t.Cleanup(func() { repo.Close() })
	return server.New(repo, opts...)
}

// checkRefusal: RESOURCE_EXHAUSTED with a RetryInfo in (0, 1 s] and a
// QuotaFailure.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	var ri *errdetails.RetryInfo
	var qf *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		}
	}
	require.NotNil(t, ri, "RetryInfo")
	d := ri.GetRetryDelay().AsDuration()
	assert.Greater(t, d, time.Duration(0))
	assert.LessOrEqual(t, d, time.Second)
	require.NotNil(t, qf, "QuotaFailure")
	require.NotEmpty(t, qf.GetViolations())
	assert.NotEmpty(t, qf.GetViolations()[0].GetDescription())
}

func TestUnaryServerInterceptor(t *testing.T) {
	var handled atomic.Int32
	rl := fivePerSecond(t)
	addr := serve(t, grpc.UnaryInterceptor(grpcthrottle.UnaryServerInterceptor(rl)),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			handled.Add(1)
			return h(ctx, req)
		}))
	cc := dial(t, addr)
	ctx := context.Background()
	var ok, refused int
	for range 10 {
		var hdr metadata.MD
		err := cc.Invoke(ctx, pingMethod, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse), grpc.Header(&hdr))
		if err == nil {
			ok++
			assert.Equal(t, []string{"5"}, hdr.Get("x-ratelimit-limit"), "the rate-limit fields as header metadata")
			continue
		}
		refused++
		checkRefusal(t, err)
	}
	assert.Equal(t, 5, ok)
	assert.Equal(t, 5, refused)
	assert.EqualValues(t, 5, handled.Load(), "refused calls never reach the handler")
}

func TestStreamServerInterceptor(t *testing.T) {
	rl := fivePerSecond(t)
	addr := serve(t, grpc.StreamInterceptor(grpcthrottle.StreamServerInterceptor(rl)))
	cc := dial(t, addr)
	ctx := context.Background()
	var ok, refused int
	for range 10 {
		if err := watch(ctx, cc); err != nil {
			refused++
			checkRefusal(t, err)
			continue
		}
		ok++
	}
	assert.Equal(t, 5, ok)
	assert.Equal(t, 5, refused)
}

// TestServerInterceptorKeysByMetadata: the RateLimiter's extractor reads
// the call's metadata as headers, and a call without the key is refused
// as the Middleware refuses it (403: PERMISSION_DENIED).
func TestServerInterceptorKeysByMetadata(t *testing.T) {
	rl := fivePerSecond(t, server.WithKey(keyextract.Header("X-Tenant")), server.WithAnonymousKey(""))
	addr := serve(t, grpc.UnaryInterceptor(grpcthrottle.UnaryServerInterceptor(rl)))
	cc := dial(t, addr)
	for _, tenant := range []string{"a", "b"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", tenant)
		for range 5 {
			require.NoError(t, ping(ctx, cc), "each tenant has its own 5")
		}
		checkRefusal(t, ping(ctx, cc))
	}
	assert.Equal(t, codes.PermissionDenied, status.Code(ping(context.Background(), cc)))
}

// TestClientLearnsFromServerInterceptor: a Client against a server
// admitting through the interceptor: the client learns the quota from the
// metadata and the refusals, and keeps its refusals few.
func TestClientLearnsFromServerInterceptor(t *testing.T) {
	rl := fivePerSecond(t)
	addr := serve(t, grpc.UnaryInterceptor(grpcthrottle.UnaryServerInterceptor(rl)))
	var pl pauseLog
	c := grpcthrottle.NewClient(grpcthrottle.WithObserver(pl.observe))
	defer c.Close()
	cc := dial(t, addr, grpc.WithUnaryInterceptor(c.Unary))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var refused int
	for range 20 {
		if err := ping(ctx, cc); err != nil {
			refused++
			checkRefusal(t, err)
		}
	}
	t.Logf("%d refused of 20, %d pauses", refused, len(pl.p))
	assert.LessOrEqual(t, refused, 2)
}

// TestServerInterceptorWithPolicy: a Policy's endpoint patterns match the
// full method ("POST /pkg.Service/Method"): Ping has its own limit of 2,
// the rest the plan's default; a refusal names the violated policy in its
// QuotaFailure.
func TestServerInterceptorWithPolicy(t *testing.T) {
	p, err := server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"only": {
		Endpoints: map[string]server.Rule{"POST " + pingMethod: {Limits: []limiters.Spec{
			{Algorithm: limiters.AlgFixedWindow, Limit: 2, Window: time.Hour},
		}}},
		Default: &server.Rule{Limits: []limiters.Spec{{Algorithm: limiters.AlgFixedWindow, Limit: 4, Window: time.Hour}}},
	}}})
	require.NoError(t, err)
	defer p.Close()
	rl := server.New(nil, server.WithPolicy(p))
	addr := serve(t, grpc.UnaryInterceptor(grpcthrottle.UnaryServerInterceptor(rl)),
		grpc.StreamInterceptor(grpcthrottle.StreamServerInterceptor(rl)))
	cc := dial(t, addr)
	ctx := context.Background()
	for range 2 {
		require.NoError(t, ping(ctx, cc))
	}
	err = ping(ctx, cc)
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	var qf *errdetails.QuotaFailure
	for _, d := range st.Details() {
		if d, ok := d.(*errdetails.QuotaFailure); ok {
			qf = d
		}
	}
	require.NotNil(t, qf)
	assert.NotEmpty(t, qf.GetViolations()[0].GetSubject(), "the violated policy")
	for range 4 {
		require.NoError(t, watch(ctx, cc), "Watch falls under the default rule")
	}
	assert.Equal(t, codes.ResourceExhausted, status.Code(watch(ctx, cc)))
}
