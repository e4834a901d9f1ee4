package headers

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Quota is one limit a server reports: Limit units per Window, of which
// Remaining are left until Reset.
type Quota struct {
	Name      string        // "requests", "tokens", a policy name, GitHub's resource...
	Limit     int64         // -1 when the server did not say
	Remaining int64         // -1 when the server did not say
	Reset     time.Time     // zero when the server did not say
	Window    time.Duration // zero when the server did not say

	// Unit is what Limit and Remaining count, when the server or its
	// documentation says: the IETF qu parameter ("requests",
	// "content-bytes", "concurrent-requests"; "requests" when a policy
	// gives none), or "requests", "tokens" or "complexity" for the
	// dialects whose names or documentation say so. Empty when unknown.
	Unit string
	// Partition tells apart buckets of one policy: the bytes of the IETF
	// pk parameter, or Salesforce's appName. Empty when the server did
	// not say.
	Partition string
}

// Info is everything a response says about rate limits.
type Info struct {
	// Quotas come in a fixed order: the IETF RateLimit fields, the older
	// RateLimit-* fields, X-RateLimit-*, then the named families
	// (x-ratelimit-*-<name> and x-ratelimit-<name>-*, anthropic-ratelimit-*,
	// x-ms-ratelimit-*, x-ai-ratelimit-*, x-hubspot-ratelimit-*) sorted by
	// name, Shopify's call limit and Salesforce's usage.
	Quotas        []Quota
	RetryAfter    time.Duration // meaningful only if HasRetryAfter
	HasRetryAfter bool
}

// Delay is how long a well-behaved client waits before its next request:
// the larger of RetryAfter and, for any quota with Remaining == 0,
// Reset−now. It is never negative.
func (i Info) Delay(now time.Time) time.Duration {
	var d time.Duration
	if i.HasRetryAfter && i.RetryAfter > d {
		d = i.RetryAfter
	}
	for _, q := range i.Quotas {
		if q.Remaining == 0 && !q.Reset.IsZero() {
			d = max(d, q.Reset.Sub(now))
		}
	}
	return d
}

// kind says which field a header is. The kinds below numStatic have fixed
// names; the named kinds carry a quota name in the header's own name.
type kind uint8

const (
	kindNone kind = iota

	kindRetryAfter   // Retry-After
	kindRetryAfterMs // retry-after-ms, x-ms-retry-after-ms

	kindPolicy    // RateLimit-Policy
	kindRateLimit // RateLimit

	// Earlier IETF drafts, and GitLab.
	kindDraftLimit     // RateLimit-Limit
	kindDraftRemaining // RateLimit-Remaining
	kindDraftReset     // RateLimit-Reset
	kindDraftResetTime // RateLimit-ResetTime (GitLab)
	kindDraftObserved  // RateLimit-Observed (GitLab)
	kindDraftName      // RateLimit-Name (GitLab)

	// X-RateLimit-* and x-rate-limit-*.
	kindXLimit      // X-RateLimit-Limit
	kindXRemaining  // X-RateLimit-Remaining
	kindXReset      // X-RateLimit-Reset
	kindXResetAfter // X-RateLimit-Reset-After (Discord)
	kindXUsed       // X-RateLimit-Used (GitHub, Reddit)
	kindXResource   // X-RateLimit-Resource (GitHub)
	kindXBucket     // X-RateLimit-Bucket (Discord)
	kindXScope      // X-RateLimit-Scope (Discord)
	kindXInterval   // X-RateLimit-Interval-Seconds (Jira)
	kindXFillRate   // X-RateLimit-FillRate (Jira)

	kindShopify    // X-Shopify-Shop-Api-Call-Limit
	kindSalesforce // Sforce-Limit-Info
	kindAge        // Age: a positive one means the response came from a cache

	numStatic

	// Named kinds: the order is the index into named.fields.
	kindNamedLimit
	kindNamedRemaining
	kindNamedReset
	kindNamedWindow
)

// family tells apart the header families that carry quota names.
type family uint8

const (
	famX         family = iota // x-ratelimit-limit-<name> (OpenAI), x-ratelimit-<name>-limit (Linear)
	famAnthropic               // anthropic-ratelimit-<name>-limit
	famAzure                   // x-ms-ratelimit-remaining-<name>
	famAI                      // x-ai-ratelimit-limit-<name> (APISIX)
	famHubSpot                 // x-hubspot-ratelimit-*
)

// classify says which field the header named k is, ignoring case. For the
// named kinds it also returns the family and the name as written in k.
func classify(k string) (kind, family, string) {
	if k == "" {
		return kindNone, 0, ""
	}
	switch k[0] | 0x20 {
	case 'r':
		switch {
		case equalFold(k, "Retry-After"):
			return kindRetryAfter, 0, ""
		case equalFold(k, "Retry-After-Ms"):
			return kindRetryAfterMs, 0, ""
		case equalFold(k, "RateLimit"):
			return kindRateLimit, 0, ""
		case hasPrefixFold(k, "RateLimit-"):
			return draftField(k[len("RateLimit-"):]), 0, ""
		}
	case 'x':
		switch {
		case hasPrefixFold(k, "X-RateLimit-"):
			return xField(k[len("X-RateLimit-"):])
		case hasPrefixFold(k, "X-Rate-Limit-"):
			return xField(k[len("X-Rate-Limit-"):])
		case equalFold(k, "X-Ms-Retry-After-Ms"):
			return kindRetryAfterMs, 0, ""
		case hasPrefixFold(k, "X-Ms-RateLimit-Remaining-") && len(k) > len("X-Ms-RateLimit-Remaining-"):
			return kindNamedRemaining, famAzure, k[len("X-Ms-RateLimit-Remaining-"):]
		case equalFold(k, "X-Shopify-Shop-Api-Call-Limit"):
			return kindShopify, 0, ""
		case hasPrefixFold(k, "X-AI-RateLimit-"):
			return prefixed(k[len("X-AI-RateLimit-"):], famAI)
		case hasPrefixFold(k, "X-HubSpot-RateLimit-"):
			return hubSpotField(k[len("X-HubSpot-RateLimit-"):])
		}
	case 's':
		if equalFold(k, "Sforce-Limit-Info") {
			return kindSalesforce, 0, ""
		}
	case 'a':
		if equalFold(k, "Age") {
			return kindAge, 0, ""
		}
		if hasPrefixFold(k, "Anthropic-RateLimit-") {
			rest := k[len("Anthropic-RateLimit-"):]
			i := strings.LastIndexByte(rest, '-')
			if i <= 0 {
				break
			}
			name, field := rest[:i], rest[i+1:]
			switch {
			case equalFold(field, "limit"):
				return kindNamedLimit, famAnthropic, name
			case equalFold(field, "remaining"):
				return kindNamedRemaining, famAnthropic, name
			case equalFold(field, "reset"):
				return kindNamedReset, famAnthropic, name
			}
		}
	}
	return kindNone, 0, ""
}

// draftField classifies the part of a RateLimit-* name after the dash.
func draftField(s string) kind {
	switch {
	case equalFold(s, "Policy"):
		return kindPolicy
	case equalFold(s, "Limit"):
		return kindDraftLimit
	case equalFold(s, "Remaining"):
		return kindDraftRemaining
	case equalFold(s, "Reset"):
		return kindDraftReset
	case equalFold(s, "ResetTime"):
		return kindDraftResetTime
	case equalFold(s, "Observed"):
		return kindDraftObserved
	case equalFold(s, "Name"):
		return kindDraftName
	}
	return kindNone
}

// xField classifies the part of an X-RateLimit-* name after the prefix.
func xField(s string) (kind, family, string) {
	switch {
	case equalFold(s, "Limit"):
		return kindXLimit, 0, ""
	case equalFold(s, "Remaining"):
		return kindXRemaining, 0, ""
	case equalFold(s, "Reset"):
		return kindXReset, 0, ""
	case equalFold(s, "Reset-After"):
		return kindXResetAfter, 0, ""
	case equalFold(s, "Used"):
		return kindXUsed, 0, ""
	case equalFold(s, "Resource"):
		return kindXResource, 0, ""
	case equalFold(s, "Bucket"):
		return kindXBucket, 0, ""
	case equalFold(s, "Scope"):
		return kindXScope, 0, ""
	case equalFold(s, "Interval-Seconds"):
		return kindXInterval, 0, ""
	case equalFold(s, "FillRate"):
		return kindXFillRate, 0, ""
	}
	if kd, fam, name := prefixed(s, famX); kd != kindNone {
		return kd, fam, name
	}
	// Linear: X-RateLimit-Requests-Limit, X-RateLimit-Complexity-Reset.
	for _, p := range namedParts {
		if n := len(s) - len(p.part) - 1; n > 0 && s[n] == '-' && equalFold(s[n+1:], p.part) {
			return p.kind, famX, s[:n]
		}
	}
	return kindNone, 0, ""
}

// namedParts are the fields of a named quota, as header names spell them.
var namedParts = [...]struct {
	part string
	kind kind
}{
	{"Limit", kindNamedLimit},
	{"Remaining", kindNamedRemaining},
	{"Reset", kindNamedReset},
}

// prefixed classifies "Limit-<name>", "Remaining-<name>" and
// "Reset-<name>" as a named field of family fam.
func prefixed(s string, fam family) (kind, family, string) {
	for _, p := range namedParts {
		if n := len(p.part); len(s) > n+1 && s[n] == '-' && equalFold(s[:n], p.part) {
			return p.kind, fam, s[n+1:]
		}
	}
	return kindNone, 0, ""
}

// hubSpotField classifies the part of an X-HubSpot-RateLimit-* name after
// the prefix. HubSpot names its quotas by the field: Max, Remaining and
// Interval-Milliseconds describe the rolling interval; Daily and Secondly
// are limits whose -Remaining says what is left.
func hubSpotField(s string) (kind, family, string) {
	for _, f := range hubSpotFields {
		if equalFold(s, f.field) {
			return f.kind, famHubSpot, f.name
		}
	}
	return kindNone, 0, ""
}

var hubSpotFields = [...]struct {
	field string
	kind  kind
	name  string
}{
	{"Max", kindNamedLimit, "interval"},
	{"Remaining", kindNamedRemaining, "interval"},
	{"Interval-Milliseconds", kindNamedWindow, "interval"},
	{"Daily", kindNamedLimit, "daily"},
	{"Daily-Remaining", kindNamedRemaining, "daily"},
	{"Secondly", kindNamedLimit, "secondly"},
	{"Secondly-Remaining", kindNamedRemaining, "secondly"},
}

// field holds the lines of one header, and the raw map key they came
// under so that two spellings of one name merge in a fixed order.
type field struct {
	key  string
	vals []string
}

// add records the lines vals found under key.
func (f *field) add(key string, vals []string) {
	if f.vals == nil {
		f.key, f.vals = key, vals
		return
	}
	// The same name spelt twice (say, "X-RateLimit-Limit" set with Add and
	// "x-ratelimit-limit" set directly): rare, so allocating is fine, but
	// map order is random, so order the lines by key.
	a, b := f.vals, vals
	if key < f.key {
		a, b = b, a
		f.key = key
	}
	f.vals = append(append(make([]string, 0, len(a)+len(b)), a...), b...)
}

// named gathers the fields of one named quota: limit, remaining, reset
// and window.
type named struct {
	fam    family
	name   string
	fields [4]field
}

// commonNames are the names the named families use, so the usual case
// needs no allocation to lower-case them.
var commonNames = [...]string{
	"requests", "tokens", "input-tokens", "output-tokens",
	"subscription-reads", "subscription-writes", "subscription-deletes",
	"tenant-reads", "tenant-writes", "tenant-deletes",
	"subscription-resource-requests", "subscription-resource-entities-read",
	"resource", "second", "minute", "hour", "day",
	"complexity", "endpoint-requests", "interval", "daily", "secondly",
}

// lowerName returns name in lower case, without allocating for the
// common names.
func lowerName(name string) string {
	for _, c := range commonNames {
		if equalFold(name, c) {
			return c
		}
	}
	return strings.ToLower(name)
}

// addNamed records one named field in nd and returns nd.
func addNamed(nd []named, fam family, name string, idx int, key string, vals []string) []named {
	for i := range nd {
		if nd[i].fam == fam && equalFold(nd[i].name, name) {
			nd[i].fields[idx].add(key, vals)
			return nd
		}
	}
	nd = append(nd, named{fam: fam, name: lowerName(name)})
	nd[len(nd)-1].fields[idx].add(key, vals)
	return nd
}

// Parse reads the rate-limit fields of a response header. now is the time
// the response arrived: relative resets and delays are counted from it, and
// absolute resets are returned in its location.
//
// A response served from a cache, which a positive Age field says, reports
// no quotas: they describe the moment the origin answered, not now, and
// the IETF draft says to ignore them. Its Retry-After still counts, because
// HTTP counts a delay from when the response is received.
//
// Parse never fails: fields it does not know are skipped and values it
// cannot read are left unknown.
func Parse(h http.Header, now time.Time) Info {
	var (
		st   [numStatic]field
		nbuf [8]named
	)
	nd := nbuf[:0]
	found := false
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		kd, fam, name := classify(k)
		switch {
		case kd == kindNone:
		case kd == kindAge:
			st[kd].add(k, vs) // not a rate-limit field on its own
		case kd < numStatic:
			st[kd].add(k, vs)
			found = true
		default:
			nd = addNamed(nd, fam, name, int(kd-kindNamedLimit), k, vs)
			found = true
		}
	}
	if !found {
		return Info{} // most responses: nothing about rate limits
	}

	var info Info
	// The millisecond forms say the same as Retry-After, more precisely.
	for _, v := range st[kindRetryAfterMs].vals {
		if d, ok := parseMillis(v); ok {
			info.RetryAfter = max(info.RetryAfter, d)
			info.HasRetryAfter = true
		}
	}
	if !info.HasRetryAfter {
		for _, v := range st[kindRetryAfter].vals {
			if d, ok := parseRetryAfter(v, now); ok {
				info.RetryAfter = max(info.RetryAfter, d)
				info.HasRetryAfter = true
			}
		}
	}

	if cached(st[kindAge].vals) {
		return info
	}

	var qbuf [8]Quota
	qs := qbuf[:0]
	qs = appendIETF(qs, st[kindPolicy].vals, st[kindRateLimit].vals, now)
	qs = appendPositional(qs, &positional{
		limit:     st[kindDraftLimit].vals,
		policy:    st[kindPolicy].vals,
		remaining: st[kindDraftRemaining].vals,
		reset:     st[kindDraftReset].vals,
		resetTime: st[kindDraftResetTime].vals,
		used:      st[kindDraftObserved].vals,
		name:      st[kindDraftName].vals,
	}, now)
	name := st[kindXResource].vals
	if name == nil {
		name = st[kindXBucket].vals
	}
	if name == nil {
		name = st[kindXScope].vals
	}
	qs = appendPositional(qs, &positional{
		limit:      st[kindXLimit].vals,
		remaining:  st[kindXRemaining].vals,
		reset:      st[kindXReset].vals,
		resetAfter: st[kindXResetAfter].vals,
		used:       st[kindXUsed].vals,
		name:       name,
		interval:   st[kindXInterval].vals,
		fillRate:   st[kindXFillRate].vals,
	}, now)
	slices.SortFunc(nd, func(a, b named) int {
		return cmp.Or(cmp.Compare(a.fam, b.fam), strings.Compare(a.name, b.name))
	})
	for i := range nd {
		qs = appendNamed(qs, &nd[i], now)
	}
	qs = appendShopify(qs, st[kindShopify].vals)
	qs = appendSalesforce(qs, st[kindSalesforce].vals)

	if len(qs) > 0 {
		info.Quotas = make([]Quota, len(qs))
		copy(info.Quotas, qs)
	}
	return info
}

// cached reports whether an Age field says the response came from a
// cache: its first value is a positive number of seconds. An invalid Age
// is ignored, as RFC 9111 says.
func cached(age []string) bool {
	return len(age) > 0 && parseCount(age[0]) > 0
}

// known reports whether q says anything at all.
func (q *Quota) known() bool {
	return q.Limit >= 0 || q.Remaining >= 0 || !q.Reset.IsZero() || q.Window > 0
}

// positional holds a family of separate fields whose members pair up by
// position: the first limit goes with the first remaining, and so on.
type positional struct {
	limit, policy, remaining, reset, resetAfter, resetTime []string
	used, name, interval, fillRate                         []string
}

// appendPositional appends the quotas of p to qs.
func appendPositional(qs []Quota, p *positional, now time.Time) []Quota {
	if p.limit == nil && p.remaining == nil && p.reset == nil &&
		p.resetAfter == nil && p.resetTime == nil && p.used == nil {
		return qs
	}
	var (
		limBuf                                  [2]string
		remBuf, rstBuf, raBuf, rtBuf, usedBuf   [2]string
		nameBuf, ivBuf, frBuf, polBuf           [2]string
		limits                                  [2]limitMember
		lim, rem, rst, ra, rt, used, nm, iv, fr []string
	)
	lim = splitList(limBuf[:0], p.limit)
	pol := splitList(polBuf[:0], p.policy)
	ls := parseLimits(limits[:0], lim, pol)
	rem = splitList(remBuf[:0], p.remaining)
	rst = splitList(rstBuf[:0], p.reset)
	ra = splitList(raBuf[:0], p.resetAfter)
	rt = splitList(rtBuf[:0], p.resetTime)
	used = splitList(usedBuf[:0], p.used)
	nm = splitList(nameBuf[:0], p.name)
	iv = splitList(ivBuf[:0], p.interval)
	fr = splitList(frBuf[:0], p.fillRate)

	n := max(len(ls), len(rem), len(rst), len(ra), len(rt), len(used))
	for i := range n {
		// Docker Hub puts the window on the remaining count too:
		// "ratelimit-remaining: 76;w=21600".
		r, params, _ := strings.Cut(at(rem, i), ";")
		q := Quota{Name: at(nm, i), Limit: -1, Remaining: parseCount(r)}
		if i < len(ls) {
			q.Limit, q.Window = ls[i].limit, ls[i].window
		}
		if q.Window == 0 {
			q.Window = windowParam(params)
		}
		if u := parseCount(at(used, i)); q.Remaining < 0 && q.Limit >= 0 && u >= 0 {
			q.Remaining = max(q.Limit-u, 0)
		}
		// Reset-After is relative, so immune to clock skew: prefer it.
		if d, ok := parseSeconds(at(ra, i)); ok {
			q.Reset = now.Add(d)
		} else if t, ok := parseReset(at(rst, i), now); ok {
			q.Reset = t
		} else if t, ok := parseReset(at(rt, i), now); ok {
			q.Reset = t
		}
		if q.Window == 0 {
			q.Window = refillWindow(q.Limit, at(iv, i), at(fr, i))
		}
		if q.known() {
			qs = append(qs, q)
		}
	}
	return qs
}

// refillWindow turns Jira's token bucket (FillRate tokens every interval
// seconds, up to Limit) into a window: the time to refill Limit tokens, so
// that Limit/Window is the sustained rate, as it is for a fixed window.
func refillWindow(limit int64, interval, fillRate string) time.Duration {
	iv, ok := parseSeconds(interval)
	fr := parseCount(fillRate)
	if !ok || iv <= 0 || fr <= 0 || limit <= 0 {
		return 0
	}
	w := float64(iv) * float64(limit) / float64(fr)
	if w > float64(maxAhead) {
		return 0
	}
	return time.Duration(w)
}

// limitMember is one member of a limit field: a limit and its window.
type limitMember struct {
	limit  int64
	window time.Duration
}

// parseLimits reads the members of a limit field. Earlier IETF drafts put
// quota policies after the limit itself ("100, 100;w=60") or in a separate
// RateLimit-Policy ("100;w=60"): a member with parameters is then a policy
// that lends its window to the plain member with the same quota. When every
// member has parameters, each is a quota of its own.
func parseLimits(dst []limitMember, members, policies []string) []limitMember {
	plain := 0
	for _, m := range members {
		if !strings.Contains(m, ";") {
			plain++
		}
	}
	for _, m := range members {
		v, params, ok := strings.Cut(m, ";")
		if ok && plain > 0 {
			continue
		}
		lm := limitMember{limit: parseCount(v), window: windowParam(params)}
		if !ok {
			lm.window = policyWindow(lm.limit, members, policies)
		}
		dst = append(dst, lm)
	}
	return dst
}

// policyWindow finds the window of the first policy for quota limit.
func policyWindow(limit int64, lists ...[]string) time.Duration {
	if limit < 0 {
		return 0
	}
	for _, list := range lists {
		for _, m := range list {
			v, params, ok := strings.Cut(m, ";")
			if ok && parseCount(v) == limit {
				if w := windowParam(params); w > 0 {
					return w
				}
			}
		}
	}
	return 0
}

// windowParam returns the w parameter of "w=60;comment=..." in seconds.
func windowParam(params string) time.Duration {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(p, "=")
		if trim(k) == "w" {
			if d, ok := parseSeconds(v); ok {
				return d
			}
			return 0
		}
	}
	return 0
}

// appendNamed appends the quotas of one named family member, such as
// OpenAI's "requests" or an Azure Resource Manager counter.
func appendNamed(qs []Quota, g *named, now time.Time) []Quota {
	var limBuf, remBuf, rstBuf, winBuf [8]string
	lim := splitList(limBuf[:0], g.fields[0].vals)
	rem := splitList(remBuf[:0], g.fields[1].vals)
	rst := splitList(rstBuf[:0], g.fields[2].vals)
	win := splitList(winBuf[:0], g.fields[3].vals)
	for i := range max(len(lim), len(rem), len(rst)) {
		q := Quota{Name: g.name, Limit: parseCount(at(lim, i)), Remaining: -1, Unit: nameUnit(g.fam, g.name)}
		switch g.fam {
		case famX:
			q.Window = nameWindow(g.name)
		case famHubSpot:
			// The daily limit resets at midnight in the account's time
			// zone, which the response does not say: no Reset.
			q.Window = nameWindow(g.name)
			if d, ok := parseMillis(at(win, i)); ok && d > 0 {
				q.Window = d
			}
		}
		r := at(rem, i)
		// x-ms-ratelimit-remaining-resource: "Microsoft.Compute/HighCostGet3Min;159"
		if name, count, ok := strings.Cut(r, ";"); ok && g.fam == famAzure {
			q.Name, r = trim(name), count
		}
		q.Remaining = parseCount(r)
		if t, ok := parseReset(at(rst, i), now); ok {
			q.Reset = t
		}
		if q.known() {
			qs = append(qs, q)
		}
	}
	return qs
}

// nameWindow returns the window a quota named after it implies, as Kong
// names its X-RateLimit-Limit-Minute and HubSpot its Daily and Secondly
// limits.
func nameWindow(name string) time.Duration {
	switch name {
	case "second", "secondly":
		return time.Second
	case "minute":
		return time.Minute
	case "hour":
		return time.Hour
	case "day", "daily":
		return 24 * time.Hour
	}
	return 0
}

// nameUnit returns the unit a named quota counts: APISIX's AI rate limits
// count tokens and HubSpot's count requests; other families' names say it
// ("requests", "input-tokens", Linear's "complexity"), or nothing does.
func nameUnit(fam family, name string) string {
	switch {
	case fam == famAI:
		return "tokens"
	case fam == famHubSpot:
		return "requests"
	case fam == famAzure:
		return ""
	case name == "requests" || strings.HasSuffix(name, "-requests"):
		return "requests"
	case name == "tokens" || strings.HasSuffix(name, "-tokens"):
		return "tokens"
	case name == "complexity":
		return "complexity"
	}
	return ""
}

// appendShopify appends Shopify's "used/limit" call limits.
func appendShopify(qs []Quota, vals []string) []Quota {
	var buf [8]string
	for _, m := range splitList(buf[:0], vals) {
		if limit, remaining, ok := parseUsage(m); ok {
			qs = append(qs, Quota{Limit: limit, Remaining: remaining})
		}
	}
	return qs
}

// parseUsage parses "used/limit" into the limit and what remains of it.
func parseUsage(s string) (limit, remaining int64, ok bool) {
	u, l, ok := strings.Cut(s, "/")
	used, limit := parseCount(u), parseCount(l)
	if !ok || used < 0 || limit < 0 {
		return 0, 0, false
	}
	return limit, max(limit-used, 0), true
}

// appendSalesforce appends the API usage Salesforce's Sforce-Limit-Info
// reports as used/limit: "api-usage=18/5000", the organization's requests
// over a rolling 24 hours, and "per-app-api-usage=17/250(appName=app)", a
// connected app's quota, whose appName becomes the Partition. The usage can
// exceed the limit (Salesforce lets an organization burst past it). Other
// members, such as api-bursts, count no requests and are skipped.
func appendSalesforce(qs []Quota, vals []string) []Quota {
	for _, line := range vals {
		for line != "" {
			m := line
			if i := strings.IndexAny(line, ";,"); i >= 0 {
				m, line = line[:i], line[i+1:]
			} else {
				line = ""
			}
			key, v, ok := strings.Cut(trim(m), "=")
			if !ok || !strings.HasSuffix(key, "api-usage") {
				continue
			}
			q := Quota{Name: key, Unit: "requests"}
			if key == "api-usage" {
				q.Window = 24 * time.Hour
			}
			v, app, _ := strings.Cut(v, "(")
			if k, name, ok := strings.Cut(strings.TrimSuffix(app, ")"), "="); ok && trim(k) == "appName" {
				q.Partition = trim(name)
			}
			if q.Limit, q.Remaining, ok = parseUsage(v); ok {
				qs = append(qs, q)
			}
		}
	}
	return qs
}
