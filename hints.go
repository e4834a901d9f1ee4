package throttle

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle/headers"
)

// beyond says which of a response's hints lie beyond headers.Parse's
// horizon (see farHints).
type beyond struct{ retry, reset bool }

func (b beyond) any() bool { return b.retry || b.reset }

// saysStop reports whether a response's hints beyond the horizon would
// matter: it is a refusal (429, 503), or a quota is at zero with no reset
// that headers.Parse could read.
func saysStop(status int, info headers.Info) bool {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		return true
	}
	for _, q := range info.Quotas {
		if q.Remaining == 0 && q.Reset.IsZero() {
			return true
		}
	}
	return false
}

// farHints reports whether h carries a Retry-After (retry) or a rate-limit
// reset (reset) that is a number or a date and that headers.Parse refused.
// Parse refuses such a value only when it lies more than 366 days ahead
// (or overflows): the server did say "stop", for longer than any caller
// allows, so the Transport pauses for WithMaxPause and Backoff waits its max.
// A value that is neither a number nor a date is garbage and stays ignored,
// as Parse ignores it.
//
// Resets are looked for in every field whose name holds "ratelimit" or
// "rate-limit" and "reset" (X-RateLimit-Reset, RateLimit-Reset,
// x-ratelimit-reset-tokens, anthropic-ratelimit-tokens-reset, …); the `t`
// parameter of the IETF RateLimit field is not read here.
//
// It runs only on answers that say "stop" (saysStop; any answer Backoff is
// given), never on the hot path.
func farHints(h http.Header, now time.Time) (far beyond) {
	for k, vs := range h {
		var probe http.Header
		isRetry := strings.EqualFold(k, "Retry-After") || strings.EqualFold(k, "Retry-After-Ms") ||
			strings.EqualFold(k, "X-Ms-Retry-After-Ms")
		switch {
		case isRetry:
			probe = http.Header{k: nil}
		case isResetField(k):
			probe = http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": nil}
			k = "X-Ratelimit-Reset"
		default:
			continue
		}
		for _, v := range vs {
			if !timeLike(v) {
				continue
			}
			probe[k] = []string{v}
			info := headers.Parse(probe, now)
			if isRetry && !info.HasRetryAfter {
				far.retry = true
			}
			if !isRetry && (len(info.Quotas) == 0 || info.Quotas[0].Reset.IsZero()) {
				far.reset = true
			}
		}
	}
	return far
}

// isResetField reports whether the field named k is a rate-limit reset.
func isResetField(k string) bool {
	return containsFold(k, "reset") && (containsFold(k, "ratelimit") || containsFold(k, "rate-limit"))
}

// containsFold is strings.Contains, ignoring case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// timeLike reports whether v is a non-negative decimal number ("12",
// "1.5") or a date in one of the forms servers write (HTTP-date, RFC 1123
// with any zone, RFC 3339).
func timeLike(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	if v[0] >= '0' && v[0] <= '9' {
		whole, frac, dot := strings.Cut(v, ".")
		if strings.Trim(whole, "0123456789") == "" && strings.Trim(frac, "0123456789") == "" && (!dot || frac != "") {
			return true
		}
		_, err := time.Parse(time.RFC3339, v)
		return err == nil
	}
	if _, err := http.ParseTime(v); err == nil {
		return true
	}
	if _, err := time.Parse(time.RFC1123Z, v); err == nil {
		return true
	}
	_, err := time.Parse(time.RFC1123, v)
	return err == nil
}
