// Package bench benchmarks github.com/throttlekit/throttle/limiters side by
// side with its peers: golang.org/x/time/rate, go.uber.org/ratelimit and
// golang.org/x/sync/semaphore.
//
// It is a separate module so that the library's own go.mod does not carry
// the peers. Everything lives in limiters_test.go; see README.md for what
// each benchmark measures and how to run them.
package bench
