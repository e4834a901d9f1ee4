// Package keyextract turns a request into a partition key: the name of the
// limiter a request is charged to.
//
// An [Extractor] reads a [Request], a small framework-agnostic view of an
// HTTP request, and returns a key and whether one could be determined. Wrap a
// *http.Request with [HTTP]; the adapter does not allocate. Other frameworks
// implement [Request] themselves.
//
// The extractors most callers want:
//
//   - [Host] for outbound calls: one partition per server, host and port
//     (the default of the client-side Transport);
//   - [IP] for servers: one partition per client address, IPv6 clients
//     grouped by /64, forwarding headers honoured only from trusted proxies
//     (the default of the server-side middleware, with no trusted proxies);
//   - [Header] for API keys and tenants, [Route] for per-endpoint limits;
//   - [Composite] to combine them, [Func] for anything else, [Global] for
//     one key shared by every request.
//
// Every extractor is safe for concurrent use and returns keys built with as
// few allocations as possible; see each one for what it returns when no key
// can be determined (ok == false), which callers usually treat as "do not
// limit" or "reject", as they choose.
//
// For example, a server behind a load balancer in 10.0.0.0/8 that limits
// each client per API key:
//
//	ex := keyextract.Composite("|",
//		keyextract.IP(netip.MustParsePrefix("10.0.0.0/8")),
//		keyextract.Header("X-API-Key"),
//	)
//	key, ok := ex.Extract(keyextract.HTTP(r))
package keyextract
