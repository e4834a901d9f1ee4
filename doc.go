// Package throttle keeps Go programs inside other people's rate limits.
//
// Its center is Transport, an http.RoundTripper that makes callers wait, in
// fair FIFO order, for a permit from a real limiter (package limiters), and
// that listens to the servers it calls — Retry-After, X-RateLimit-*, the
// IETF RateLimit and RateLimit-Policy fields, and the variants of GitHub,
// OpenAI, Anthropic, Discord, Shopify and others (package headers) — so a
// client pauses and paces itself instead of collecting 429s:
//
//	client := &http.Client{Transport: throttle.NewTransport(nil,
//		throttle.WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(10), 10)),
//	)}
//
// Every goroutine that uses client now shares one limit of 10 requests per
// second, waits its turn in arrival order, and, when the server says
// "0 remaining until 12:00:05" or answers 429 with Retry-After, the whole
// partition holds its queued requests until then.
//
// # Partitions
//
// Requests are partitioned by WithKey (default: the request URL's host,
// including its port). Server feedback is always per partition. WithLimiter
// puts one limiter in front of every partition; WithRepository gives each
// partition its own (repository.NewMemory, or any repository.Repository);
// with neither, only the servers' feedback paces the client.
//
// A concurrency permit (limiters.NewConcurrency, or any limiter for which
// limiters.HoldsPermits is true) is held until the response body is closed
// or read to EOF, and at most for WithPermitLease after the response
// headers arrived (default 15 minutes): a body its caller forgets to close
// gives its permit back then, and the observer receives EventLeaseExpired
// naming the partition.
//
// # What the servers say
//
// After every response the Transport reads its rate-limit headers:
//
//   - A 429 (or a 503 with Retry-After), or a quota with nothing remaining,
//     pauses the partition until the server's reset. Requests that arrive
//     meanwhile stay queued, in order, and are not sent. When the pause ends
//     one request probes the server alone; the rest follow its answer.
//   - Requests already on the wire count against what a quota says remains
//     (ten requests sent before the answer that says "9 left" arrives will
//     use them), and when a quota runs low (a tenth of its limit) the
//     remaining requests are spread evenly until its reset.
//   - Servers are sloppy, and the Transport allows for it: HTTP dates with
//     "UTC" for "GMT"; resets rounded down to the second (a whole-second
//     reset R is taken as a moment in [R, R+1s): the Transport learns each
//     server's sub-second phase from the first probe that opens a new
//     window, and after a refused probe tries again in growing steps from
//     50 ms rather than losing the second); a reset that has passed while
//     nothing remains means "not yet", not "no information"; windows that
//     start at a client's first request; sliding windows that free one slot
//     at a time; 429s with no Retry-After (exponential backoff from 1s); and
//     servers that say nothing until they refuse (the Transport learns a
//     pace from how many requests they took between refusals; the first
//     refusal costs one 429 per request already in flight).
//   - No pause exceeds WithMaxPause (default 15 minutes), so a hostile
//     Retry-After cannot freeze a client. A server that asks for a pause
//     longer than headers.Parse reads (a Retry-After or a reset more than
//     366 days ahead) gets exactly WithMaxPause: it said "stop".
//
// # Failing fast
//
// Each request waits until one deadline: the earlier of its context's
// deadline and WithMaxWait, shared by the server's pauses and the limiter.
// A request that would wait past it fails at once with a
// *limiters.RejectedError (through http.Client, inside a *url.Error: use
// errors.As), whose RetryAfter says when its turn would have come, whose
// Limiter names the limiter and the partition, and whose Reason says which
// bound held; when the bound was the context's deadline it also matches
// context.DeadlineExceeded. Close fails every waiting request with
// limiters.ErrClosed.
//
// # Retries
//
// Retrying belongs to a retry layer, not to RoundTrip: a 429 is returned as
// a response. NewRetryableClient(base, opts...) wires a Transport over the
// caller's base RoundTripper under hashicorp/go-retryablehttp, with Backoff
// (which honours every header format Parse knows and always waits between
// RetryWaitMin and RetryWaitMax) and CheckRetry (which does not retry our
// own refusals), so retries wait in the same queue as everything else. It
// logs nothing unless given WithLogger.
package throttle
