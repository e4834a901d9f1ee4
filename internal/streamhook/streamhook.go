// Package streamhook lets a response body whose final word comes after its
// header — a gRPC stream's status, which arrives when the stream ends —
// hand that word to the throttle Transport that returned the response, so
// that the partition learns from it as from a response's header. It is
// internal: grpcthrottle (a module of its own in this repository) and the
// root package share it without adding to the root package's public API.
package streamhook

import "net/http"

// Late is implemented by a response body that learns its answer late.
// The Transport calls Listen once, before it returns the response, with
// learn; the body calls learn at most once, from any goroutine, with the
// status and header an HTTP response would have carried for that answer
// (a 429 with Retry-After-Ms for a gRPC RESOURCE_EXHAUSTED carrying
// google.rpc.RetryInfo).
type Late interface {
	Listen(learn func(status int, h http.Header))
}
