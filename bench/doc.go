// Package bench benchmarks github.com/throttlekit/throttle side by side
// with its peers: its limiters against golang.org/x/time/rate,
// go.uber.org/ratelimit and golang.org/x/sync/semaphore (limiters_test.go);
// its Transport against a bare *http.Transport (transport_test.go); its
// in-memory repository against github.com/sethvargo/go-limiter's
// memorystore and github.com/throttled/throttled/v2's memstore
// (repository_test.go); and its server middleware against go-limiter's
// httplimit, github.com/ulule/limiter/v3's stdlib middleware and
// throttled's HTTPRateLimiterCtx (middleware_test.go).
//
// It is a separate module so that the library's own go.mod does not carry
// the peers. See README.md for what each benchmark measures, how to run
// them, and the results.
package bench
