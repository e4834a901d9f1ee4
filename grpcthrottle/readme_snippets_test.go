//lint:file-ignore SA4006 the snippet is the README's own, which skips error checks for brevity

package grpcthrottle_test

// The README's gRPC snippet, verbatim, inside a function that gives it its
// free variables, so that the compiler checks it (this module has grpc;
// the root module's TestDocSnippets checks that the snippet is here). It
// is compiled, never run.

import (
	"time"

	"google.golang.org/grpc"

	"github.com/throttlekit/throttle/grpcthrottle"
	"github.com/throttlekit/throttle/limiters"
)

func readmeGRPC(target string, creds grpc.DialOption) {
	c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(50), 50)),
		grpcthrottle.WithMaxWait(2*time.Second))
	defer c.Close()
	conn, err := grpc.NewClient(target, grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream), creds)
	// A call's own error comes back unchanged; one refused unsent matches limiters.ErrRateLimited
	// (its status: RESOURCE_EXHAUSTED); after c.Close(), limiters.ErrClosed.
	_, _ = conn, err
}

var _ = readmeGRPC
