package throttle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// Backoff is a retryablehttp.Backoff that waits as long as the server asked.
// It reads every format headers.Parse knows (Retry-After, retry-after-ms,
// X-RateLimit-*, the IETF RateLimit fields, OpenAI's, Anthropic's, …), not
// just Retry-After on 429 and 503, and always returns a wait in
// [waitMin, waitMax] (the client's RetryWaitMin and RetryWaitMax; a
// negative waitMin counts as zero, a waitMax below waitMin as waitMin),
// whatever the server sent:
//
//   - A server's wait shorter than waitMin is raised to waitMin; one longer
//     than waitMax is cut to waitMax.
//   - When several fields or lines say when, the longest wait wins: of two
//     Retry-After lines, the later one; of Retry-After and a quota at zero
//     whose reset is later, the reset. A millisecond form (retry-after-ms),
//     when present, is read instead of Retry-After.
//   - A hint the parser refuses because it lies more than 366 days ahead
//     (Retry-After: 99999999999, a date in year 9999) means "stop for
//     longer than you allow": waitMax.
//   - A GitHub secondary rate limit without Retry-After waits at least
//     headers.SecondaryLimitWait, as GitHub documents (see Classify).
//   - When the response says nothing (or there is none), the wait is
//     exponential, waitMin·2^attemptNum, capped at waitMax.
//
// Backoff never calls retryablehttp.DefaultBackoff, which reads Retry-After
// itself, uncapped.
func Backoff(waitMin, waitMax time.Duration, attemptNum int, resp *http.Response) time.Duration {
	waitMin = max(waitMin, 0)
	waitMax = max(waitMax, waitMin)
	if resp != nil {
		now := time.Now()
		if farHints(resp.Header, now).any() {
			return waitMax
		}
		var w wholeSecond
		d := max(w.delay(headers.Parse(resp.Header, now), now), Classify(resp).MinWait)
		if d > 0 {
			return min(max(d, waitMin), waitMax)
		}
	}
	if attemptNum < 0 || attemptNum >= 63 || waitMin > waitMax>>attemptNum {
		return waitMax
	}
	return waitMin << attemptNum
}

// CheckRetry is retryablehttp.DefaultRetryPolicy, except that:
//
//   - it does not retry a request this package refused
//     (*limiters.RejectedError, limiters.ErrClosed, limiters.ErrQueueFull,
//     limiters.ErrExceedsLimit): retrying those would only queue again
//     behind the same limit;
//   - it obeys x-should-retry, which OpenAI's and Anthropic's servers send
//     and their SDKs obey: "false" is never retried, "true" is retried even
//     for a status it would not retry;
//   - it does not retry a final refusal (Classify: a quota exhausted for
//     good, such as OpenAI's insufficient_quota, or a request too large):
//     no wait can cure those;
//   - it retries a rate limit whatever its status, such as GitHub's 403
//     secondary and primary limits;
//   - it does not retry a refusal that asks for a wait longer than
//     DefaultMaxPause — a Retry-After of hours, a quota at zero until
//     tomorrow, or a subscription's window spent for hours (Anthropic's
//     anthropic-ratelimit-unified-status: rejected, with its
//     anthropic-ratelimit-unified-reset): it reports the wait instead of
//     sleeping on it, as a *limiters.RejectedError (errors.Is
//     limiters.ErrRateLimited) whose RetryAfter is the wait, wrapped in
//     the error the client's Do returns.
//
// A cancelled context is never retried.
func CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err != nil && (errors.Is(err, limiters.ErrRateLimited) || errors.Is(err, limiters.ErrClosed) ||
		errors.Is(err, limiters.ErrQueueFull) || errors.Is(err, limiters.ErrExceedsLimit)) {
		return false, err
	}
	if ctx.Err() != nil || resp == nil {
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	if wait, ok := longWait(resp, time.Now()); ok {
		return false, &limiters.RejectedError{
			Limiter:    "server",
			RetryAfter: wait,
			Reason:     fmt.Sprintf("the server's quota is spent for longer than %v: a retry must wait", DefaultMaxPause),
		}
	}
	c := Classify(resp)
	switch {
	case c.ShouldRetry == headers.RetryNo || c.Signal.Final():
		return false, nil
	case c.ShouldRetry == headers.RetryYes || c.Signal == headers.RateLimited:
		return true, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// Classify says what a response means for the requests that follow it:
// rate limited (wait, then retry), overloaded (back off), a quota
// exhausted for good or a request too large (retrying cannot help), with
// the server's x-should-retry and the provider's code. See
// headers.Classify for every dialect it knows. It reads at most
// headers.PeekLimit bytes of the body, and only of a refusal whose content
// may carry such a signal (a 403, 413, 429, 503 or 529 in JSON or plain
// text); resp.Body still reads in full, from its first byte. The
// Transport reads the same signals to pause (or not) the partition.
func Classify(resp *http.Response) headers.Classification {
	return headers.Classify(resp.StatusCode, resp.Header, headers.PeekBody(resp))
}

// NewRetryableClient returns a go-retryablehttp client whose requests,
// first tries and retries alike, go through NewTransport(base, opts...), so
// retries wait in the same FIFO queue as everything else and a 429 pauses
// the whole partition, not just the request that got it. base is the
// caller's own RoundTripper (dialer, TLS, proxy, instrumentation); nil
// means go-retryablehttp's pooled default. Its Backoff is Backoff, its
// CheckRetry is CheckRetry and its RetryWaitMin is a tenth of a second
// (go-retryablehttp's is a second, which only adds to the wait the
// Transport holds a retried refusal for). It logs nothing unless opts
// include WithLogger, whose logger it then also gives to
// go-retryablehttp. The rest is go-retryablehttp's defaults, which the
// caller may change.
func NewRetryableClient(base http.RoundTripper, opts ...Option) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	if base == nil {
		base = c.HTTPClient.Transport
	}
	t := NewTransport(base, opts...)
	c.HTTPClient.Transport = t
	c.Logger = nil
	if t.logger != nil {
		c.Logger = t.logger
	}
	c.Backoff = Backoff
	c.CheckRetry = CheckRetry
	c.RetryWaitMin = retryWaitMin
	return c
}

// retryWaitMin is the least wait NewRetryableClient's retries take
// (go-retryablehttp's Client.RetryWaitMin; its own default is a second).
// The Transport holds a retry of a refusal for as long as the server
// asked, and paces it; the retry layer's floor only adds to that wait
// when the server says less than a second (koa-ratelimit's
// "Retry-After: 0", a fractional Retry-After, a bare 429 the Transport
// holds for its own step). It is a tenth of a second, so that a request
// failed by the network is not retried in a tight loop.
const retryWaitMin = 100 * time.Millisecond

// longWait reports the wait a refusal asks for when it is longer than
// DefaultMaxPause: too long for a retry layer to sleep on. It reads every
// format headers.Parse knows, and the subscription-style fields of
// Anthropic's unified limits (see unifiedReset).
func longWait(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp.StatusCode < 400 {
		return 0, false
	}
	var w wholeSecond
	d := w.delay(headers.Parse(resp.Header, now), now)
	if r, ok := unifiedReset(resp.Header, now); ok {
		d = max(d, r.Sub(now))
	}
	return d, d > DefaultMaxPause
}

// unifiedReset reads Anthropic's unified limits, sent to subscription
// clients (Claude plans) rather than API keys, and not in Anthropic's API
// reference; their form is what those servers send:
//
//	anthropic-ratelimit-unified-status: rejected        (allowed, allowed_warning, rejected)
//	anthropic-ratelimit-unified-reset: 1775455200       (epoch seconds)
//	anthropic-ratelimit-unified-5h-status: rejected     (per window: 5h, 7d, ...)
//	anthropic-ratelimit-unified-5h-reset: 1775455200
//
// It returns when a rejected limit resets: the overall reset when the
// overall status is rejected, else the latest reset of a rejected window.
// A reset in the past or more than 366 days ahead is ignored.
func unifiedReset(h http.Header, now time.Time) (time.Time, bool) {
	const prefix = "anthropic-ratelimit-unified-"
	var until time.Time
	rejected := func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "rejected") }
	reset := func(v string) time.Time {
		sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || sec <= now.Unix() || sec > now.Add(366*24*time.Hour).Unix() {
			return time.Time{}
		}
		return time.Unix(sec, 0)
	}
	if rejected(h.Get(prefix + "status")) {
		if r := reset(h.Get(prefix + "reset")); !r.IsZero() {
			return r, true
		}
	}
	for k, vs := range h {
		if len(k) <= len(prefix) || !strings.EqualFold(k[:len(prefix)], prefix) || len(vs) == 0 {
			continue
		}
		window, ok := strings.CutSuffix(strings.ToLower(k[len(prefix):]), "-status")
		if !ok || window == "" || !rejected(vs[0]) {
			continue
		}
		if r := reset(h.Get(prefix + window + "-reset")); r.After(until) {
			until = r
		}
	}
	return until, !until.IsZero()
}
