// Package headers reads every real-world rate-limit header format and writes
// ours.
//
// # The model
//
// A server describes its limits as one or more quotas: so many requests (or
// tokens, or points) per window, of which so many remain, until a reset
// time. [Parse] turns whatever a response carries into an [Info]: a list of
// [Quota] values plus the server's Retry-After, if any. Fields the server did
// not send stay unknown (-1 for counts, zero for times and windows), so a
// caller never mistakes a missing value for a real one.
//
// What most callers want is [Info.Delay]: how long a well-behaved client
// waits before its next request. It is the larger of Retry-After and, for
// every quota that is used up, the time until that quota resets.
//
//	info := headers.Parse(resp.Header, time.Now())
//	if d := info.Delay(time.Now()); d > 0 {
//		// pause this partition for d (capped by your own maximum wait)
//	}
//
// On the server side, [Write] advertises a limiter's [limiters.Decision] in
// the legacy X-RateLimit-* form, the IETF RateLimit / RateLimit-Policy form,
// or both, and always sets Retry-After on a denied decision. [WriteLimits]
// advertises several limits, each its own IETF item (q, w, qu; r, t), the
// legacy triple and Retry-After from the one [Binding] chooses, and
// retry-after-ms on a refusal; a final refusal gets no Retry-After.
//
// # Formats Parse understands
//
// Every dialect Parse knows, with an example line each:
//
//	Retry-After (seconds, HTTP-date)   Retry-After: 120
//	                                   Retry-After: Tue, 02 Jan 2024 15:00:30 GMT
//	Retry-After-<name> (NestJS)        Retry-After-short: 1
//	retry-after-ms (OpenAI, Anthropic) retry-after-ms: 250
//	x-ms-retry-after-ms (Azure)        x-ms-retry-after-ms: 1500
//	X-Retry-In (Traefik)               X-Retry-In: 95.238095ms
//	X-RateLimit-* (GitHub)             X-RateLimit-Remaining: 0, X-RateLimit-Reset: 1704211200,
//	                                   X-RateLimit-Used: 5000, X-RateLimit-Resource: core
//	X-RateLimit-Reset-After (Discord)  X-RateLimit-Reset-After: 1.25, X-RateLimit-Bucket: abcd1234
//	x-rate-limit-* (X/Twitter)         x-rate-limit-reset: 1704208500
//	X-RateLimit-* (Reddit)             X-Ratelimit-Remaining: 598.0, X-Ratelimit-Reset: 540
//	X-RateLimit-* (Jira)               X-RateLimit-FillRate: 10, X-RateLimit-Interval-Seconds: 1,
//	                                   X-RateLimit-Reset: 2024-01-02T15:04Z
//	epoch-ms resets                    X-RateLimit-Reset: 1704207602500
//	x-ratelimit-*-<name> (OpenAI)      x-ratelimit-remaining-tokens: 149984, x-ratelimit-reset-tokens: 6m0s
//	X-RateLimit-*-<period> (Kong)      X-RateLimit-Remaining-Minute: 0
//	X-RateLimit-<name>-* (Linear)      X-RateLimit-Requests-Reset: 1704210600000,
//	                                   X-RateLimit-Complexity-Remaining: 249958
//	anthropic-ratelimit-<name>-*       anthropic-ratelimit-input-tokens-reset: 2024-01-02T15:00:30Z
//	X-AI-RateLimit-*-<instance>        X-AI-RateLimit-Remaining-openai-instance: 0
//	  (APISIX ai-rate-limiting)
//	X-HubSpot-RateLimit-*              X-HubSpot-RateLimit-Max: 190, X-HubSpot-RateLimit-Remaining: 189,
//	                                   X-HubSpot-RateLimit-Interval-Milliseconds: 10000,
//	                                   X-HubSpot-RateLimit-Daily-Remaining: 499995
//	Sforce-Limit-Info (Salesforce)     Sforce-Limit-Info: api-usage=18/5000
//	X-Shopify-Shop-Api-Call-Limit      X-Shopify-Shop-Api-Call-Limit: 32/40
//	x-ms-ratelimit-remaining-* (Azure  x-ms-ratelimit-remaining-subscription-reads: 11999
//	  Resource Manager)
//	IETF RateLimit-Policy / RateLimit  RateLimit-Policy: "burst";q=100;w=60;qu="requests";pk=:YQ==:
//	  (draft -08 and later)            RateLimit: "burst";r=50;t=30
//	IETF RateLimit dictionary (-07)    RateLimit: limit=100, remaining=50, reset=30
//	IETF RateLimit-* (-06 and before)  RateLimit-Limit: 100, 100;w=60
//	RateLimit-* (Docker Hub)           ratelimit-remaining: 76;w=21600
//	RateLimit-* (GitLab)               RateLimit-Name: throttle_authenticated_api, RateLimit-Observed: 67,
//	                                   RateLimit-ResetTime: Tue, 02 Jan 2024 15:01:00 GMT
//
// The details that matter:
//
//   - Retry-After is delay-seconds (fractions allowed) or an HTTP-date in
//     any of its three forms, including RFC 1123 dates with a zone other
//     than GMT; retry-after-ms, x-ms-retry-after-ms and X-Retry-In (a Go
//     duration) win over Retry-After because they say the same thing more
//     precisely (Traefik's Retry-After is its X-Retry-In rounded up).
//     Retry-After-<name> is Retry-After: NestJS's throttlers other than
//     its default suffix every field with their name; several give the
//     longest wait.
//   - A numeric reset is told apart by size: at least 1e12 is epoch
//     milliseconds (Linear), at least 1e9 epoch seconds, anything smaller
//     a delay in seconds (APISIX, Kong). Resets may also be an HTTP-date,
//     an RFC 3339 time (with or without seconds) or a Go duration.
//   - Named families give one quota per name ("requests", "tokens",
//     Linear's "complexity" and "endpoint-requests", HubSpot's
//     "interval", "daily" and "secondly", an APISIX instance), with the
//     Unit the name or the provider's documentation says; Kong's and
//     HubSpot's names imply their Window. HubSpot's daily limit resets at
//     midnight in the account's time zone, which no field says, so it has
//     no Reset.
//   - Salesforce reports used/limit: api-usage over a rolling day, and
//     per-app-api-usage=17/250(appName=app) with the app as Partition.
//     Usage beyond the limit (an organization may burst past it) is
//     Remaining 0.
//   - Jira's X-RateLimit-FillRate and X-RateLimit-Interval-Seconds are
//     reported as the Window that refills Limit (so Limit/Window is the
//     sustained rate).
//   - IETF RateLimit items join their RateLimit-Policy by name and, where
//     both carry one, by partition key (pk, reported as Partition). A
//     policy's qu is the Unit ("requests" when it gives none). The t of a
//     RateLimit item becomes Reset = now + t under either meaning the
//     drafts gave it: up to -09 the time until the quota resets, since -10
//     the effective window, within which no more than r is available. The
//     field does not say which draft the server follows, and it need not
//     matter: with r = 0 both mean "wait t", and with r > 0 spending r
//     over t is within either.
//   - A positive Age means the response came from a cache: its quotas are
//     stale, and Parse drops them, as the draft says; Retry-After stays.
//
// Header names match case-insensitively, even as raw, non-canonical map
// keys. Repeated field lines and list members are separate quotas, paired by
// position, because a gateway's and an origin's limits can both be present.
// Garbage is ignored, never a panic and never a wild value: negative counts,
// negative delays and anything more than 366 days ahead are dropped.
// Callers still cap what remains by their own maximum wait.
//
// Parse is literal: it reports what the server said and leaves rounding
// (for example treating a whole-second reset as the end of that second) to
// the caller.
package headers
