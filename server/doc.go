// Package server is admission control for inbound requests: net/http
// middleware that charges each request to its caller's limiter, admits or
// rejects it, and tells the client where it stands.
//
// What to call: New with a repository (one limiter per caller), then
// wrap your handler with its Middleware; for plans and per-endpoint limits,
// LoadPolicy and New(nil, WithPolicy(p)). Both are shown below.
//
// # The model
//
// A [RateLimiter] finds the caller of a request with a keyextract.Extractor
// (by default the client's IP address, with no trusted proxies: a forged
// X-Forwarded-For counts for nothing), and charges the caller's limiter in a
// repository.Repository — one limiter per key, made by the repository's
// factory. What most callers want:
//
//	repo := repository.NewMemory(func(string) limiters.Limiter {
//		return limiters.NewGCRA(limiters.PerSecond(10), 20)
//	}, repository.WithMaxKeys(1_000_000))
//	defer repo.Close()
//	rl := server.New(repo)
//	http.ListenAndServe(":8080", rl.Middleware(mux))
//
// Every response carries the rate-limit fields of [WithHeaders] (legacy
// X-RateLimit-* and the IETF RateLimit / RateLimit-Policy by default). A
// rejection is 429 Too Many Requests with Retry-After and an RFC 9457
// application/problem+json body ([Problem]): type
// https://iana.org/assignments/http-problem-types#quota-exceeded, title,
// status, detail, retry_after (seconds) and violated-policies. The IETF
// draft's other two types, temporary-reduced-capacity (503) and
// abnormal-usage-detected, are sent when a policy Rule's Problem or
// [WithProblemType] says so. Every refusal also carries retry-after-ms, the
// wait to the millisecond.
//
// Under a [Policy], each limit of a rule is advertised on its own: one
// RateLimit-Policy item per limit, named after the rule and the limit
// ("POST /api/ask 10/1m"), with q and w stating the rate the limit admits
// (and qu: "concurrent-requests", "cost"), and one RateLimit item with r
// (what a request is admitted with now) and t (seconds until more quota is
// available, rounded up). The legacy X-RateLimit-* triple and Retry-After
// are the binding limit's (headers.Binding): the one that refused, else the
// one with the least left. violated-policies names the limits that refused.
// What each algorithm advertises is tabled in advertise.go and the README.
// A repository's limiter that is a [limiters.Chain] is advertised the same
// way, member by member (named after their algorithms, "gcra" and
// "fixed_window"), when the repository reports its members
// ([repository.Memory], redisrepo; the first request tells whether its
// limiters are chains): a chain's one Decision mixes them.
//
// A request asking for more than a limit ever admits at once (a cost above
// a cost cap, a weight above a burst) is refused for good: 429 with
// [ProblemTypeRequestExceedsLimit], no Retry-After and no retry_after; its
// Event says Final. headers.Classify reads it as final (TooLarge).
//
// Behaviours worth knowing:
//
//   - A request whose extractor finds no key (ok == false) is charged to
//     one bucket shared by all such requests, [AnonymousKey]; see
//     [WithAnonymousKey] to rename it or refuse such requests with 403.
//   - When the repository fails (a closed repository,
//     repository.ErrTooManyKeys, a remote store that does not answer) the
//     middleware fails open by default: it admits the request, without
//     rate-limit fields, and reports [EventError] to the observer.
//     [WithFailOpen](false) answers 503.
//   - Permits a limiter holds (concurrency limits) go back exactly once
//     when the handler returns, even if it panics. A repository that says
//     it holds none (limiters.PermitHolder) is not called to release.
//   - A request costing more than its limit could ever grant
//     ([WithCost]) is rejected with 429 and a detail that says so.
//   - A leaky bucket (limiters.NewLeakyBucket) is a queue, and is served
//     as one, as nginx's limit_req serves its burst: a request that finds
//     its slot taken and room in its queue is held until its slot, then
//     admitted, if that slot is at most a second away (a slow bucket, a
//     slot every few minutes, refuses with the wait instead of holding a
//     request for minutes); only a full queue refuses, with Retry-After
//     until the next slot frees a place. It advertises that queue: r its free room, t its
//     next slot. (server.New holds for a lone leaky bucket in a
//     repository.Memory; a Policy for a rule's limits in its default
//     storage under [Block], the limits beside it admitting; elsewhere,
//     as in Redis, a bucket whose slot is taken refuses.)
//
// # Policies
//
// A [Policy] chooses limits per request, so that one middleware serves a
// real API: plans (free, pro, enterprise) resolved from the request by
// [WithPlan]; per plan, rules per endpoint, matched as http.ServeMux
// patterns ("POST /api/ask", "GET /items/{id}"; the most specific wins) with
// a per-plan default; several limits per rule at once (10/min and 1000/day
// and 5 in flight); cost caps charged a per-request cost ([WithCapCost]:
// LLM tokens, money); allow and block lists of addresses and prefixes, of
// any length (prefix tables; long lists from files or [WithBlockList]); and
// per rule an [Action]: [Block] (429), [Delay] (hold the request until a
// permit frees, up to a bound) or [Shadow] (admit, but report it as would-be
// rejected). Policies are Go values ([PolicyConfig], [NewPolicy]) or files
// ([LoadPolicy], [ParsePolicy], JSON or YAML); every limit is a
// limiters.Spec. A rule's limits are decided together, all or nothing, in
// one repository per rule: by default in memory, or wherever [WithStorage]
// puts them. A handler that learns a request's real cost only once it has
// run (the tokens of an LLM completion) charges it with [ChargeCost].
//
//	p, err := server.LoadPolicy("policy.yaml", server.WithPlan(planOf))
//	if err != nil {
//		// e.g. server: policy policy.yaml:12:47: plans.pro.endpoints["POST /api/ask"].limits[1].rate: limiters: invalid rate "10/x": period must be a positive duration such as s, m, h, d or 30s
//		log.Fatal(err)
//	}
//	defer p.Close()
//	rl := server.New(nil, server.WithPolicy(p), server.WithKey(keyextract.Header("X-API-Key")))
//
// # Hostile policy files
//
// A policy file is input, and may come from someone who wants to hurt the
// server. Nothing in one can panic a request: every limit is validated and
// built once by [NewPolicy]. Reading one is bounded: at most
// [MaxPolicySize] (1 MiB) is read, and at most [MaxPolicyNodes] YAML nodes
// are decoded, each alias counted at every use, so nested aliases ("billion
// laughs") are refused in time linear in the file. An error quotes at most
// a few dozen bytes of any value. What the worst files the bounds allow
// cost (BenchmarkPolicyWorstCase) is in bench/README.md.
//
// # Near the limit
//
// When an admitted request has used 80% of a limit ([DefaultNearLimit];
// see [WithNearLimit]) the observer sees [EventNearLimit] and, if a header
// name was given, the response carries it, so clients can back off early.
//
// # Observing
//
// [WithObserver] is called synchronously for every decision with an
// [Event]: allowed, delayed, rejected, shadow-rejected, near the limit,
// bypassed, forbidden, or a repository error.
package server
