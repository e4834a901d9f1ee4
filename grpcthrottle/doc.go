// Package grpcthrottle keeps gRPC calls inside a rate limit, on both
// sides, with the same model the throttle Transport uses for HTTP.
//
// On the client, a Client's Unary and Stream are interceptors: every call
// waits, in FIFO order with priority lanes (throttle.WithPriority on the
// call's context), for its partition — the ClientConn's target by default
// — and for the partition's limiter (WithLimiter, WithRepository). The
// partition pauses and paces itself on what the server says when it
// refuses: RESOURCE_EXHAUSTED or UNAVAILABLE with google.rpc.RetryInfo
// (how long to wait), google.rpc.QuotaFailure (which quota), the
// grpc-retry-pushback-ms trailer, and rate-limit fields sent as metadata
// (x-ratelimit-*, the IETF RateLimit fields, ...; a unary call's header
// and trailer, a stream's header once it is admitted, a failed stream's
// trailer):
//
//	c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(10), 10)))
//	defer c.Close()
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream), ...)
//
// There is one server model, not two: a Client is a throttle.Transport
// whose sender performs the gRPC call and tells the Transport what the
// call's status would have said as an HTTP answer (a RESOURCE_EXHAUSTED
// with a RetryInfo of 1.5 s is a 429 with Retry-After-Ms: 1500), so that
// every rule the Transport knows — pauses, the probe after a pause,
// quotas spread until their reset, the pace it learns from bare refusals
// — holds for gRPC too. Any throttle.Option can be passed to NewClient:
// throttle.WithKey(keyextract.Header("x-tenant")) partitions by outgoing
// metadata (a call's request is seen with the target as its host, the
// full method as its path and its outgoing metadata as its header).
//
// A call's own error comes back unchanged. A call refused before it was
// sent — it would wait past WithMaxWait or its deadline, or the Client was
// closed — fails with an error that matches limiters.ErrRateLimited
// (errors.Is; a *limiters.RejectedError through errors.As says when its
// turn would have come) or limiters.ErrClosed, and that carries a gRPC
// status too (status.Code: RESOURCE_EXHAUSTED, CANCELED,
// DEADLINE_EXCEEDED).
//
// A stream opens before the server has answered: it counts as a call the
// server took once its first message (or its end) shows it was admitted,
// and a stream refused with RetryInfo teaches its partition when its
// status comes, as a refused unary call does at once. A
// stream holds its permit of a concurrency limiter until it ends (RecvMsg
// returned an error, or the one response of a client-streaming call) or
// its context is done.
//
// On the server, UnaryServerInterceptor and StreamServerInterceptor admit
// calls through a server.RateLimiter, as its Middleware admits HTTP
// requests, and refuse with RESOURCE_EXHAUSTED carrying RetryInfo and
// QuotaFailure.
//
// grpcthrottle is a module of its own, so that the throttle module does
// not depend on gRPC.
package grpcthrottle
