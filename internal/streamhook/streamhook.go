// Package streamhook lets a response body whose final word comes after its
// header — a gRPC stream's status, which arrives when the stream ends —
// hand that word to the throttle Transport that returned the response, so
// that the partition learns from it as from a response's header. It is
// internal: grpcthrottle (a module of its own in this repository) and the
// root package share it without adding to the root package's public API.
package streamhook

import "net/http"

// Late is implemented by a response body that learns its answer late.
// The Transport learns nothing from such a response's own status (a
// stream the server refuses opens as one it admits); it calls Listen
// once, before it returns the response, with learn. The body calls learn
// from any goroutine with the status and header an HTTP response would
// have carried for the answer when it comes: a 200 once the server has
// shown it admitted the stream (its first message, or its end), a 429
// with Retry-After-Ms for a gRPC RESOURCE_EXHAUSTED carrying
// google.rpc.RetryInfo; at most one success and then at most one
// refusal (a stream admitted, then cut off by a quota).
type Late interface {
	Listen(learn func(status int, h http.Header))
}
