// This file is a frozen copy of Parse and everything it calls, as they were
// on main at 4c6344c (parse.go, values.go, ietf.go), before Parse was made
// cheaper: every package-level name of those files carries the suffix Ref
// (Parse is parseRef). It is the reference differential_test.go holds the
// live Parse to, so it must not follow later changes: it is deliberately a
// duplicate of live code. Only Quota, Info and Quota.known are shared.

package headers

import (
	"bytes"
	"github.com/dunglas/httpsfv"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

type policyRef struct {
	name   string
	unit   string
	pk     []byte
	quota  int64
	window time.Duration
}

func appendIETFRef(qs []Quota, policyVals, rlVals []string, now time.Time) []Quota {
	if policyVals == nil && rlVals == nil {
		return qs
	}
	var (
		pbuf     [8]policyRef
		ps, olds []policyRef // named policies; earlier drafts' numbered ones
		obuf     [8]policyRef
	)
	ps, olds = pbuf[:0], obuf[:0]
	if policyVals != nil {
		if l, err := httpsfv.UnmarshalList(policyVals); err == nil {
			for _, m := range l {
				it, ok := m.(httpsfv.Item)
				if !ok {
					continue
				}
				p := policyRef{quota: paramCountRef(it.Params, "q")}
				p.window, _ = paramSecondsRef(it.Params, "w")
				p.pk = paramBytesRef(it.Params, "pk")
				p.unit = paramStringRef(it.Params, "qu")
				if q, ok := countRef(it.Value); ok {
					p.quota = q
					olds = append(olds, p)
					continue
				}
				if p.name, ok = itemNameRef(it.Value); ok {
					if p.unit == "" {
						p.unit = "requests"
					}
					ps = append(ps, p)
				}
			}
		}
	}

	var (
		rbuf [8]rlItemRef
		rls  = rbuf[:0]
	)
	if rlVals != nil {
		if l, err := httpsfv.UnmarshalList(rlVals); err == nil {
			for _, m := range l {
				it, ok := m.(httpsfv.Item)
				if !ok {
					continue
				}
				name, ok := itemNameRef(it.Value)
				if !ok {
					continue
				}
				r := rlItemRef{q: Quota{Name: name, Limit: -1, Remaining: paramCountRef(it.Params, "r")}, policy: -1}
				if t, ok := paramSecondsRef(it.Params, "t"); ok {
					r.q.Reset = now.Add(t)
				}

				pk := paramBytesRef(it.Params, "pk")
				for i, p := range ps {
					if p.name == name && (p.pk == nil || pk == nil || bytes.Equal(p.pk, pk)) {
						r.q.Limit, r.q.Window, r.q.Unit, r.policy = p.quota, p.window, p.unit, i
						if pk == nil {
							pk = p.pk
						}
						break
					}
				}
				if pk != nil {
					r.q.Partition = string(pk)
				}
				rls = append(rls, r)
			}
		} else if d, err := httpsfv.UnmarshalDictionary(rlVals); err == nil {
			q := Quota{Limit: dictCountRef(d, "limit"), Remaining: dictCountRef(d, "remaining")}
			if m, ok := d.Get("reset"); ok {
				if it, ok := m.(httpsfv.Item); ok {
					if t, ok := secondsRef(it.Value); ok {
						q.Reset = now.Add(t)
					}
				}
			}
			for _, p := range olds {
				if p.quota == q.Limit && p.quota >= 0 {
					q.Window = p.window
					break
				}
			}
			if q.known() {
				rls = append(rls, rlItemRef{q: q, policy: -1})
			}
		}
	}

	for i, p := range ps {
		joined := false
		for _, r := range rls {
			if r.policy == i {
				qs = append(qs, r.q)
				joined = true
			}
		}
		if !joined {
			q := Quota{Name: p.name, Limit: p.quota, Remaining: -1, Window: p.window, Unit: p.unit}
			if p.pk != nil {
				q.Partition = string(p.pk)
			}
			qs = append(qs, q)
		}
	}
	for _, r := range rls {
		if r.policy < 0 {
			qs = append(qs, r.q)
		}
	}
	return qs
}

type rlItemRef struct {
	q      Quota
	policy int
}

func itemNameRef(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case httpsfv.Token:
		return string(v), true
	}
	return "", false
}

func countRef(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		if v >= 0 {
			return v, true
		}
	case float64:
		if v >= 0 && v < 1e15 {
			return int64(v), true
		}
	}
	return -1, false
}

func secondsRef(v any) (time.Duration, bool) {
	switch v := v.(type) {
	case int64:
		if v >= 0 && v <= int64(maxAheadRef/time.Second) {
			return time.Duration(v) * time.Second, true
		}
	case float64:
		if v >= 0 && v <= maxAheadRef.Seconds() {
			return time.Duration(v * float64(time.Second)), true
		}
	}
	return 0, false
}

func paramCountRef(p *httpsfv.Params, k string) int64 {
	if p == nil {
		return -1
	}
	v, _ := p.Get(k)
	n, _ := countRef(v)
	return n
}

func paramSecondsRef(p *httpsfv.Params, k string) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	v, _ := p.Get(k)
	return secondsRef(v)
}

func paramStringRef(p *httpsfv.Params, k string) string {
	if p == nil {
		return ""
	}
	v, _ := p.Get(k)
	s, _ := itemNameRef(v)
	return s
}

func paramBytesRef(p *httpsfv.Params, k string) []byte {
	if p == nil {
		return nil
	}
	v, _ := p.Get(k)
	b, _ := v.([]byte)
	return b
}

func dictCountRef(d *httpsfv.Dictionary, k string) int64 {
	m, ok := d.Get(k)
	if !ok {
		return -1
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return -1
	}
	n, _ := countRef(it.Value)
	return n
}

type kindRef uint8

const (
	kindNoneRef kindRef = iota

	kindRetryAfterRef   // Retry-After
	kindRetryAfterMsRef // retry-after-ms, x-ms-retry-after-ms
	kindRetryInRef      // X-Retry-In

	kindPolicyRef    // RateLimit-Policy
	kindRateLimitRef // RateLimit

	// Earlier IETF drafts, and GitLab.
	kindDraftLimitRef     // RateLimit-Limit
	kindDraftRemainingRef // RateLimit-Remaining
	kindDraftResetRef     // RateLimit-Reset
	kindDraftResetTimeRef // RateLimit-ResetTime (GitLab)
	kindDraftObservedRef  // RateLimit-Observed (GitLab)
	kindDraftNameRef      // RateLimit-Name (GitLab)

	// X-RateLimit-* and x-rate-limit-*.
	kindXLimitRef      // X-RateLimit-Limit
	kindXRemainingRef  // X-RateLimit-Remaining
	kindXResetRef      // X-RateLimit-Reset
	kindXResetAfterRef // X-RateLimit-Reset-After (Discord)
	kindXUsedRef       // X-RateLimit-Used (GitHub, Reddit)
	kindXResourceRef   // X-RateLimit-Resource (GitHub)
	kindXBucketRef     // X-RateLimit-Bucket (Discord)
	kindXScopeRef      // X-RateLimit-Scope (Discord)
	kindXIntervalRef   // X-RateLimit-Interval-Seconds (Jira)
	kindXFillRateRef   // X-RateLimit-FillRate (Jira)

	kindShopifyRef    // X-Shopify-Shop-Api-Call-Limit
	kindSalesforceRef // Sforce-Limit-Info
	kindAgeRef        // Age: a positive one means the response came from a cache

	numStaticRef

	// Named kinds: the order is the index into named.fields.
	kindNamedLimitRef
	kindNamedRemainingRef
	kindNamedResetRef
	kindNamedWindowRef
)

type familyRef uint8

const (
	famXRef         familyRef = iota // x-ratelimit-limit-<name> (OpenAI), x-ratelimit-<name>-limit (Linear)
	famAnthropicRef                  // anthropic-ratelimit-<name>-limit
	famAzureRef                      // x-ms-ratelimit-remaining-<name>
	famAIRef                         // x-ai-ratelimit-limit-<name> (APISIX)
	famHubSpotRef                    // x-hubspot-ratelimit-*
)

func classifyRef(k string) (kindRef, familyRef, string) {
	if len(k) < len("Age") {
		return kindNoneRef, 0, ""
	}
	switch k[0] | 0x20 {
	case 'r':
		if k[1]|0x20 == 'e' {
			switch {
			case equalLowerRef(k, "retry-after"):
				return kindRetryAfterRef, 0, ""
			case equalLowerRef(k, "retry-after-ms"):
				return kindRetryAfterMsRef, 0, ""
			case len(k) > len("retry-after-") && equalLowerRef(k[:len("retry-after-")], "retry-after-"):
				return kindRetryAfterRef, 0, ""
			}
			break
		}
		switch {
		case equalLowerRef(k, "ratelimit"):
			return kindRateLimitRef, 0, ""
		case hasPrefixLowerRef(k, "ratelimit-"):
			return draftFieldRef(k[len("RateLimit-"):]), 0, ""
		}
	case 'x':
		if k[1] == '-' {
			return xPrefixedRef(k)
		}
	case 's':
		if equalLowerRef(k, "sforce-limit-info") {
			return kindSalesforceRef, 0, ""
		}
	case 'a':
		if equalLowerRef(k, "age") {
			return kindAgeRef, 0, ""
		}
		if hasPrefixLowerRef(k, "anthropic-ratelimit-") {

			rest := k[len("Anthropic-RateLimit-"):]
			switch {
			case hasSuffixLowerRef(rest, "-limit"):
				return kindNamedLimitRef, famAnthropicRef, rest[:len(rest)-len("-limit")]
			case hasSuffixLowerRef(rest, "-remaining"):
				return kindNamedRemainingRef, famAnthropicRef, rest[:len(rest)-len("-remaining")]
			case hasSuffixLowerRef(rest, "-reset"):
				return kindNamedResetRef, famAnthropicRef, rest[:len(rest)-len("-reset")]
			}
		}
	}
	return kindNoneRef, 0, ""
}

func xPrefixedRef(k string) (kindRef, familyRef, string) {
	switch k[2] | 0x20 {
	case 'r':
		switch {
		case hasPrefixLowerRef(k, "x-ratelimit-"):
			return xFieldRef(k[len("X-RateLimit-"):])
		case hasPrefixLowerRef(k, "x-rate-limit-"):
			return xFieldRef(k[len("X-Rate-Limit-"):])
		case equalLowerRef(k, "x-retry-in"):
			return kindRetryInRef, 0, ""
		}
	case 'm':
		switch {
		case equalLowerRef(k, "x-ms-retry-after-ms"):
			return kindRetryAfterMsRef, 0, ""
		case hasPrefixLowerRef(k, "x-ms-ratelimit-remaining-") && len(k) > len("X-Ms-RateLimit-Remaining-"):
			return kindNamedRemainingRef, famAzureRef, k[len("X-Ms-RateLimit-Remaining-"):]
		}
	case 's':
		if equalLowerRef(k, "x-shopify-shop-api-call-limit") {
			return kindShopifyRef, 0, ""
		}
	case 'a':
		if hasPrefixLowerRef(k, "x-ai-ratelimit-") {
			return prefixedRef(k[len("X-AI-RateLimit-"):], famAIRef)
		}
	case 'h':
		if hasPrefixLowerRef(k, "x-hubspot-ratelimit-") {
			return hubSpotFieldRef(k[len("X-HubSpot-RateLimit-"):])
		}
	}
	return kindNoneRef, 0, ""
}

func draftFieldRef(s string) kindRef {
	switch {
	case equalLowerRef(s, "policy"):
		return kindPolicyRef
	case equalLowerRef(s, "limit"):
		return kindDraftLimitRef
	case equalLowerRef(s, "remaining"):
		return kindDraftRemainingRef
	case equalLowerRef(s, "reset"):
		return kindDraftResetRef
	case equalLowerRef(s, "resettime"):
		return kindDraftResetTimeRef
	case equalLowerRef(s, "observed"):
		return kindDraftObservedRef
	case equalLowerRef(s, "name"):
		return kindDraftNameRef
	}
	return kindNoneRef
}

func xFieldRef(s string) (kindRef, familyRef, string) {
	if len(s) < 64 && xLengthsRef&(1<<len(s)) != 0 {
		for _, f := range xFieldsRef {
			if equalLowerRef(s, f.field) {
				return f.kind, 0, ""
			}
		}
	}
	if kd, fam, name := prefixedRef(s, famXRef); kd != kindNoneRef {
		return kd, fam, name
	}

	for _, p := range namedPartsRef {
		if n := len(s) - len(p.part) - 1; n > 0 && s[n] == '-' && equalLowerRef(s[n+1:], p.part) {
			return p.kind, famXRef, s[:n]
		}
	}
	return kindNoneRef, 0, ""
}

var xFieldsRef = [...]struct {
	field string
	kind  kindRef
}{
	{"limit", kindXLimitRef},
	{"remaining", kindXRemainingRef},
	{"reset", kindXResetRef},
	{"reset-after", kindXResetAfterRef},
	{"used", kindXUsedRef},
	{"resource", kindXResourceRef},
	{"bucket", kindXBucketRef},
	{"scope", kindXScopeRef},
	{"interval-seconds", kindXIntervalRef},
	{"fillrate", kindXFillRateRef},
}

var xLengthsRef = func() (m uint64) {
	for _, f := range xFieldsRef {
		m |= 1 << len(f.field)
	}
	return m
}()

var namedPartsRef = [...]struct {
	part string
	kind kindRef
}{
	{"limit", kindNamedLimitRef},
	{"remaining", kindNamedRemainingRef},
	{"reset", kindNamedResetRef},
}

func prefixedRef(s string, fam familyRef) (kindRef, familyRef, string) {
	var (
		kd kindRef
		n  int
	)
	switch {
	case s == "":
	case s[0]|0x20 == 'l':
		if hasPrefixLowerRef(s, "limit-") {
			kd, n = kindNamedLimitRef, len("limit-")
		}
	case hasPrefixLowerRef(s, "remaining-"):
		kd, n = kindNamedRemainingRef, len("remaining-")
	case hasPrefixLowerRef(s, "reset-"):
		kd, n = kindNamedResetRef, len("reset-")
	}
	if kd == kindNoneRef || len(s) == n {
		return kindNoneRef, 0, ""
	}
	return kd, fam, s[n:]
}

func hubSpotFieldRef(s string) (kindRef, familyRef, string) {
	for _, f := range hubSpotFieldsRef {
		if equalLowerRef(s, f.field) {
			return f.kind, famHubSpotRef, f.name
		}
	}
	return kindNoneRef, 0, ""
}

var hubSpotFieldsRef = [...]struct {
	field string
	kind  kindRef
	name  string
}{
	{"max", kindNamedLimitRef, "interval"},
	{"remaining", kindNamedRemainingRef, "interval"},
	{"interval-milliseconds", kindNamedWindowRef, "interval"},
	{"daily", kindNamedLimitRef, "daily"},
	{"daily-remaining", kindNamedRemainingRef, "daily"},
	{"secondly", kindNamedLimitRef, "secondly"},
	{"secondly-remaining", kindNamedRemainingRef, "secondly"},
}

func addLinesRef(lines, vals []string) []string {
	if lines == nil {
		return vals
	}
	return append(lines[:len(lines):len(lines)], vals...)
}

type namedRef struct {
	fam    familyRef
	name   string
	fields [4][]string // indexed by kind - kindNamedLimit
}

var commonNamesRef = [...]string{
	"requests", "tokens", "input-tokens", "output-tokens",
	"subscription-reads", "subscription-writes", "subscription-deletes",
	"tenant-reads", "tenant-writes", "tenant-deletes",
	"subscription-resource-requests", "subscription-resource-entities-read",
	"resource", "second", "minute", "hour", "day",
	"complexity", "endpoint-requests", "interval", "daily", "secondly",
}

func lowerNameRef(name string) string {
	lower := true
	for i := 0; i < len(name) && lower; i++ {
		c := name[i]
		lower = c < 0x80 && (c < 'A' || c > 'Z')
	}
	if lower {
		return name
	}
	for _, c := range commonNamesRef {
		if equalLowerRef(name, c) {
			return c
		}
	}
	return strings.ToLower(name)
}

func addNamedRef(nd []namedRef, fam familyRef, name string, idx int, vals []string) (_ []namedRef, again bool) {
	i := 0
	for ; i < len(nd) && nd[i].fam <= fam; i++ {
		if nd[i].fam == fam && equalFoldRef(nd[i].name, name) {
			again = nd[i].fields[idx] != nil
			nd[i].fields[idx] = addLinesRef(nd[i].fields[idx], vals)
			return nd, again
		}
	}
	name = lowerNameRef(name)
	for i > 0 && nd[i-1].fam == fam && nd[i-1].name > name {
		i--
	}

	again = i > 0 && nd[i-1].fam == fam && nd[i-1].name == name
	nd = slices.Insert(nd, i, namedRef{fam: fam, name: name})
	nd[i].fields[idx] = vals
	return nd, again
}

func gatherRef(st *[numStaticRef][]string, nd []namedRef, k string, vs []string) (_ []namedRef, found, again bool) {
	if len(vs) == 0 {
		return nd, false, false
	}
	kd, fam, name := classifyRef(k)
	switch {
	case kd == kindNoneRef:
		return nd, false, false
	case kd < numStaticRef:
		again = st[kd] != nil
		st[kd] = addLinesRef(st[kd], vs)
		return nd, kd != kindAgeRef, again
	}
	nd, again = addNamedRef(nd, fam, name, int(kd-kindNamedLimitRef), vs)
	return nd, true, again
}

func parseRef(h http.Header, now time.Time) Info {
	var (
		st   [numStaticRef][]string
		nbuf [8]namedRef
	)
	nd := nbuf[:0]
	found, again := false, false
	for k, vs := range h {
		var f, a bool
		nd, f, a = gatherRef(&st, nd, k, vs)
		found, again = found || f, again || a
	}
	if !found {
		return Info{}
	}
	if again {

		st, nd = [numStaticRef][]string{}, nbuf[:0]
		for _, k := range slices.Sorted(maps.Keys(h)) {
			nd, _, _ = gatherRef(&st, nd, k, h[k])
		}
	}

	var info Info

	for _, v := range st[kindRetryAfterMsRef] {
		if d, ok := parseMillisRef(v); ok {
			info.RetryAfter = max(info.RetryAfter, d)
			info.HasRetryAfter = true
		}
	}
	for _, v := range st[kindRetryInRef] {
		if d, ok := parseGoDurationRef(trimRef(v)); ok {
			info.RetryAfter = max(info.RetryAfter, d)
			info.HasRetryAfter = true
		}
	}
	if !info.HasRetryAfter {
		for _, v := range st[kindRetryAfterRef] {
			if d, ok := parseRetryAfterRef(v, now); ok {
				info.RetryAfter = max(info.RetryAfter, d)
				info.HasRetryAfter = true
			}
		}
	}

	if cachedRef(st[kindAgeRef]) {
		return info
	}
	// Its own variable, so that buf stays on the stack: only a copy leaves.
	var buf [8]Quota
	if qs := appendQuotasRef(buf[:0], &st, nd, now); len(qs) > 0 {
		info.Quotas = make([]Quota, len(qs))
		copy(info.Quotas, qs)
	}
	return info
}

func appendQuotasRef(qs []Quota, st *[numStaticRef][]string, nd []namedRef, now time.Time) []Quota {
	qs = appendIETFRef(qs, st[kindPolicyRef], st[kindRateLimitRef], now)
	qs = appendPositionalRef(qs, &positionalRef{
		limit:     st[kindDraftLimitRef],
		policy:    st[kindPolicyRef],
		remaining: st[kindDraftRemainingRef],
		reset:     st[kindDraftResetRef],
		resetTime: st[kindDraftResetTimeRef],
		used:      st[kindDraftObservedRef],
		name:      st[kindDraftNameRef],
	}, now)
	name := st[kindXResourceRef]
	if name == nil {
		name = st[kindXBucketRef]
	}
	if name == nil {
		name = st[kindXScopeRef]
	}
	qs = appendPositionalRef(qs, &positionalRef{
		limit:      st[kindXLimitRef],
		remaining:  st[kindXRemainingRef],
		reset:      st[kindXResetRef],
		resetAfter: st[kindXResetAfterRef],
		used:       st[kindXUsedRef],
		name:       name,
		interval:   st[kindXIntervalRef],
		fillRate:   st[kindXFillRateRef],
	}, now)
	for i := range nd {
		qs = appendNamedRef(qs, &nd[i], now)
	}
	qs = appendShopifyRef(qs, st[kindShopifyRef])
	return appendSalesforceRef(qs, st[kindSalesforceRef])
}

func cachedRef(age []string) bool {
	return len(age) > 0 && parseCountRef(age[0]) > 0
}

type positionalRef struct {
	limit, policy, remaining, reset, resetAfter, resetTime []string
	used, name, interval, fillRate                         []string
}

func appendPositionalRef(qs []Quota, p *positionalRef, now time.Time) []Quota {
	if p.limit == nil && p.remaining == nil && p.reset == nil &&
		p.resetAfter == nil && p.resetTime == nil && p.used == nil {
		return qs
	}
	if r, ok := p.single(); ok {
		return appendRowRef(qs, &r, now)
	}
	return appendRowsRef(qs, p, now)
}

func appendRowsRef(qs []Quota, p *positionalRef, now time.Time) []Quota {
	var limits [2]limitMemberRef
	ls := parseLimitsRef(limits[:0], p.limit, p.policy)
	rem, rst, ra := membersRef{lines: p.remaining}, membersRef{lines: p.reset}, membersRef{lines: p.resetAfter}
	rt, used, nm := membersRef{lines: p.resetTime}, membersRef{lines: p.used}, membersRef{lines: p.name}
	iv, fr := membersRef{lines: p.interval}, membersRef{lines: p.fillRate}
	for i := 0; ; i++ {
		r := rowRef{
			limit:     limitMemberRef{limit: -1},
			remaining: rem.next(), reset: rst.next(), resetAfter: ra.next(), resetTime: rt.next(), used: used.next(),
		}
		if i >= len(ls) && r.remaining == "" && r.reset == "" && r.resetAfter == "" && r.resetTime == "" && r.used == "" {
			return qs
		}
		if i < len(ls) {
			r.limit = ls[i]
		}
		r.name, r.interval, r.fillRate = nm.next(), iv.next(), fr.next()
		qs = appendRowRef(qs, &r, now)
	}
}

type rowRef struct {
	limit                                   limitMemberRef
	remaining, reset, resetAfter, resetTime string
	used, name, interval, fillRate          string
}

func (p *positionalRef) single() (rowRef, bool) {
	if p.policy != nil {
		return rowRef{}, false
	}
	var m [9]string
	for i, lines := range [...][]string{
		p.limit, p.remaining, p.reset, p.resetAfter, p.resetTime, p.used, p.name, p.interval, p.fillRate,
	} {
		var ok bool
		if m[i], ok = onlyMemberRef(lines); !ok {
			return rowRef{}, false
		}
	}
	if strings.IndexByte(m[0], ';') >= 0 {
		return rowRef{}, false
	}
	return rowRef{
		limit:     limitMemberRef{limit: parseCountRef(m[0])},
		remaining: m[1], reset: m[2], resetAfter: m[3], resetTime: m[4],
		used: m[5], name: m[6], interval: m[7], fillRate: m[8],
	}, true
}

func onlyMemberRef(lines []string) (m string, ok bool) {
	if len(lines) == 0 {
		return "", true
	}
	return oneLineRef(lines)
}

func oneLineRef(lines []string) (m string, ok bool) {
	if len(lines) == 1 && strings.IndexByte(lines[0], ',') < 0 {
		return trimRef(lines[0]), true
	}
	return "", false
}

func appendRowRef(qs []Quota, r *rowRef, now time.Time) []Quota {

	rem, params, _ := strings.Cut(r.remaining, ";")
	q := Quota{Name: r.name, Limit: r.limit.limit, Remaining: parseCountRef(rem), Window: r.limit.window}
	if q.Window == 0 {
		q.Window = windowParamRef(params)
	}
	if u := parseCountRef(r.used); q.Remaining < 0 && q.Limit >= 0 && u >= 0 {
		q.Remaining = max(q.Limit-u, 0)
	}

	if d, ok := parseSecondsRef(r.resetAfter); ok {
		q.Reset = now.Add(d)
	} else if t, ok := parseResetRef(r.reset, now); ok {
		q.Reset = t
	} else if t, ok := parseResetRef(r.resetTime, now); ok {
		q.Reset = t
	}
	if q.Window == 0 {
		q.Window = refillWindowRef(q.Limit, r.interval, r.fillRate)
	}
	if q.known() {
		qs = append(qs, q)
	}
	return qs
}

func refillWindowRef(limit int64, interval, fillRate string) time.Duration {
	iv, ok := parseSecondsRef(interval)
	if !ok || iv <= 0 || limit <= 0 {
		return 0
	}
	fr := parseCountRef(fillRate)
	if fr <= 0 {
		return 0
	}
	w := float64(iv) * float64(limit) / float64(fr)
	if w > float64(maxAheadRef) {
		return 0
	}
	return time.Duration(w)
}

type limitMemberRef struct {
	limit  int64
	window time.Duration
}

func parseLimitsRef(dst []limitMemberRef, limits, policies []string) []limitMemberRef {
	total, plain := 0, 0
	l := membersRef{lines: limits}
	for m := l.next(); m != ""; m = l.next() {
		total++
		if strings.IndexByte(m, ';') < 0 {
			plain++
		}
	}
	policed := plain < total || policies != nil
	l = membersRef{lines: limits}
	for m := l.next(); m != ""; m = l.next() {
		v, params, hasParams := strings.Cut(m, ";")
		if hasParams && plain > 0 {
			continue
		}
		lm := limitMemberRef{limit: parseCountRef(v), window: windowParamRef(params)}
		if !hasParams && policed {
			lm.window = policyWindowRef(lm.limit, limits, policies)
		}
		dst = append(dst, lm)
	}
	return dst
}

func policyWindowRef(limit int64, lists ...[]string) time.Duration {
	if limit < 0 {
		return 0
	}
	for _, lines := range lists {
		l := membersRef{lines: lines}
		for m := l.next(); m != ""; m = l.next() {
			v, params, ok := strings.Cut(m, ";")
			if ok && parseCountRef(v) == limit {
				if w := windowParamRef(params); w > 0 {
					return w
				}
			}
		}
	}
	return 0
}

func windowParamRef(params string) time.Duration {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(p, "=")
		if trimRef(k) == "w" {
			if d, ok := parseSecondsRef(v); ok {
				return d
			}
			return 0
		}
	}
	return 0
}

func appendNamedRef(qs []Quota, g *namedRef, now time.Time) []Quota {
	if r, ok := g.single(); ok {
		return appendNamedRowRef(qs, g, &r, now)
	}
	return appendNamedRowsRef(qs, g, now)
}

type namedRowRef [4]string

func (g *namedRef) single() (r namedRowRef, ok bool) {
	for i, lines := range g.fields {
		if r[i], ok = onlyMemberRef(lines); !ok {
			return r, false
		}
	}
	return r, r[0] != "" || r[1] != "" || r[2] != ""
}

func appendNamedRowsRef(qs []Quota, g *namedRef, now time.Time) []Quota {
	var ls [4]membersRef
	for i, lines := range g.fields {
		ls[i].lines = lines
	}
	for {
		r := namedRowRef{ls[0].next(), ls[1].next(), ls[2].next()}
		if r[0] == "" && r[1] == "" && r[2] == "" {
			return qs
		}
		r[3] = ls[3].next()
		qs = appendNamedRowRef(qs, g, &r, now)
	}
}

func appendNamedRowRef(qs []Quota, g *namedRef, r *namedRowRef, now time.Time) []Quota {
	q := Quota{Name: g.name, Limit: parseCountRef(r[0]), Remaining: -1, Unit: nameUnitRef(g.fam, g.name)}
	switch g.fam {
	case famXRef:
		q.Window = nameWindowRef(g.name)
	case famHubSpotRef:

		q.Window = nameWindowRef(g.name)
		if d, ok := parseMillisRef(r[3]); ok && d > 0 {
			q.Window = d
		}
	}
	rem := r[1]

	if name, count, ok := strings.Cut(rem, ";"); ok && g.fam == famAzureRef {
		q.Name, rem = trimRef(name), count
	}
	q.Remaining = parseCountRef(rem)
	if t, ok := parseResetRef(r[2], now); ok {
		q.Reset = t
	}
	if q.known() {
		qs = append(qs, q)
	}
	return qs
}

func nameWindowRef(name string) time.Duration {
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

func nameUnitRef(fam familyRef, name string) string {
	switch {
	case fam == famAIRef:
		return "tokens"
	case fam == famHubSpotRef:
		return "requests"
	case fam == famAzureRef:
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

func appendShopifyRef(qs []Quota, vals []string) []Quota {
	l := membersRef{lines: vals}
	for m := l.next(); m != ""; m = l.next() {
		if limit, remaining, ok := parseUsageRef(m); ok {
			qs = append(qs, Quota{Limit: limit, Remaining: remaining})
		}
	}
	return qs
}

func parseUsageRef(s string) (limit, remaining int64, ok bool) {
	u, l, ok := strings.Cut(s, "/")
	used, limit := parseCountRef(u), parseCountRef(l)
	if !ok || used < 0 || limit < 0 {
		return 0, 0, false
	}
	return limit, max(limit-used, 0), true
}

func appendSalesforceRef(qs []Quota, vals []string) []Quota {
	for _, line := range vals {
		for line != "" {
			m := line
			if i := strings.IndexAny(line, ";,"); i >= 0 {
				m, line = line[:i], line[i+1:]
			} else {
				line = ""
			}
			key, v, ok := strings.Cut(trimRef(m), "=")
			if !ok || !strings.HasSuffix(key, "api-usage") {
				continue
			}
			q := Quota{Name: key, Unit: "requests"}
			if key == "api-usage" {
				q.Window = 24 * time.Hour
			}
			v, app, _ := strings.Cut(v, "(")
			if k, name, ok := strings.Cut(strings.TrimSuffix(app, ")"), "="); ok && trimRef(k) == "appName" {
				q.Partition = trimRef(name)
			}
			if q.Limit, q.Remaining, ok = parseUsageRef(v); ok {
				qs = append(qs, q)
			}
		}
	}
	return qs
}

const maxAheadRef = 366 * 24 * time.Hour

func isDigitRef(c byte) bool { return '0' <= c && c <= '9' }

func isAlphaRef(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func equalLowerRef(s, lower string) bool {
	return len(s) == len(lower) && hasPrefixLowerRef(s, lower)
}

func hasSuffixLowerRef(s, lower string) bool {
	return len(s) > len(lower) && hasPrefixLowerRef(s[len(s)-len(lower):], lower)
}

func hasPrefixLowerRef(s, lower string) bool {
	n := len(lower)
	switch {
	case len(s) < n:
		return false
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if !foldMatchRef(load64Ref(s[i:]), load64Ref(lower[i:])) {
				return false
			}
		}
		return foldMatchRef(load64Ref(s[n-8:]), load64Ref(lower[n-8:]))
	case n >= 4:
		return foldMatchRef(load32Ref(s), load32Ref(lower)) && foldMatchRef(load32Ref(s[n-4:]), load32Ref(lower[n-4:]))
	}
	for i := range n {
		if !foldMatchRef(uint64(s[i]), uint64(lower[i])) {
			return false
		}
	}
	return true
}

func foldMatchRef(x, w uint64) bool {
	return x|(w&0x4040404040404040)>>1 == w
}

func load64Ref(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load32Ref(s string) uint64 {
	_ = s[3]
	return uint64(uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24)
}

func equalFoldRef(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func trimRef(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func parseDecRef(s string) (whole, frac int64, ok bool) {
	i := 0
	for ; i < len(s) && isDigitRef(s[i]); i++ {
		if i == 18 {
			return 0, 0, false
		}
		whole = whole*10 + int64(s[i]-'0')
	}
	if i == 0 {
		return 0, 0, false
	}
	if i == len(s) {
		return whole, 0, true
	}
	if s[i] != '.' || i+1 == len(s) {
		return 0, 0, false
	}
	scale := int64(1e8)
	for i++; i < len(s); i++ {
		if !isDigitRef(s[i]) {
			return 0, 0, false
		}
		frac += int64(s[i]-'0') * scale
		scale /= 10
	}
	return whole, frac, true
}

func parseCountRef(s string) int64 {
	whole, _, ok := parseDecRef(trimRef(s))
	if !ok {
		return -1
	}
	return whole
}

func scaledRef(whole, frac int64, unit time.Duration) (time.Duration, bool) {
	if whole > int64(maxAheadRef/unit) {
		return 0, false
	}
	d := time.Duration(whole)*unit + time.Duration(frac*int64(unit)/1e9)
	if d > maxAheadRef {
		return 0, false
	}
	return d, true
}

func parseSecondsRef(s string) (time.Duration, bool) {
	whole, frac, ok := parseDecRef(trimRef(s))
	if !ok {
		return 0, false
	}
	return scaledRef(whole, frac, time.Second)
}

func parseMillisRef(s string) (time.Duration, bool) {
	whole, frac, ok := parseDecRef(trimRef(s))
	if !ok {
		return 0, false
	}
	return scaledRef(whole, frac, time.Millisecond)
}

func parseRetryAfterRef(s string, now time.Time) (time.Duration, bool) {
	s = trimRef(s)
	if d, ok := parseSecondsRef(s); ok {
		return d, true
	}
	t, ok := parseDateRef(s)
	if !ok {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	if d > maxAheadRef {
		return 0, false
	}
	return d, true
}

func parseResetRef(s string, now time.Time) (time.Time, bool) {
	s = trimRef(s)
	if s == "" {
		return time.Time{}, false
	}
	whole, frac, ok := parseDecRef(s)
	if !ok {
		if d, ok := parseGoDurationRef(s); ok {
			return now.Add(d), true
		}
		t, ok := parseDateRef(s)
		if !ok || t.IsZero() || reachRef(t.Unix(), int64(t.Nanosecond()), now) > 0 {
			return time.Time{}, false
		}
		return t.In(now.Location()), true
	}

	sec, nsec := whole, frac
	switch {
	case whole >= 1e12:
		sec, nsec = epochMillisRef(whole, frac)
		if reachRef(sec, nsec, now) > 0 {
			return time.Time{}, false
		}
	case whole >= 1e9:
		if reachRef(sec, nsec, now) > 0 {

			sec, nsec = epochMillisRef(whole, frac)
			if reachRef(sec, nsec, now) != 0 {
				return time.Time{}, false
			}
		}
	default:
		d, ok := scaledRef(whole, frac, time.Second)
		if ok && d <= maxAheadRef {
			return now.Add(d), true
		}

		if reachRef(sec, nsec, now) != 0 {
			return time.Time{}, false
		}
	}
	return time.Unix(sec, nsec).In(now.Location()), true
}

func epochMillisRef(whole, frac int64) (sec, nsec int64) {
	return whole / 1000, (whole%1000)*1e6 + frac/1e3
}

func reachRef(sec, nsec int64, now time.Time) int {
	const most = int64(maxAheadRef / time.Second)
	var d time.Duration
	switch us := now.Unix(); {
	case us < -1<<62 || us > 1<<62:

		d = time.Unix(sec, nsec).Sub(now)
	case sec-us > most:
		return 1
	case sec-us < -most:
		return -1
	default:
		d = time.Duration(sec-us)*time.Second + time.Duration(nsec-int64(now.Nanosecond()))
	}
	switch {
	case d > maxAheadRef:
		return 1
	case d < -maxAheadRef:
		return -1
	}
	return 0
}

func parseGoDurationRef(s string) (time.Duration, bool) {
	if s == "" || !(isDigitRef(s[0]) || s[0] == '.') || !isAlphaRef(s[len(s)-1]) {
		return 0, false
	}
	if d, ok, sure := wholeSecondsOrMillisRef(s); sure {
		return d, ok
	}

	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigitRef(c), c == '.', c >= 0x80,
			c == 'n', c == 'u', c == 'm', c == 's', c == 'h':
		default:
			return 0, false
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxAheadRef {
		return 0, false
	}
	return d, true
}

func wholeSecondsOrMillisRef(s string) (d time.Duration, ok, sure bool) {
	n, unit := len(s)-1, time.Second
	if len(s) >= 2 && s[n] == 's' && s[n-1] == 'm' {
		n, unit = n-1, time.Millisecond
	}
	if s[len(s)-1] != 's' || n == 0 || n > 18 {
		return 0, false, false
	}
	var v int64
	for i := range n {
		if !isDigitRef(s[i]) {
			return 0, false, false
		}
		v = v*10 + int64(s[i]-'0')
	}
	d, ok = scaledRef(v, 0, unit)
	return d, ok, true
}

var rfc822ZonesRef = [...]struct {
	name   string
	offset int // seconds east of UTC
}{
	{"EST", -5 * 3600}, {"EDT", -4 * 3600},
	{"CST", -6 * 3600}, {"CDT", -5 * 3600},
	{"MST", -7 * 3600}, {"MDT", -6 * 3600},
	{"PST", -8 * 3600}, {"PDT", -7 * 3600},
}

func parseDateRef(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	if isDigitRef(s[0]) {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, true
		}
		if t, err := time.Parse("2006-01-02T15:04Z07:00", s); err == nil {
			return t, true
		}
		return time.Time{}, false
	}
	if !isAlphaRef(s[0]) {
		return time.Time{}, false
	}
	if t, err := http.ParseTime(s); err == nil {
		return t, true
	}
	if t, err := time.ParseInLocation(time.RFC1123Z, s, time.UTC); err == nil {
		return t, true
	}
	t, err := time.ParseInLocation(time.RFC1123, s, time.UTC)
	if err != nil {
		return time.Time{}, false
	}

	name, _ := t.Zone()
	for _, z := range rfc822ZonesRef {
		if name == z.name {
			return t.Add(-time.Duration(z.offset) * time.Second).UTC(), true
		}
	}
	return t.UTC(), true
}

type membersRef struct {
	lines []string // the lines not yet begun
	line  string   // what is left of the current line
}

func (l *membersRef) next() string {
	if len(l.line)|len(l.lines) == 0 {
		return ""
	}
	return l.more()
}

func (l *membersRef) more() string {
	for {
		for l.line == "" {
			if len(l.lines) == 0 {
				return ""
			}
			l.line, l.lines = l.lines[0], l.lines[1:]
		}
		m := l.line
		i := strings.IndexByte(m, ',')
		switch {
		case i < 0:
			l.line = ""
		case isWeekdayRef(trimRef(m[:i])):
			j := strings.IndexByte(m[i+1:], ',')
			if j < 0 {
				l.line = ""
			} else {
				m, l.line = m[:i+1+j], m[i+2+j:]
			}
		default:
			m, l.line = m[:i], m[i+1:]
		}
		if m = trimRef(m); m != "" {
			return m
		}
	}
}

var weekdaysRef = [...]string{
	"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun",
	"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
}

func isWeekdayRef(s string) bool {
	if len(s) < 3 || !isAlphaRef(s[0]) {
		return false
	}
	for _, w := range weekdaysRef {
		if strings.EqualFold(s, w) {
			return true
		}
	}
	return false
}
