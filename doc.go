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
// What to call: NewTransport, with WithLimiter (or WithRepository, one
// limiter per partition) for a ceiling of your own and WithMaxWait to fail
// fast; WithCost on a request's context when it spends more than one unit
// of a server's quota (an LLM's tokens, GraphQL points); NewRetryableClient
// when failed requests should be retried; WithFeedbackStore when several
// processes share one API key. Recipes for GitHub, OpenAI and Anthropic:
// docs/recipes.md in the repository.
//
// # Partitions
//
// Requests are partitioned by WithKey (default: the request URL's host,
// including its port). Server feedback is always per partition. WithLimiter
// puts one limiter in front of every partition; WithRepository gives each
// partition its own (repository.NewMemory, or any repository.Repository);
// with neither, only the servers' feedback paces the client.
//
// What a partition learnt of its servers is kept for at most
// WithMaxPartitions partitions (default DefaultMaxPartitions, 16384): past
// that, the least recently used partition with nothing queued or in flight
// and no pause in force is forgotten, and partitions whose servers' limits
// have all reset are swept as requests go on, so a crawler calling millions
// of hosts holds a bounded heap.
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
// After every response the Transport reads its rate-limit headers, and
// keeps, per partition, a model of what the server said: every quota it
// reports, each with its own remaining units, reset and claims of the
// requests on the wire; a pause; a pace; when its whole-second resets
// really come. Every number is read as the bound it is, with its rounding
// and the time the request left and its answer came: a reset written as
// whole seconds rounded up says "within the second before", so the
// partition waits for the earliest end that all the window's answers
// allow, not for the last answer's; a field written to the millisecond
// beside one in whole seconds (X-RateLimit-Reset-After, retry-after-ms)
// narrows it. A request goes only when every quota it charges has room:
//
//   - A 429 (or a 503 with Retry-After, or GitHub's 403 rate limits), or a
//     quota with nothing remaining, pauses the partition until the server's
//     reset. Requests that arrive meanwhile stay queued, unsent. When the
//     pause ends one request probes the server alone; the rest follow its
//     answer.
//   - Costs: a request spends 1 of a quota that counts requests, and of
//     other quotas what it declares with WithCost (an LLM request's
//     tokens, a GraphQL query's points), or, undeclared, what its
//     partition's recent requests declared on average. Requests already on
//     the wire count against what a quota says remains, the server's next
//     answer replaces the estimate, and a cost above a quota's limit fails
//     at once with an *ExceedsQuotaError (errors.Is limiters.ErrExceedsLimit).
//   - Window quotas that run low (a tenth of the limit) spread the units
//     left evenly until the earliest their window may end, when that is
//     more than ten seconds away (a shorter window gains nothing by it),
//     unless a later answer said more remains with the same end (a
//     sliding window that says when its count is all gone).
//   - Windows that start at a client's first request (express-rate-limit's,
//     and many more) are learned from the request that opened each: such a
//     window ends one length after that request arrived, which bounds it
//     to a round trip where an epoch reset in whole seconds leaves a
//     second of doubt; and whatever way a reset in whole seconds was
//     rounded, the window ends less than a second before it, which bounds
//     the length from below (windows of several seconds were otherwise
//     probed a second at a time). Such windows are counted by the
//     server's clock: the way back of the opener's answer and the way
//     there of the next request take at least the shortest round trip
//     seen, so the window's end is that much earlier than its answers
//     show (less a margin; once sixteen answers are timed, and halved
//     each time a probe sent then is still counted in the old window).
//     OpenAI's and Anthropic's quotas refill continuously ("reset 6m0s"
//     means full again in six minutes), so they are modelled as buckets
//     refilling at limit/window: a request waits until enough has
//     refilled, not until the reset. So is any quota whose time until
//     full, told to the millisecond, grows with what is spent at one time
//     a unit (a token or leaky bucket, GCRA, as server.New writes them):
//     two answers, one saying twice as much spent as the other, that agree
//     on that time find it.
//   - Buckets: when a host's answers name their bucket (GitHub's
//     x-ratelimit-resource, Discord's X-RateLimit-Bucket, an IETF pk), each
//     bucket gets its own pauses and pace, learned per route (see
//     WithBucketRoute), so an exhausted search bucket does not hold core
//     requests. A route not learned yet goes as the last route learned
//     of its method and first path segment went (a crawler that meets a
//     new GitHub owner with every request waits for core's reset, as
//     requests of a known route do), until its own answer names its
//     bucket, or reports a quota of none. A route of a family never
//     learned goes through a scout's gate: at most ten of the family go
//     before the first of them is answered, and the rest wait for their
//     answers and go through the bucket those named. Routes are read
//     below an API prefix (/api/v10/channels/1/messages as POST channels
//     1/messages).
//     Discord's bucket hash leaves out the channel, guild or webhook its
//     limit is counted for, so its buckets are kept for each of those
//     apart ("hash channels/1"); and since its global limit spans every
//     bucket, the requests of a partition that has heard from Discord
//     also pass the partition's own gate, paced at the documented fifty a
//     second and taught by the global refusals (X-RateLimit-Scope:
//     global), whose JSON retry_after is read to the millisecond; but
//     for its interaction endpoints, which that limit does not bind.
//     Observer events name a bucket as "host#bucket".
//   - Priority lanes: WithPriority lets a waiting request go before those
//     of lower priority (FIFO among equals); a request yields its place to
//     at most 64 later arrivals, so low priority delays but never starves.
//   - The first wave: a partition sends at most ten requests before its
//     first answer comes back, so that fifty goroutines started at once
//     do not all meet a limit nobody has heard of yet; the rest wait for
//     the wave's answers (a slow first call holds them back at most half
//     a second, once, and never past a request's WithMaxWait or context
//     deadline: such a wait is caution, not the server's word) and go as
//     those answers allow.
//   - Servers that say little: a bare 429 or 503, or an overloaded 529,
//     teaches a pace. The first refusal guesses it (just under what the
//     server took per second before refusing); slow start then doubles
//     the rate after every two successes of requests sent at it until a
//     refusal, which goes back to the last interval a run of successes
//     got through at, and runs search halfway up to the refused one (a
//     refusal before any run halves the rate, and searches back up the
//     same way, whatever wait it asked for); once the two are close the
//     rate creeps up a percent a run, so that no refusal pins the pace for
//     good; the creep dwells five runs, and at least half a minute, just
//     short of the rate last refused before it probes beyond, as TCP CUBIC
//     does; the interval leaves room for the jitter of the way there
//     (four mean deviations of the round trip, at most 20 ms, as a share
//     of a second) (how close this comes to
//     the ideal time is measured in the README and bench/README.md). A first
//     refusal of a request sent after a whole first wave got through (a
//     window emptied at once) holds the partition for the second that
//     window lasts and as much of the next as the burst's refusals may
//     weigh on (their number over the burst's successes, at most a whole
//     second), so that no probe lands in a window that a server counting
//     refusals has put in debt; the pace is then what the whole burst got
//     through. A first refusal within a first wave larger than the server
//     took (more goroutines than its quota) is a bucket's whose burst is
//     smaller than the wave, searched from the guess, or a window's that
//     the wave emptied: the first success after it tells, a bucket's
//     within a step of the guess, a window's only when it turns (the
//     probes before it go at most one, two, four... seconds after the
//     refusal); after half a second or more of refused probes, the wave
//     was a burst, and its quota a second is the pace. A refusal that says
//     when to come back (Retry-After) is obeyed to the end of its wait,
//     whatever other answers say meanwhile (but probes after waits told in
//     whole seconds, refused for ten of them with no success since, each
//     wait half as long again as the last: a count that takes refusals in,
//     of fewer than one a second, is kept over its limit by a probe each
//     second for ever); if no quota at zero explains
//     it (no quota advertised, or GitHub's secondary limits beside quotas
//     with room), it also starts a pace at what the server took since the
//     last pause (counted when its pause ends), which is then searched
//     like any other: a Retry-After sets the pause, never freezes the
//     pace. Beside quotas with room (a limit the server keeps to itself,
//     whose wait is a penalty rather than the rest of a window), a first
//     refusal that ended a burst shorter than its wait (of at most ten
//     seconds) paces at that burst per second, and a second measures the
//     pace over the run and the wait, the tighter of its and the first's. A
//     later such refusal whose wait is told finer than the second and ends a
//     whole number of seconds after the last wait ended marks a fixed
//     window, and measures the pace again over it. While the answers to the
//     first requests come back, a new request waits for the rest (as long
//     again as the first took, at least 50 ms and at most half a second), so
//     that a refusal still on its way pauses the partition before a second
//     wave meets the same limit; and when they all succeeded without a word
//     of limits, the requests after them go one, then two, four, eight, each
//     batch once the last is answered, until a batch as large as the first
//     wave got through, so that a wave that spent a window costs one
//     refusal, not a wave of them. The creep beyond the rate last refused
//     waits thirty times that refusal's wait, since each probe beyond it may
//     cost as much. A sliding window that reports its fixed window's end as
//     its reset (go-chi/httprate) is recognised by a new window that opens
//     nearly exhausted, and paced just under its limit; so is one whose
//     reset, told finer than the second, is when its count will be all gone
//     (this project's server over a repository: the end of the window after
//     the current one), by a reset that steps a whole window on while the
//     old one is still over half a window away; one whose resets step by
//     other than whole windows counts exactly (a sliding log's oldest
//     entry's expiry, koa-ratelimit over Redis), and the margin under its
//     limit is searched down from 0.6 requests a window to 0.1, a refusal
//     ending the search. A count that falls while the reset stays put (a
//     request sent after the answer that said none remained finds some,
//     at the same whole-second reset) is no fixed window's either: the
//     quota is taken for a sliding log, and what its last answer said
//     remains goes at once. A sliding log's window is also bounded by
//     what its answers count: c of our requests in it puts the window
//     between the sends c and c+1 back (Flask-Limiter's moving window
//     writes its reset as when the log will be empty, a second or more
//     beyond a window); once the counts pin it, the next request goes a
//     window after the limit-th newest of ours, not paced under the
//     limit, until one it timed is refused. A server may keep several
//     such logs of a client's requests (@nestjs/throttler's several
//     throttlers): each is bounded and timed so, and the one that frees
//     last holds the next request.
//     A window every request restarts (Flask-Limiter's elastic window)
//     is told by a refusal that pushed its reset a second or more on
//     while every answer's reset lay a whole number of seconds (rounded
//     up) after its request; it then ends a window after the last
//     request reached the server, and the next opens without a probe.
//     A server that says nothing but its refusals has its windows bounded
//     by them: each refused request says the window is longer than the
//     time since it opened, each opening that it is no longer; once two
//     windows have proven the bounds close, a window that let its quota
//     through at once holds the next request for its end, and every
//     request after waits a window after the one a quota back. One that
//     blocks a refused client for a window from the refusal
//     (@nestjs/throttler with setHeaders false) is held for the block's
//     length, which its refusals and openings bound the same way.
//   - Final refusals (OpenAI's insufficient_quota, a request too large)
//     neither pause nor teach anything: see Classify. An IETF quota whose
//     unit is concurrent-requests bounds the requests in flight.
//   - GitHub's secondary limits count requests in flight, and GitHub asks
//     integrators not to send one user's requests concurrently: once an
//     answer shows a partition's server is GitHub's (it names its
//     resource in X-RateLimit-Resource), the partition keeps at most ten
//     requests on the wire, as GitHub's own client (Octokit's throttling
//     plugin) does. A limit it keeps to itself then meets bursts of ten,
//     not of every goroutine at once. Ten in flight at 300 ms a request
//     is 33 a second, above the 900 points a minute GitHub documents.
//   - Streams that say stop after their 200: in a text/event-stream body,
//     an error event reporting an overload (Anthropic's overloaded_error,
//     OpenAI's server_is_overloaded) is learned, when the body reaches
//     it, as a 529, and one reporting a rate limit (rate_limit_error,
//     rate_limit_exceeded) as a 429. The body reads through unchanged.
//   - Servers are sloppy, and the Transport allows for it: HTTP dates with
//     "UTC" for "GMT"; resets rounded down to the second (a whole-second
//     reset R is taken as a moment in [R, R+1s): the Transport learns each
//     server's sub-second phase from the first probe that opens a new
//     window, and after a refused probe tries again in growing steps from
//     50 ms rather than losing the second; where windows start at a
//     client's request, probes that find a window open past the reset it
//     wrote have every later reset read as rounded down, and the window
//     end where its length, learned from the windows before, puts it,
//     within the second after the reset); resets written to the
//     millisecond (Reset-After: 0.25) rounded, so a millisecond short (the
//     Transport waits that millisecond more); a server's clock behind
//     ours (koa-ratelimit's memory driver keeps its own, up to a
//     millisecond behind): a request refused at zero, sent after such a
//     reset, shows the lag, which is waited for from then on, doubled on
//     each such refusal; a reset in whole seconds that has passed while
//     nothing remains means "not yet", not "no information"; windows
//     that start at a client's first request.
//   - No pause exceeds WithMaxPause (default 15 minutes), so a hostile
//     Retry-After cannot freeze a client. A server that asks for a pause
//     longer than headers.Parse reads (a Retry-After or a reset more than
//     366 days ahead) gets exactly WithMaxPause: it said "stop".
//
// # A fleet
//
// Transports in several processes behind one API key share what they learn
// through a FeedbackStore (WithFeedbackStore): a pause one learns reaches
// all, one of them (elected by the store) sends the probe after it, and a
// window quota the server reports is claimed in the store before each
// request, so the fleet spends it once. A partition the servers said
// nothing about costs no call to the store. NewMemoryFeedbackStore shares
// within one process; redisrepo.NewFeedbackStore across processes. When the
// store fails, each Transport goes on alone and tells its observer
// (EventStoreUnavailable).
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
// own refusals nor final ones, and obeys x-should-retry; a refusal that
// asks for longer than DefaultMaxPause, such as a subscription's window
// spent for hours, it reports as a *limiters.RejectedError carrying the
// wait instead of sleeping on it), so retries wait in the same queue as
// everything else. It logs nothing unless given
// WithLogger.
//
// # For implementers
//
// FeedbackStore's methods, and the values they pass (package
// feedbackstore), are for those who write a store; users only pass a store
// (NewMemoryFeedbackStore, redisrepo.NewFeedbackStore) to
// WithFeedbackStore. A repository or limiter that holds no permits says so
// with limiters.PermitHolder.
package throttle
