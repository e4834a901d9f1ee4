package throttle

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// Backoff is a retryablehttp.Backoff that waits as long as the server asked:
// it reads every format headers.Parse knows (Retry-After, X-RateLimit-*,
// the IETF RateLimit fields, OpenAI's, Anthropic's, …), not just Retry-After
// on 429 and 503, and caps the wait at max (the client's RetryWaitMax).
// When the response says nothing, it falls back to
// retryablehttp.DefaultBackoff's exponential backoff.
func Backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	if resp != nil {
		now := time.Now()
		info := headers.Parse(resp.Header, now)
		var g gate
		if d := g.delay(info, now); d > 0 {
			return clampDuration(d, min, max)
		}
	}
	return retryablehttp.DefaultBackoff(min, max, attemptNum, resp)
}

func clampDuration(d, lo, hi time.Duration) time.Duration {
	if d < lo {
		d = lo
	}
	if hi > 0 && d > hi {
		d = hi
	}
	return d
}

// CheckRetry is retryablehttp.DefaultRetryPolicy, except that it does not
// retry a request this package refused (*limiters.RejectedError,
// limiters.ErrClosed, limiters.ErrQueueFull, limiters.ErrExceedsLimit):
// retrying those would only queue again behind the same limit.
func CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err != nil && (errors.Is(err, limiters.ErrRateLimited) || errors.Is(err, limiters.ErrClosed) ||
		errors.Is(err, limiters.ErrQueueFull) || errors.Is(err, limiters.ErrExceedsLimit)) {
		return false, err
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// NewRetryableClient returns a go-retryablehttp client whose requests,
// first tries and retries alike, go through a Transport built with opts, so
// retries wait in the same FIFO queue as everything else and a 429 pauses
// the whole partition, not just the request that got it. Its Backoff is
// Backoff and its CheckRetry is CheckRetry; the rest is retryablehttp's
// defaults, which the caller may change (including Logger, which by default
// logs every request).
func NewRetryableClient(opts ...Option) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient.Transport = NewTransport(c.HTTPClient.Transport, opts...)
	c.Backoff = Backoff
	c.CheckRetry = CheckRetry
	return c
}
