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
// or both, and always sets Retry-After on a denied decision.
//
// # Formats Parse understands
//
//   - Retry-After as delay-seconds (fractions allowed) or an HTTP-date in
//     any of its three forms, including RFC 1123 dates with a zone other
//     than GMT; retry-after-ms and x-ms-retry-after-ms, which win over
//     Retry-After because they say the same thing more precisely.
//   - X-RateLimit-Limit / -Remaining / -Reset / -Reset-After / -Used /
//     -Resource / -Bucket (GitHub, Discord, Reddit, Jira and many more) and
//     X/Twitter's x-rate-limit-*. A numeric reset is told apart by size:
//     at least 1e12 is epoch milliseconds, at least 1e9 epoch seconds,
//     anything smaller a delay in seconds. Resets may also be an HTTP-date,
//     an RFC 3339 time (with or without seconds) or a Go duration.
//   - OpenAI-style x-ratelimit-limit-requests, x-ratelimit-remaining-tokens,
//     x-ratelimit-reset-requests ("6m0s") and friends: one quota per
//     suffix, named by it ("requests", "tokens"); Kong's
//     X-RateLimit-Limit-Minute and friends get the window their name says.
//   - anthropic-ratelimit-<name>-limit / -remaining / -reset.
//   - The IETF draft-ietf-httpapi-ratelimit-headers: the latest
//     RateLimit-Policy and RateLimit structured fields (items join by
//     name), the earlier RateLimit dictionary (limit=, remaining=, reset=)
//     and the separate RateLimit-Limit / -Remaining / -Reset fields, which
//     GitLab also sends (with RateLimit-Name, RateLimit-Observed and
//     RateLimit-ResetTime).
//   - Shopify's X-Shopify-Shop-Api-Call-Limit ("32/40"), Azure
//     Resource Manager's x-ms-ratelimit-remaining-*, and Jira's
//     X-RateLimit-FillRate and X-RateLimit-Interval-Seconds, reported as the
//     Window that refills Limit (so Limit/Window is the sustained rate).
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
