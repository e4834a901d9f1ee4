package headers

import (
	"bytes"
	"time"

	"github.com/dunglas/httpsfv"
)

// The IETF draft-ietf-httpapi-ratelimit-headers, latest form:
//
//	RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400
//	RateLimit: "burst";r=50;t=30
//
// Both are structured-field lists. A policy item names a policy and carries
// its quota (q), window in seconds (w), quota unit (qu) and partition key
// (pk); a RateLimit item names the policy it reports on and carries what
// remains (r), the effective window in seconds (t: until more is
// available; until the reset, up to draft -09) and its partition key (pk).
// Both readings of t become Reset = now + t. Earlier drafts sent
//
//	RateLimit: limit=100, remaining=50, reset=30
//	RateLimit-Policy: 100;w=60
//
// a dictionary, with policies whose item is the quota itself.

// policy is one RateLimit-Policy item.
type policy struct {
	name   string
	unit   string
	pk     []byte
	quota  int64
	window time.Duration
}

// appendIETF appends the quotas of the RateLimit and RateLimit-Policy
// fields to qs.
func appendIETF(qs []Quota, policyVals, rlVals []string, now time.Time) []Quota {
	if policyVals == nil && rlVals == nil {
		return qs
	}
	var (
		pbuf     [8]policy
		ps, olds []policy // named policies; earlier drafts' numbered ones
		obuf     [8]policy
	)
	ps, olds = pbuf[:0], obuf[:0]
	if policyVals != nil {
		if l, err := httpsfv.UnmarshalList(policyVals); err == nil {
			for _, m := range l {
				it, ok := m.(httpsfv.Item)
				if !ok {
					continue
				}
				p := policy{quota: paramCount(it.Params, "q")}
				p.window, _ = paramSeconds(it.Params, "w")
				p.pk = paramBytes(it.Params, "pk")
				p.unit = paramString(it.Params, "qu")
				if q, ok := count(it.Value); ok { // earlier drafts: "100;w=60"
					p.quota = q
					olds = append(olds, p)
					continue
				}
				if p.name, ok = itemName(it.Value); ok {
					if p.unit == "" {
						p.unit = "requests" // the draft's default
					}
					ps = append(ps, p)
				}
			}
		}
	}

	var (
		rbuf [8]rlItem
		rls  = rbuf[:0]
	)
	if rlVals != nil {
		if l, err := httpsfv.UnmarshalList(rlVals); err == nil {
			for _, m := range l {
				it, ok := m.(httpsfv.Item)
				if !ok {
					continue
				}
				name, ok := itemName(it.Value)
				if !ok {
					continue
				}
				r := rlItem{q: Quota{Name: name, Limit: -1, Remaining: paramCount(it.Params, "r")}, policy: -1}
				if t, ok := paramSeconds(it.Params, "t"); ok {
					r.q.Reset = now.Add(t)
				}
				// Join its policy: same name and, if both say, same partition.
				pk := paramBytes(it.Params, "pk")
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
			q := Quota{Limit: dictCount(d, "limit"), Remaining: dictCount(d, "remaining")}
			if m, ok := d.Get("reset"); ok {
				if it, ok := m.(httpsfv.Item); ok {
					if t, ok := seconds(it.Value); ok {
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
				rls = append(rls, rlItem{q: q, policy: -1})
			}
		}
	}

	// Policies first, in their order, each with what RateLimit said of it;
	// then the RateLimit items no policy describes.
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

// rlItem is one RateLimit item and the index of the policy it joined, or -1.
type rlItem struct {
	q      Quota
	policy int
}

// itemName returns the name an item carries: a string or a token.
func itemName(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case httpsfv.Token:
		return string(v), true
	}
	return "", false
}

// count returns a structured-field integer or decimal as a non-negative
// count.
func count(v any) (int64, bool) {
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

// seconds returns a structured-field integer or decimal number of seconds
// as a Duration no longer than maxAhead.
func seconds(v any) (time.Duration, bool) {
	switch v := v.(type) {
	case int64:
		if v >= 0 && v <= int64(maxAhead/time.Second) {
			return time.Duration(v) * time.Second, true
		}
	case float64:
		if v >= 0 && v <= maxAhead.Seconds() {
			return time.Duration(v * float64(time.Second)), true
		}
	}
	return 0, false
}

func paramCount(p *httpsfv.Params, k string) int64 {
	if p == nil {
		return -1
	}
	v, _ := p.Get(k)
	n, _ := count(v)
	return n
}

func paramSeconds(p *httpsfv.Params, k string) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	v, _ := p.Get(k)
	return seconds(v)
}

// paramString returns a string or token parameter, or "".
func paramString(p *httpsfv.Params, k string) string {
	if p == nil {
		return ""
	}
	v, _ := p.Get(k)
	s, _ := itemName(v)
	return s
}

func paramBytes(p *httpsfv.Params, k string) []byte {
	if p == nil {
		return nil
	}
	v, _ := p.Get(k)
	b, _ := v.([]byte)
	return b
}

func dictCount(d *httpsfv.Dictionary, k string) int64 {
	m, ok := d.Get(k)
	if !ok {
		return -1
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return -1
	}
	n, _ := count(it.Value)
	return n
}
