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
	reset := ceilSeconds(d.ResetAfter)
	more := reset // IETF t: until more quota is available
	if !d.Allowed {
		reset = max(ceilSeconds(d.RetryAfter), 1)
		more = reset
	} else if d.RetryAfter > 0 {
		more = ceilSeconds(d.RetryAfter)
	}

	// Every value goes into one buffer and one string, sliced per field.
	var buf [128]byte
	b := buf[:0]
	var ends [5]int
	b = strconv.AppendInt(b, reset, 10) // Retry-After and X-RateLimit-Reset
	ends[0] = len(b)
	b = strconv.AppendInt(b, limit, 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, remaining, 10)
	ends[2] = len(b)
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

	// One backing array for every field's []string: h.Set would allocate
	// one per field.
	var vals [6]string
	i := 0
	set := func(key, val string) {
		vals[i] = val
		h[key] = vals[i : i+1 : i+1]
		i++
	}
	if !d.Allowed {
		set("Retry-After", v[:ends[0]])
	}
	if s&Legacy != 0 {
		set("X-Ratelimit-Limit", v[ends[0]:ends[1]])
		set("X-Ratelimit-Remaining", v[ends[1]:ends[2]])
		set("X-Ratelimit-Reset", v[:ends[0]])
	}
	if s&IETF != 0 {
		set("Ratelimit-Policy", v[ends[2]:ends[3]])
		set("Ratelimit", v[ends[3]:ends[4]])
	}
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
