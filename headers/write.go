package headers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// Style selects which rate-limit fields Write emits. It is a set of bit
// flags. The zero Style writes only Retry-After, and that only on a denied
// decision.
type Style uint8

const (
	// Legacy writes X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (delay in seconds), the de facto convention most
	// clients read.
	Legacy Style = 1 << iota
	// IETF writes RateLimit-Policy and RateLimit as the latest
	// draft-ietf-httpapi-ratelimit-headers defines them, for a policy
	// named "default".
	IETF
	// Both writes Legacy and IETF fields.
	Both = Legacy | IETF
)

// Write sets the rate-limit fields of a response from a limiter's
// decision. Whatever the style, a denied decision gets Retry-After, in
// whole seconds rounded up and at least 1.
//
// The advertised reset (X-RateLimit-Reset, the IETF t parameter) is, when
// the decision is denied, the time until the next permit is available, so a
// client that waits exactly that long loses no throughput; otherwise it is
// the time until the limiter is full again.
//
// Since draft -10, t is the effective window: the seconds within which the
// client can use no more than r, that is, until more quota is available,
// not until all of it is. A denied decision's RetryAfter is exactly that.
// An allowed decision does not say when its next permit comes (only
// ResetAfter, by when every permit is back, which is also the next one for
// a window limiter); a caller that knows, say from a TryAcquire(0) peek
// after the grant, can put it in the allowed decision's RetryAfter and t
// says it, while X-RateLimit-Reset keeps the time until full.
//
// The IETF policy carries no window (w): a Decision does not say how long
// the limiter's window is, only when it is next full, and guessing would
// tell clients a rate the limiter does not enforce.
func Write(h http.Header, d limiters.Decision, s Style) {
	if d.Allowed && s&Both == 0 {
		return
	}
	limit := int64(max(d.Limit, 0))
	remaining := int64(max(d.Remaining, 0))
	wait := d.ResetAfter // X-RateLimit-Reset's, to the nanosecond
	reset := ceilSeconds(wait)
	more := reset // IETF t: until more quota is available
	if !d.Allowed {
		wait = d.RetryAfter
		reset = max(ceilSeconds(d.RetryAfter), 1)
		more = reset
	} else if d.RetryAfter > 0 {
		more = ceilSeconds(d.RetryAfter)
	}

	// Every value goes into one buffer and one string, sliced per field.
	var buf [128]byte
	b := buf[:0]
	var ends [6]int
	b = strconv.AppendInt(b, reset, 10) // Retry-After and X-RateLimit-Reset
	ends[0] = len(b)
	b = strconv.AppendInt(b, limit, 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, remaining, 10)
	ends[2] = len(b)
	// X-RateLimit-Reset-After (Discord's): X-RateLimit-Reset's wait in
	// seconds with milliseconds, rounded up: a client that reads it waits
	// 100 ms for a permit 100 ms away, not the whole second the other
	// fields round up to. (Retry-After-Ms, on a refusal, is the same.)
	b = appendMillis(b, wait)
	ends[5] = len(b)
	ends[3] = len(b)
	if s&IETF != 0 {
		b = append(b, `"default";q=`...)
		b = strconv.AppendInt(b, limit, 10)
		ends[3] = len(b)
		b = append(b, `"default";r=`...)
		b = strconv.AppendInt(b, remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, more, 10)
		ends[4] = len(b)
	}
	v := string(b)

	var f fields
	set := func(key, val string) { f.set(h, key, val) }
	if !d.Allowed {
		set("Retry-After", v[:ends[0]])
	}
	if s&Legacy != 0 {
		set("X-Ratelimit-Limit", v[ends[0]:ends[1]])
		set("X-Ratelimit-Remaining", v[ends[1]:ends[2]])
		set("X-Ratelimit-Reset", v[:ends[0]])
		set("X-Ratelimit-Reset-After", v[ends[2]:ends[5]])
	}
	if s&IETF != 0 {
		set("Ratelimit-Policy", v[ends[5]:ends[3]])
		set("Ratelimit", v[ends[3]:ends[4]])
	}
}

// fields sets header fields whose []string values share one backing
// array: h.Set would allocate one per field.
type fields struct {
	vals [8]string
	n    int
}

// set sets h[key] to the one value val.
func (f *fields) set(h http.Header, key, val string) {
	f.vals[f.n] = val
	h[key] = f.vals[f.n : f.n+1 : f.n+1]
	f.n++
}

// appendMillis appends d in seconds with three decimals, rounded up to
// the millisecond ("0.100", "65.612").
func appendMillis(b []byte, d time.Duration) []byte {
	ms := max(int64(d/time.Millisecond), 0)
	if d > 0 && d%time.Millisecond != 0 {
		ms++
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	return append(b, '.', byte('0'+ms/100%10), byte('0'+ms/10%10), byte('0'+ms%10))
}

// ceilSeconds rounds d up to whole seconds; negative is zero.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int64(s)
}

// Limit is one limit of a server, as WriteLimits advertises it: one IETF
// RateLimit-Policy item and one RateLimit item, and, when it is the limit
// that binds, the legacy X-RateLimit-* triple and Retry-After.
type Limit struct {
	// Name names the policy item, written as a structured-field string
	// (bytes outside printable ASCII percent-encoded, so a name that
	// violated-policies repeats should be printable ASCII already).
	Name string
	// Quota is q: the units the limit admits per Window.
	Quota int64
	// Window is w, written in whole seconds rounded up; zero writes no w
	// (a concurrency limit has none).
	Window time.Duration
	// Unit is qu; "" (requests, the draft's default) writes none.
	Unit string
	// Remaining is r: the units a request would be admitted with now.
	Remaining int64
	// Reset is t: the time until more quota is available, written in
	// whole seconds rounded up; a negative Reset writes no t (waiting
	// alone brings no more: a full limit, a concurrency limit).
	Reset time.Duration
	// Refused says this limit refused the request. RetryAfter is then
	// the time until it could admit it, and Final that no wait can: the
	// request asks for more than the limit ever admits at once.
	Refused    bool
	RetryAfter time.Duration
	Final      bool
}

// Binding returns the index of the limit that binds now, whose numbers the
// legacy X-RateLimit-* triple and Retry-After carry: among the limits that
// refused, a final one, else the one with the longest RetryAfter; when none
// refused, the one with the least Remaining, that is, the one that will
// refuse first (ties: the one with the least left relative to its Quota,
// then the longer Reset). It returns -1 for no limits.
//
// The least Remaining, not the least share of its Quota: 19 of 20 per
// second left binds before 880 of 1000 per hour, and choosing by share would
// have the triple jump between the two from one answer to the next while
// neither is near refusing, which a client reading the triple as one quota
// cannot make sense of.
func Binding(ls []Limit) int {
	best := -1
	for i := range ls {
		if best < 0 || binds(&ls[i], &ls[best]) {
			best = i
		}
	}
	return best
}

// binds reports whether a binds before b.
func binds(a, b *Limit) bool {
	if a.Refused != b.Refused {
		return a.Refused
	}
	if a.Refused {
		if a.Final != b.Final {
			return a.Final
		}
		return a.RetryAfter > b.RetryAfter
	}
	ar, br := max(a.Remaining, 0), max(b.Remaining, 0)
	if ar != br {
		return ar < br
	}
	// ar/a.Quota < br/b.Quota, a zero quota as nothing left.
	if l, r := ar*max(b.Quota, 1), br*max(a.Quota, 1); l != r {
		return l < r
	}
	return a.Reset > b.Reset
}

// WriteLimits sets the rate-limit fields of a response from every limit
// that applied to its request:
//
//   - IETF: RateLimit-Policy has one item per limit, "name";q=..;w=..
//     (;qu=".." for a unit other than requests), and RateLimit one item
//     per limit, "name";r=..;t=.., as draft-ietf-httpapi-ratelimit-headers
//     -10 and its editors' copy since define them.
//   - Legacy: X-RateLimit-Limit, -Remaining and -Reset all describe one
//     limit, the one Binding chooses (the one that refused, else the one
//     with the least left): q, r and t (in whole seconds, rounded
//     up; when it says no t, the window). X-RateLimit-Reset-After (as
//     Discord sends it) is the same wait in seconds with three decimals,
//     rounded up: what lets a client wait 300 ms rather than a second.
//   - A refusal that some wait can cure gets Retry-After (whole seconds,
//     rounded up, at least 1) and retry-after-ms (milliseconds, rounded
//     up), from the binding limit, whatever the style. A final refusal
//     gets neither: retrying cannot help.
//
// Whole-second fields never tell a client to come back early; q and w let
// a client pace below a second, retry-after-ms lets it retry sooner.
func WriteLimits(h http.Header, ls []Limit, s Style) {
	bi := Binding(ls)
	if bi < 0 {
		return
	}
	b := &ls[bi]
	retry := b.Refused && !b.Final

	// Every value goes into one buffer and one string, sliced per field,
	// and every field's []string shares one backing array.
	var buf [512]byte
	v := buf[:0]
	var ends [8]int
	if retry {
		wait := max(b.RetryAfter, 0)
		v = strconv.AppendInt(v, max(ceilSeconds(wait), 1), 10)
		ends[0] = len(v)
		ms := wait / time.Millisecond
		if wait%time.Millisecond != 0 {
			ms++
		}
		v = strconv.AppendInt(v, int64(max(ms, 1)), 10)
	}
	ends[1] = len(v)
	if s&Legacy != 0 {
		reset := b.Reset
		if reset < 0 {
			reset = b.Window
		}
		if retry {
			reset = max(reset, b.RetryAfter)
		}
		v = strconv.AppendInt(v, max(b.Quota, 0), 10)
		ends[2] = len(v)
		v = strconv.AppendInt(v, max(b.Remaining, 0), 10)
		ends[3] = len(v)
		v = strconv.AppendInt(v, ceilSeconds(reset), 10)
		ends[7] = len(v)
		// X-RateLimit-Reset-After (Discord's): the same wait in seconds
		// with milliseconds, rounded up, for clients that can use it.
		v = appendMillis(v, reset)
	}
	ends[4] = len(v)
	if s&IETF != 0 {
		for i := range ls {
			l := &ls[i]
			if i > 0 {
				v = append(v, ", "...)
			}
			v = appendName(v, l.Name)
			v = append(v, ";q="...)
			v = strconv.AppendInt(v, max(l.Quota, 0), 10)
			if l.Unit != "" {
				v = append(v, ";qu="...)
				v = appendName(v, l.Unit)
			}
			if l.Window > 0 {
				v = append(v, ";w="...)
				v = strconv.AppendInt(v, ceilSeconds(l.Window), 10)
			}
		}
		ends[5] = len(v)
		for i := range ls {
			l := &ls[i]
			if i > 0 {
				v = append(v, ", "...)
			}
			v = appendName(v, l.Name)
			v = append(v, ";r="...)
			v = strconv.AppendInt(v, max(l.Remaining, 0), 10)
			t := l.Reset
			if l.Refused && !l.Final {
				t = max(t, l.RetryAfter) // Retry-After is never before t
			}
			if t >= 0 {
				v = append(v, ";t="...)
				v = strconv.AppendInt(v, ceilSeconds(t), 10)
			}
		}
		ends[6] = len(v)
	}
	all := string(v)

	var f fields
	set := func(key, val string) { f.set(h, key, val) }
	if retry {
		set("Retry-After", all[:ends[0]])
		set("Retry-After-Ms", all[ends[0]:ends[1]])
	}
	if s&Legacy != 0 {
		set("X-Ratelimit-Limit", all[ends[1]:ends[2]])
		set("X-Ratelimit-Remaining", all[ends[2]:ends[3]])
		set("X-Ratelimit-Reset", all[ends[3]:ends[7]])
		set("X-Ratelimit-Reset-After", all[ends[7]:ends[4]])
	}
	if s&IETF != 0 {
		set("Ratelimit-Policy", all[ends[4]:ends[5]])
		set("Ratelimit", all[ends[5]:ends[6]])
	}
}

// appendName appends s as a structured-field string: '"' and '\' escaped,
// bytes outside printable ASCII percent-encoded.
func appendName(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
