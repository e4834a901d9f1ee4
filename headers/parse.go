package headers

import (
	"maps"
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
	kindRetryIn      // X-Retry-In (Traefik): a Go duration

	kindPolicy    // RateLimit-Policy
	kindRateLimit // RateLimit

	kindXBucket // X-RateLimit-Bucket (Discord): the name, if no Resource
	kindXScope  // X-RateLimit-Scope (Discord): the name, if neither

	kindShopify    // X-Shopify-Shop-Api-Call-Limit
	kindSalesforce // Sforce-Limit-Info
	kindAge        // Age: a positive one means the response came from a cache

	// The two positional families follow, numPos kinds each, in the order
	// of a row's fields, so that their lines gathered are a row's lines.
	kindDraft // RateLimit-<field>: earlier IETF drafts, and GitLab
)

// The fields of the positional families. The kinds no header name has
// (RateLimit-Reset-After, X-RateLimit-ResetTime...) are never gathered.
const (
	kindDraftLimit     = kindDraft + posLimit     // RateLimit-Limit
	kindDraftRemaining = kindDraft + posRemaining // RateLimit-Remaining
	kindDraftReset     = kindDraft + posReset     // RateLimit-Reset
	kindDraftResetTime = kindDraft + posResetTime // RateLimit-ResetTime (GitLab)
	kindDraftObserved  = kindDraft + posUsed      // RateLimit-Observed (GitLab)
	kindDraftName      = kindDraft + posName      // RateLimit-Name (GitLab)

	kindX           = kindDraft + numPos    // X-RateLimit-<field> and x-rate-limit-<field>
	kindXLimit      = kindX + posLimit      // X-RateLimit-Limit
	kindXRemaining  = kindX + posRemaining  // X-RateLimit-Remaining
	kindXReset      = kindX + posReset      // X-RateLimit-Reset
	kindXResetAfter = kindX + posResetAfter // X-RateLimit-Reset-After (Discord)
	kindXUsed       = kindX + posUsed       // X-RateLimit-Used (GitHub, Reddit)
	kindXResource   = kindX + posName       // X-RateLimit-Resource (GitHub)
	kindXInterval   = kindX + posInterval   // X-RateLimit-Interval-Seconds (Jira)
	kindXFillRate   = kindX + posFillRate   // X-RateLimit-FillRate (Jira)

	numStatic = kindX + numPos
)

// Named kinds: the order is the index into named.fields.
const (
	kindNamedLimit = numStatic + iota
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
// Most fields of a response are not about rate limits: the switches on
// single bytes turn them away before any name is compared in full.
func classify(k string) (kind, family, string) {
	if len(k) < len("Age") {
		return kindNone, 0, ""
	}
	switch k[0] | 0x20 {
	case 'r':
		if k[1]|0x20 == 'e' {
			switch {
			case equalLower(k, "retry-after"):
				return kindRetryAfter, 0, ""
			case equalLower(k, "retry-after-ms"):
				return kindRetryAfterMs, 0, ""
			case hasPrefixLower(k, "retry-after-") && len(k) > len("Retry-After-"):
				// @nestjs/throttler's named throttlers: Retry-After-<name>.
				return kindRetryAfter, 0, ""
			}
			break
		}
		switch {
		case equalLower(k, "ratelimit"):
			return kindRateLimit, 0, ""
		case hasPrefixLower(k, "ratelimit-"):
			return draftField(k[len("RateLimit-"):]), 0, ""
		}
	case 'x':
		if k[1] == '-' {
			return xPrefixed(k)
		}
	case 's':
		if equalLower(k, "sforce-limit-info") {
			return kindSalesforce, 0, ""
		}
	case 'a':
		if equalLower(k, "age") {
			return kindAge, 0, ""
		}
		if hasPrefixLower(k, "anthropic-ratelimit-") {
			// anthropic-ratelimit-<name>-<field>: no field has a dash.
			rest := k[len("Anthropic-RateLimit-"):]
			switch {
			case hasSuffixLower(rest, "-limit"):
				return kindNamedLimit, famAnthropic, rest[:len(rest)-len("-limit")]
			case hasSuffixLower(rest, "-remaining"):
				return kindNamedRemaining, famAnthropic, rest[:len(rest)-len("-remaining")]
			case hasSuffixLower(rest, "-reset"):
				return kindNamedReset, famAnthropic, rest[:len(rest)-len("-reset")]
			}
		}
	}
	return kindNone, 0, ""
}

// xPrefixed classifies a name that starts with "X-".
func xPrefixed(k string) (kind, family, string) {
	// "x-ratelimit-" as two words whose constants fold: cheaper than
	// hasPrefixLower, for the prefix most rate-limit fields have. (Before
	// the switch, which would otherwise share the load of k[2] and keep
	// the compiler from loading each word at once.)
	if len(k) >= len("x-ratelimit-") &&
		foldMatch(load64(k), load64("x-rateli")) && foldMatch(load32(k[8:]), load32("mit-")) {
		return xField(k[len("X-RateLimit-"):])
	}
	switch k[2] | 0x20 {
	case 'r':
		switch {
		case hasPrefixLower(k, "x-rate-limit-"):
			return xField(k[len("X-Rate-Limit-"):])
		case equalLower(k, "x-retry-in"):
			return kindRetryIn, 0, ""
		}
	case 'm':
		switch {
		case equalLower(k, "x-ms-retry-after-ms"):
			return kindRetryAfterMs, 0, ""
		case hasPrefixLower(k, "x-ms-ratelimit-remaining-") && len(k) > len("X-Ms-RateLimit-Remaining-"):
			return kindNamedRemaining, famAzure, k[len("X-Ms-RateLimit-Remaining-"):]
		}
	case 's':
		if equalLower(k, "x-shopify-shop-api-call-limit") {
			return kindShopify, 0, ""
		}
	case 'a':
		if hasPrefixLower(k, "x-ai-ratelimit-") {
			return prefixed(k[len("X-AI-RateLimit-"):], famAI)
		}
	case 'h':
		if hasPrefixLower(k, "x-hubspot-ratelimit-") {
			return hubSpotField(k[len("X-HubSpot-RateLimit-"):])
		}
	}
	return kindNone, 0, ""
}

// draftField classifies the part of a RateLimit-* name after the dash.
func draftField(s string) kind {
	switch {
	case equalLower(s, "policy"):
		return kindPolicy
	case equalLower(s, "limit"):
		return kindDraftLimit
	case equalLower(s, "remaining"):
		return kindDraftRemaining
	case equalLower(s, "reset"):
		return kindDraftReset
	case equalLower(s, "resettime"):
		return kindDraftResetTime
	case equalLower(s, "observed"):
		return kindDraftObserved
	case equalLower(s, "name"):
		return kindDraftName
	}
	return kindNone
}

// xField classifies the part of an X-RateLimit-* name after the prefix.
func xField(s string) (kind, family, string) {
	if kd := xFixed(s); kd != kindNone {
		return kd, 0, ""
	}
	if kd, fam, name := prefixed(s, famX); kd != kindNone {
		return kd, fam, name
	}
	// Linear: X-RateLimit-Requests-Limit, X-RateLimit-Complexity-Reset.
	for _, p := range namedParts[:] {
		if n := len(s) - len(p.part) - 1; n > 0 && s[n] == '-' && equalLower(s[n+1:], p.part) {
			return p.kind, famX, s[:n]
		}
	}
	return kindNone, 0, ""
}

// xFixed returns the kind of s, the part of an X-RateLimit-* name after
// the prefix, if s is one of the family's fixed fields, and kindNone if
// not. Its length, and for some lengths its first letter, leave one field
// to compare with.
func xFixed(s string) kind {
	var (
		field string
		kd    kind
	)
	switch len(s) {
	case len("used"):
		field, kd = "used", kindXUsed
	case len("limit"): // reset, scope
		switch s[0] | 0x20 {
		case 'l':
			field, kd = "limit", kindXLimit
		case 'r':
			field, kd = "reset", kindXReset
		default:
			field, kd = "scope", kindXScope
		}
	case len("bucket"):
		field, kd = "bucket", kindXBucket
	case len("resource"): // fillrate
		field, kd = "resource", kindXResource
		if s[0]|0x20 == 'f' {
			field, kd = "fillrate", kindXFillRate
		}
	case len("remaining"):
		field, kd = "remaining", kindXRemaining
	case len("reset-after"):
		field, kd = "reset-after", kindXResetAfter
	case len("interval-seconds"):
		if s[0]|0x20 != 'i' { // OpenAI's remaining-tokens
			return kindNone
		}
		field, kd = "interval-seconds", kindXInterval
	default:
		return kindNone
	}
	if !equalLower(s, field) {
		return kindNone
	}
	return kd
}

// namedParts are the fields of a named quota, as header names spell them.
var namedParts = [...]struct {
	part string
	kind kind
}{
	{"limit", kindNamedLimit},
	{"remaining", kindNamedRemaining},
	{"reset", kindNamedReset},
}

// prefixed classifies "Limit-<name>", "Remaining-<name>" and
// "Reset-<name>" as a named field of family fam.
func prefixed(s string, fam family) (kind, family, string) {
	if len(s) < len("limit-") {
		return kindNone, 0, ""
	}
	// Each prefix is compared as its first word, whose constant folds, and
	// the bytes after it: cheaper than hasPrefixLower, for the names OpenAI
	// sends on every response. No byte is loaded twice, which would keep
	// the compiler from loading the word at once.
	var (
		kd kind
		n  int
	)
	switch w := load32(s); {
	case foldMatch(w, load32("limi")):
		if s[4]|0x20 == 't' && s[5] == '-' {
			kd, n = kindNamedLimit, len("limit-")
		}
	case foldMatch(w, load32("rese")):
		if s[4]|0x20 == 't' && s[5] == '-' {
			kd, n = kindNamedReset, len("reset-")
		}
	case foldMatch(w, load32("rema")):
		if len(s) >= len("remaining-") && foldMatch(load32(s[4:]), load32("inin")) && s[8]|0x20 == 'g' && s[9] == '-' {
			kd, n = kindNamedRemaining, len("remaining-")
		}
	}
	if kd == kindNone || len(s) == n {
		return kindNone, 0, ""
	}
	return kd, fam, s[n:]
}

// hubSpotField classifies the part of an X-HubSpot-RateLimit-* name after
// the prefix. HubSpot names its quotas by the field: Max, Remaining and
// Interval-Milliseconds describe the rolling interval; Daily and Secondly
// are limits whose -Remaining says what is left.
func hubSpotField(s string) (kind, family, string) {
	for _, f := range hubSpotFields[:] {
		if equalLower(s, f.field) {
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
	{"max", kindNamedLimit, "interval"},
	{"remaining", kindNamedRemaining, "interval"},
	{"interval-milliseconds", kindNamedWindow, "interval"},
	{"daily", kindNamedLimit, "daily"},
	{"daily-remaining", kindNamedRemaining, "daily"},
	{"secondly", kindNamedLimit, "secondly"},
	{"secondly-remaining", kindNamedRemaining, "secondly"},
}

// addLines returns the lines of a field followed by vals, more lines of
// it, without writing into either's backing array.
func addLines(lines, vals []string) []string {
	if lines == nil {
		return vals
	}
	return append(lines[:len(lines):len(lines)], vals...)
}

// named gathers the fields of one named quota: limit, remaining, reset
// and window.
type named struct {
	fam    family
	name   string
	fields [4][]string // indexed by kind - kindNamedLimit
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

// lowerName returns name in lower case, without allocating for a name
// that is lower-case ASCII already or one of the common names.
func lowerName(name string) string {
	lower := true
	for i := 0; i < len(name) && lower; i++ {
		c := name[i]
		lower = c < 0x80 && (c < 'A' || c > 'Z')
	}
	if lower {
		return name
	}
	for _, c := range commonNames[:] {
		if equalLower(name, c) {
			return c
		}
	}
	return strings.ToLower(name)
}

// addNamed records the lines vals of one named field in nd, which it keeps
// sorted by family and name, and returns nd. again says whether the name is
// one nd has already, spelt another way, so that what nd holds depends on
// the order the fields come in.
func addNamed(nd []named, fam family, name string, idx int, vals []string) (_ []named, again bool) {
	i := 0
	for ; i < len(nd) && nd[i].fam <= fam; i++ {
		if nd[i].fam == fam && len(nd[i].name) == len(name) && equalFold(nd[i].name, name) {
			again = nd[i].fields[idx] != nil
			nd[i].fields[idx] = addLines(nd[i].fields[idx], vals)
			return nd, again
		}
	}
	name = lowerName(name)
	for i > 0 && nd[i-1].fam == fam && nd[i-1].name > name {
		i--
	}
	// Names equal in lower case but not in ASCII case folding (non-ASCII
	// letters) stay apart, in the order they come in.
	again = i > 0 && nd[i-1].fam == fam && nd[i-1].name == name
	if i == len(nd) {
		nd = append(nd, named{fam: fam, name: name})
	} else {
		nd = slices.Insert(nd, i, named{fam: fam, name: name})
	}
	nd[i].fields[idx] = vals
	return nd, again
}

// gathered holds the lines of the fields with fixed names in a header, by
// kind, and what gathering them found.
type gathered struct {
	st    [numStatic][]string
	found bool // a rate-limit field, of any kind
	// again says that a field came under two spellings of its name, so that
	// what is gathered depends on the order the keys came in.
	again bool
}

// add files the lines vs of the field named k: in g.st if it has a fixed
// name, in nd (returned; nd stays out of g, so that its array can stay on
// the stack) if it names a quota.
func (g *gathered) add(nd []named, k string, vs []string) []named {
	if len(vs) == 0 {
		return nd
	}
	kd, fam, name := classify(k)
	switch {
	case kd == kindNone:
	case kd < numStatic:
		g.again = g.again || g.st[kd] != nil
		g.st[kd] = addLines(g.st[kd], vs)
		g.found = g.found || kd != kindAge // Age is no rate-limit field on its own
	default:
		var again bool
		nd, again = addNamed(nd, fam, name, int(kd-kindNamedLimit), vs)
		g.again, g.found = g.again || again, true
	}
	return nd
}

// mentions reports whether h has a rate-limit field with a value: a walk
// over its names alone, so that Parse does not gather the many responses
// that have none (which zeroes more than a kilobyte each time). The
// Transport parses a partition's answers so, until one says something.
func mentions(h http.Header) bool {
	for k, vs := range h {
		if kd, _, _ := classify(k); len(vs) > 0 && kd != kindNone && kd != kindAge {
			return true
		}
	}
	return false
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
	if !mentions(h) {
		return Info{} // most responses: nothing about rate limits
	}
	var (
		g    gathered
		nbuf [8]named
	)
	nd := nbuf[:0]
	for k, vs := range h {
		nd = g.add(nd, k, vs)
	}
	if !g.found {
		return Info{} // most responses: nothing about rate limits
	}
	if g.again {
		nd = g.regather(h, nbuf[:0])
	}
	// Its own array, so that buf stays on the stack: only a copy leaves.
	var buf [8]Quota
	in := g.info(buf[:0], nd, now)
	info := Info{RetryAfter: in.RetryAfter, HasRetryAfter: in.HasRetryAfter}
	if len(in.Quotas) > 0 {
		info.Quotas = make([]Quota, len(in.Quotas))
		copy(info.Quotas, in.Quotas)
	}
	return info
}

// ParseInto is Parse for a client that parses every response it gets and
// keeps nothing of one Info past the next (the throttle Transport): the
// quotas are appended to dst[:0], so that nothing is allocated while dst
// has room (the Info's Quotas share dst's array). It also returns the
// bucket the fields name, read in the same walk over h: the first value of
// X-RateLimit-Resource (GitHub), else of X-RateLimit-Bucket (Discord),
// whatever the case of the names, trimmed; "" when neither has one. Most
// callers want Parse.
func ParseInto(dst []Quota, h http.Header, now time.Time) (Info, string) {
	var (
		g    gathered
		nbuf [8]named
	)
	nd := nbuf[:0]
	for k, vs := range h {
		nd = g.add(nd, k, vs)
	}
	if !g.found {
		return Info{}, ""
	}
	if g.again {
		nd = g.regather(h, nbuf[:0])
	}
	bucket := g.bucket() // before info, which fills Resource's place in when it is missing
	return g.info(dst, nd, now), bucket
}

// bucket is the bucket the fields gathered in g name: the first value of
// X-RateLimit-Resource (GitHub), else of X-RateLimit-Bucket (Discord),
// trimmed; "" when neither has one.
func (g *gathered) bucket() string {
	for _, lines := range [...][]string{g.st[kindXResource], g.st[kindXBucket]} {
		if len(lines) > 0 {
			if v := trim(lines[0]); v != "" {
				return v
			}
		}
	}
	return ""
}

// regather sorts the fields of h into g again, in key order, and returns
// the named ones appended to nd: for a field under two spellings (say,
// "X-RateLimit-Limit" set with Add and "x-ratelimit-limit" set directly),
// whose lines a walk in map order would merge in a random order. Rare:
// allocating is fine.
func (g *gathered) regather(h http.Header, nd []named) []named {
	*g = gathered{}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		nd = g.add(nd, k, h[k])
	}
	return nd
}

// info reads what the fields gathered in g and nd say, the quotas
// appended to dst[:0].
func (g *gathered) info(dst []Quota, nd []named, now time.Time) Info {
	st := &g.st

	var info Info
	// The millisecond forms and Traefik's Go duration say the same as
	// Retry-After, more precisely (Traefik's Retry-After is its X-Retry-In
	// rounded up to whole seconds: 1 for a token 95 ms away).
	for _, v := range st[kindRetryAfterMs] {
		if d, ok := parseMillis(v); ok {
			info.RetryAfter = max(info.RetryAfter, d)
			info.HasRetryAfter = true
		}
	}
	for _, v := range st[kindRetryIn] {
		if d, ok := parseGoDuration(trim(v)); ok {
			info.RetryAfter = max(info.RetryAfter, d)
			info.HasRetryAfter = true
		}
	}
	if !info.HasRetryAfter {
		for _, v := range st[kindRetryAfter] {
			if d, ok := parseRetryAfter(v, now); ok {
				info.RetryAfter = max(info.RetryAfter, d)
				info.HasRetryAfter = true
			}
		}
	}

	if cached(st[kindAge]) {
		return info
	}
	if qs := appendQuotas(dst[:0], st, nd, now); len(qs) > 0 {
		info.Quotas = qs
	}
	return info
}

// appendQuotas appends the quotas of the fields in st and nd to qs, in
// the order Info.Quotas says.
func appendQuotas(qs []Quota, st *[numStatic][]string, nd []named, now time.Time) []Quota {
	// Each family is looked at only if it is here: most responses carry
	// one.
	if st[kindPolicy] != nil || st[kindRateLimit] != nil {
		qs = appendIETF(qs, st[kindPolicy], st[kindRateLimit], now)
	}
	if draft := (*positional)(st[kindDraft:]); !draft.empty() {
		qs = appendPositional(qs, draft, st[kindPolicy], now)
	}
	if x := (*positional)(st[kindX:]); !x.empty() {
		if x[posName] == nil {
			x[posName] = st[kindXBucket]
		}
		if x[posName] == nil {
			x[posName] = st[kindXScope]
		}
		qs = appendPositional(qs, x, nil, now)
	}
	for i := range nd {
		qs = appendNamed(qs, &nd[i], now)
	}
	if st[kindShopify] != nil {
		qs = appendShopify(qs, st[kindShopify])
	}
	if st[kindSalesforce] != nil {
		qs = appendSalesforce(qs, st[kindSalesforce])
	}
	return qs
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

// positional holds the lines of a family of separate fields whose members
// pair up by position: the first limit goes with the first remaining, and
// so on. It is indexed by the pos constants.
type positional [numPos][]string

// The fields of a positional family, as they index positional and
// row.members: the counts, then the others.
const (
	posLimit = iota
	posRemaining
	posUsed
	posReset
	posResetAfter
	posResetTime
	posName
	posInterval
	posFillRate
	numPos
)

// appendPositional appends the quotas of p to qs. policy holds the lines
// of a RateLimit-Policy that lends windows to p's limits.
func appendPositional(qs []Quota, p *positional, policy []string, now time.Time) []Quota {
	var r row
	if policy == nil && p.single(&r) {
		return appendRow(qs, &r, now)
	}
	return appendRows(qs, p, policy, now)
}

// empty reports whether p has none of the fields that make a quota.
func (p *positional) empty() bool {
	return p[posLimit] == nil && p[posRemaining] == nil && p[posUsed] == nil &&
		p[posReset] == nil && p[posResetAfter] == nil && p[posResetTime] == nil
}

// appendRows is appendPositional for any p: it walks the lists of every
// field, pairing their members by position.
func appendRows(qs []Quota, p *positional, policy []string, now time.Time) []Quota {
	var limits [2]limitMember
	ls := parseLimits(limits[:0], p[posLimit], policy)
	var ms [numPos]members
	for i, lines := range p {
		ms[i].lines = lines
	}
	for i := 0; ; i++ {
		r := row{limit: limitMember{limit: -1}}
		for f := posRemaining; f <= posResetTime; f++ {
			r.members[f] = ms[f].next()
		}
		if i >= len(ls) && r.members == [numPos]string{} {
			return qs
		}
		if i < len(ls) {
			r.limit = ls[i]
		}
		r.remaining, r.window = parseRemaining(r.members[posRemaining])
		r.used = parseCount(r.members[posUsed])
		for f := posName; f < numPos; f++ {
			r.members[f] = ms[f].next()
		}
		qs = appendRow(qs, &r, now)
	}
}

// row is one position of a positional family: the limit member (limit -1
// when there is none), the counts of the remaining and used members (-1
// when there are none) and the members of the other fields, "" where a
// field has none.
type row struct {
	limit           limitMember
	remaining, used int64
	window          time.Duration // of the remaining member's parameters
	members         [numPos]string
}

// parseRemaining parses a remaining member: a count, and the window of its
// parameters if it has any. Docker Hub puts the window on the remaining
// count too: "ratelimit-remaining: 76;w=21600".
func parseRemaining(m string) (int64, time.Duration) {
	rem, params, _ := strings.Cut(m, ";")
	return parseCount(rem), windowParam(params)
}

// single reads p's only row into r when no field has more than one line or
// a comma and the limit has no parameters: what most responses send, read
// without walking lists. It reports whether it did.
func (p *positional) single(r *row) bool {
	limit, m, ok := onlyCount(p[posLimit])
	if !ok || strings.IndexByte(m, ';') >= 0 {
		return false
	}
	r.limit = limitMember{limit: limit}
	if r.remaining, m, ok = onlyCount(p[posRemaining]); !ok {
		return false
	}
	if m != "" {
		r.remaining, r.window = parseRemaining(m)
	}
	if r.used, _, ok = onlyCount(p[posUsed]); !ok {
		return false
	}
	for i := posReset; i < numPos; i++ {
		if r.members[i], ok = onlyMember(p[i]); !ok {
			return false
		}
	}
	return true
}

// onlyCount is onlyMember for a field of counts: n is the count when
// lines is one line that is a count (which needs no look for a comma), and
// -1 otherwise; m is the member of lines when it is not a count.
func onlyCount(lines []string) (n int64, m string, ok bool) {
	if len(lines) == 1 {
		if n = parseCount(lines[0]); n >= 0 {
			return n, "", true
		}
	}
	m, ok = onlyMember(lines)
	return -1, m, ok
}

// onlyMember returns the member of lines, trimmed ("" when it has none),
// when lines is at most one line without a comma: no list to walk. ok is
// false otherwise. It inlines, so that a field that is absent costs no
// call.
func onlyMember(lines []string) (m string, ok bool) {
	if len(lines) == 0 {
		return "", true
	}
	return oneLine(lines)
}

// oneLine is onlyMember for a field that is present.
func oneLine(lines []string) (m string, ok bool) {
	if len(lines) == 1 && strings.IndexByte(lines[0], ',') < 0 {
		return trim(lines[0]), true
	}
	return "", false
}

// appendRow appends the quota of one row of a positional family to qs,
// if it says anything.
func appendRow(qs []Quota, r *row, now time.Time) []Quota {
	q := Quota{Name: r.members[posName], Limit: r.limit.limit, Remaining: r.remaining, Window: r.limit.window}
	if q.Window == 0 {
		q.Window = r.window
	}
	if q.Remaining < 0 && q.Limit >= 0 && r.used >= 0 {
		q.Remaining = max(q.Limit-r.used, 0)
	}
	// Reset-After is relative, so immune to clock skew: prefer it.
	if d, ok := parseSeconds(r.members[posResetAfter]); ok {
		q.Reset = now.Add(d)
	} else if t, ok := parseReset(r.members[posReset], now); ok {
		q.Reset = t
	} else if t, ok := parseReset(r.members[posResetTime], now); ok {
		q.Reset = t
	}
	if q.Window == 0 {
		q.Window = refillWindow(q.Limit, r.members[posInterval], r.members[posFillRate])
	}
	if q.known() {
		qs = append(qs, q)
	}
	return qs
}

// refillWindow turns Jira's token bucket (FillRate tokens every interval
// seconds, up to Limit) into a window: the time to refill Limit tokens, so
// that Limit/Window is the sustained rate, as it is for a fixed window.
func refillWindow(limit int64, interval, fillRate string) time.Duration {
	iv, ok := parseSeconds(interval)
	if !ok || iv <= 0 || limit <= 0 {
		return 0
	}
	fr := parseCount(fillRate)
	if fr <= 0 {
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
func parseLimits(dst []limitMember, limits, policies []string) []limitMember {
	total, plain := 0, 0
	l := members{lines: limits}
	for m := l.next(); m != ""; m = l.next() {
		total++
		if strings.IndexByte(m, ';') < 0 {
			plain++
		}
	}
	policed := plain < total || policies != nil // some member can lend a window
	l = members{lines: limits}
	for m := l.next(); m != ""; m = l.next() {
		v, params, hasParams := strings.Cut(m, ";")
		if hasParams && plain > 0 {
			continue
		}
		lm := limitMember{limit: parseCount(v), window: windowParam(params)}
		if !hasParams && policed {
			lm.window = policyWindow(lm.limit, limits, policies)
		}
		dst = append(dst, lm)
	}
	return dst
}

// policyWindow finds the window of the first policy for quota limit among
// the members of the field lines in lists.
func policyWindow(limit int64, lists ...[]string) time.Duration {
	if limit < 0 {
		return 0
	}
	for _, lines := range lists {
		l := members{lines: lines}
		for m := l.next(); m != ""; m = l.next() {
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
	var r namedRow
	if g.single(&r) {
		return appendNamedRow(qs, g, &r, now)
	}
	return appendNamedRows(qs, g, now)
}

// namedRow is one position of a named family member: its limit (-1 when
// it has none), its remaining count (-1 when it has none, or when the
// member is not a count), the remaining member when it is not a count, and
// the members of its reset and window fields, "" where a field has none.
type namedRow struct {
	limit, remaining   int64
	rem, reset, window string
}

// single reads g's only row into r when no field has more than one line or
// a comma, and one of limit, remaining and reset says something: what most
// responses send, read without walking lists. It reports whether it did.
func (g *named) single(r *namedRow) bool {
	var (
		limit string
		ok    bool
	)
	if r.limit, limit, ok = onlyCount(g.fields[0]); !ok {
		return false
	}
	if r.remaining, r.rem, ok = onlyCount(g.fields[1]); !ok {
		return false
	}
	if r.reset, ok = onlyMember(g.fields[2]); !ok {
		return false
	}
	if r.window, ok = onlyMember(g.fields[3]); !ok {
		return false
	}
	return r.limit >= 0 || limit != "" || r.remaining >= 0 || r.rem != "" || r.reset != ""
}

// appendNamedRows is appendNamed for any g: it walks the lists of every
// field, pairing their members by position.
func appendNamedRows(qs []Quota, g *named, now time.Time) []Quota {
	var ls [4]members
	for i, lines := range &g.fields {
		ls[i].lines = lines
	}
	for {
		limit, rem, reset := ls[0].next(), ls[1].next(), ls[2].next()
		if limit == "" && rem == "" && reset == "" {
			return qs
		}
		r := namedRow{limit: parseCount(limit), remaining: -1, rem: rem, reset: reset, window: ls[3].next()}
		qs = appendNamedRow(qs, g, &r, now)
	}
}

// appendNamedRow appends the quota of one row of g to qs, if it says
// anything.
func appendNamedRow(qs []Quota, g *named, r *namedRow, now time.Time) []Quota {
	q := Quota{Name: g.name, Limit: r.limit, Remaining: r.remaining, Unit: nameUnit(g.fam, g.name)}
	switch g.fam {
	case famX:
		q.Window = nameWindow(g.name)
	case famHubSpot:
		// The daily limit resets at midnight in the account's time zone,
		// which the response does not say: no Reset.
		q.Window = nameWindow(g.name)
		if d, ok := parseMillis(r.window); ok && d > 0 {
			q.Window = d
		}
	}
	if rem := r.rem; rem != "" {
		// x-ms-ratelimit-remaining-resource: "Microsoft.Compute/HighCostGet3Min;159"
		if g.fam == famAzure {
			if name, count, ok := strings.Cut(rem, ";"); ok {
				q.Name, rem = trim(name), count
			}
		}
		q.Remaining = parseCount(rem)
	}
	if t, ok := parseReset(r.reset, now); ok {
		q.Reset = t
	}
	if q.known() {
		qs = append(qs, q)
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
	l := members{lines: vals}
	for m := l.next(); m != ""; m = l.next() {
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
