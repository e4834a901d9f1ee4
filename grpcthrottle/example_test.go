package grpcthrottle_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/throttlekit/throttle/grpcthrottle"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// A server admitting 5 calls a minute per caller through a
// server.RateLimiter, and a client that throttles its calls: the client
// learns the quota from the server's metadata, and refuses the sixth call
// itself, unsent, rather than waiting a minute (WithMaxWait); a client
// without it sends the call and the server refuses it with RetryInfo and
// QuotaFailure.
func Example() {
	// The server: the health service, behind the interceptor.
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewTokenBucket(limiters.PerMinute(5), 5)
	})
	defer repo.Close()
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcthrottle.UnaryServerInterceptor(server.New(repo))))
	healthpb.RegisterHealthServer(srv, healthServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()

	// The client.
	c := grpcthrottle.NewClient(grpcthrottle.WithMaxWait(time.Second))
	defer c.Close()
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	for i := 1; i <= 6; i++ {
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		switch {
		case err == nil:
			fmt.Printf("call %d: ok\n", i)
		case errors.Is(err, limiters.ErrRateLimited):
			fmt.Printf("call %d: not sent, the quota is spent (%v)\n", i, status.Code(err))
		default:
			fmt.Printf("call %d: %v\n", i, err)
		}
	}

	// Without the client's interceptor, the server refuses.
	raw, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer raw.Close()
	_, err = healthpb.NewHealthClient(raw).Check(ctx, &healthpb.HealthCheckRequest{})
	st := status.Convert(err)
	fmt.Println("server:", st.Code())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			fmt.Println("  RetryInfo: retry within a minute:", d.GetRetryDelay().AsDuration() <= time.Minute)
		case *errdetails.QuotaFailure:
			fmt.Println("  QuotaFailure:", d.GetViolations()[0].GetSubject())
		}
	}
	// Output:
	// call 1: ok
	// call 2: ok
	// call 3: ok
	// call 4: ok
	// call 5: ok
	// call 6: not sent, the quota is spent (ResourceExhausted)
	// server: ResourceExhausted
	//   RetryInfo: retry within a minute: true
	//   QuotaFailure: default
}

type healthServer struct {
	healthpb.UnimplementedHealthServer
}

func (healthServer) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}
