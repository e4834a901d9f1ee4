// Package apisim simulates rate-limited HTTP APIs, faithfully enough to test
// a client against behaviour nobody in this project chose: each simulator
// follows its provider's documentation, quirks included, and cites it.
//
// Every simulator is a plain [net/http.Handler] that reads time.Now, so it
// runs behind [net/http/httptest.NewServer] and, through the in-memory
// [Transport], inside a testing/synctest bubble on fake time. Each one counts
// what it saw — admitted, refused, per key, the most requests in flight at
// once, the time of every refusal — and returns it from a Snapshot method
// that is safe to call while requests are served.
//
//	simulator        documented source                              behaviour and quirks
//	---------        -----------------                              --------------------
//	OpenAI           platform.openai.com/docs/guides/rate-limits    requests and tokens buckets refilling continuously
//	                 and .../docs/guides/error-codes                ("x-ratelimit-reset-tokens: 6m0s" = full again in
//	                                                                6 minutes); x-ratelimit-{limit,remaining,reset}-
//	                                                                {requests,tokens}, resets in Go duration syntax;
//	                                                                429 rate_limit_exceeded with retry-after-ms,
//	                                                                retry-after and x-should-retry (read by OpenAI's
//	                                                                SDKs); "Request too large … Limit 30000, Requested
//	                                                                45411"; insufficient_quota; optionally refusals
//	                                                                that still spend a request ("unsuccessful requests
//	                                                                contribute to your per-minute limit")
//	Anthropic        docs.anthropic.com/en/api/rate-limits          requests, input tokens and output tokens, each a
//	                 and /en/api/errors                             token bucket "continuously replenished";
//	                                                                anthropic-ratelimit-*-{limit,remaining,reset} with
//	                                                                RFC 3339 resets, tokens-* = the most restrictive;
//	                                                                output checked against max_tokens, charged as used;
//	                                                                429 rate_limit_error with retry-after (seconds);
//	                                                                529 overloaded_error
//	GitHub           docs.github.com/rest/using-the-rest-api/       a fixed window per resource (core, search, graphql
//	                 rate-limits-for-the-rest-api                   in points) starting at the first request;
//	                                                                x-ratelimit-{limit,remaining,used,reset,resource},
//	                                                                reset in epoch seconds rounded down; primary limit
//	                                                                = 403 (or 429) with remaining 0; secondary limit =
//	                                                                403 "You have exceeded a secondary rate limit…",
//	                                                                remaining not 0, Retry-After only if configured
//	Discord          discord.com/developers/docs/topics/            per-route buckets named by a hash in
//	                 rate-limits                                    X-RateLimit-Bucket that omits the top-level
//	                                                                resource: counted for each channel, guild and
//	                                                                webhook apart; X-RateLimit-{limit,remaining,reset,
//	                                                                reset-after} in seconds with milliseconds; 429 with
//	                                                                {"retry_after": 3.477, "global": false}, Retry-After
//	                                                                rounded up, X-RateLimit-Scope: user; a global limit
//	                                                                (50/s) refusing with only X-RateLimit-Global: true,
//	                                                                X-RateLimit-Scope: global and Retry-After
//	LeakyBucket      nginx ngx_http_limit_req_module (burst, no     a shaper: requests held and let through 1/rate
//	                 nodelay)                                       apart, at most burst waiting; the rest a bare 429
//	PenaltyWindow    OpenAI's guide on refused requests counting    a fixed window in which refusals count too, the
//	                                                                overage carried into the next window: a bare 429
//	SlidingWindow    github.com/go-chi/httprate                     sliding-window counter; X-RateLimit-Reset is the
//	                                                                current fixed window's end although the previous
//	                                                                window still weighs in; Retry-After = the window
//	Capacity         RFC 9110 §15.6.4 (503 Service Unavailable)     a concurrency cap answered with a bare 503
//	Quota            the common X-RateLimit-* convention            N per epoch-aligned fixed window per API key
//	Reorder          —                                              wraps any handler: answers held a seeded random
//	                                                                delay, so they arrive out of decision order
//
// Request sizes: an OpenAI request costs what [OpenAITokens] says of its
// body (the documented rule: the larger of max_tokens and a character-count
// estimate); an Anthropic request what [AnthropicTokens] says (input
// estimated from the body's length, output from max_tokens). A request
// body is read up to 1 MiB.
//
// The simulators are for tests: their state grows with the keys they see
// and they start no goroutines.
package apisim
