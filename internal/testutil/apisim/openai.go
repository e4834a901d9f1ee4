package apisim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxBody caps what a simulator reads of a request body.
const maxBody = 1 << 20

// OpenAIConfig configures an [OpenAI] simulator. Zero fields take the
// defaults named on each.
type OpenAIConfig struct {
	RequestsPerWindow int64         // the RPM limit; default 60
	TokensPerWindow   int64         // the TPM limit; default 150000
	Window            time.Duration // both limits refill fully over it; default 1m
	Model             string        // named in error messages; default "gpt-4o"
	// InsufficientQuota answers every request 429 insufficient_quota, as
	// OpenAI does when billing has run out: a refusal no wait can cure.
	InsufficientQuota bool
	// CountRefusals makes a refused request spend one unit of the requests
	// limit (if one is left), as OpenAI's guide warns: "unsuccessful requests
	// contribute to your per-minute limit".
	CountRefusals bool
	// OmitShouldRetry leaves out the x-should-retry header.
	OmitShouldRetry bool
}

// OpenAI simulates the rate limits of OpenAI's API (chat completions): a
// requests bucket and a tokens bucket, both refilling continuously, both
// reported on every response. See the package documentation for the
// sources and the token count of a request ([OpenAITokens]).
//
// Stats.ByKey counts admissions under "requests" (every admitted request)
// and refusals under the limit that refused: "requests", "tokens",
// "too_large" or "insufficient_quota".
type OpenAI struct {
	recorder
	cfg      OpenAIConfig
	mu       sync.Mutex
	requests *bucket
	tokens   *bucket
}

// NewOpenAI returns an OpenAI simulator with full buckets.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	cfg.RequestsPerWindow = cmp0(cfg.RequestsPerWindow, 60)
	cfg.TokensPerWindow = cmp0(cfg.TokensPerWindow, 150000)
	cfg.Window = cmp0(cfg.Window, time.Minute)
	cfg.Model = cmp0(cfg.Model, "gpt-4o")
	return &OpenAI{
		cfg:      cfg,
		requests: newBucket(cfg.RequestsPerWindow, cfg.Window),
		tokens:   newBucket(cfg.TokensPerWindow, cfg.Window),
	}
}

// cmp0 returns v, or def when v is the zero value.
func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// openAIRequest is the part of a chat or completions request body that
// counts against the tokens limit.
type openAIRequest struct {
	MaxTokens           int64 `json:"max_tokens"`
	MaxCompletionTokens int64 `json:"max_completion_tokens"`
}

// OpenAITokens is what a request body counts against an [OpenAI]
// simulator's tokens limit. OpenAI documents it as "the maximum of max_tokens
// and the estimated number of tokens based on the character count of your
// request": here max(max_tokens (or max_completion_tokens), ⌈len(body)/4⌉),
// four characters a token being OpenAI's own rule of thumb. A body that is not
// a JSON object, or has a negative limit, is an error.
func OpenAITokens(body []byte) (int64, error) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, fmt.Errorf("apisim: request body is not a JSON object: %w", err)
	}
	if req.MaxTokens < 0 || req.MaxCompletionTokens < 0 {
		return 0, fmt.Errorf("apisim: max_tokens must not be negative")
	}
	estimate := (int64(len(body)) + 3) / 4
	return max(req.MaxTokens, req.MaxCompletionTokens, estimate), nil
}

// ServeHTTP answers like OpenAI's API: 200 with a small chat completion, or
// 429 with OpenAI's error body, or 400 for a body it cannot read.
func (o *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.enter()
	defer o.leave()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tokens int64
	if err == nil {
		tokens, err = OpenAITokens(body)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, openAIError(err.Error(), "invalid_request_error", ""))
		return
	}

	now := time.Now()
	o.mu.Lock()
	o.requests.advance(now)
	o.tokens.advance(now)
	refusal, retry, used := o.decide(tokens)
	if refusal == "" {
		o.requests.take(1)
		o.tokens.take(tokens)
	} else if o.cfg.CountRefusals {
		o.requests.spend(1)
	}
	o.writeHeaders(w.Header())
	o.mu.Unlock()

	if refusal == "" {
		o.admit("requests")
		writeJSON(w, http.StatusOK, map[string]any{
			"object": "chat.completion",
			"model":  o.cfg.Model,
			"usage":  map[string]int64{"total_tokens": tokens},
		})
		return
	}
	o.refuse(refusal, now)
	o.writeRefusal(w, refusal, tokens, used, retry)
}

// decide names the limit that refuses a request of tokens ("" admits it),
// how long until it would fit and how much of that limit is used. It
// requires o.mu.
func (o *OpenAI) decide(tokens int64) (string, time.Duration, int64) {
	switch {
	case tokens > o.cfg.TokensPerWindow:
		return "too_large", 0, 0
	case o.cfg.InsufficientQuota:
		return "insufficient_quota", 0, 0
	case o.requests.remaining() < 1:
		return "requests", o.requests.wait(1), o.cfg.RequestsPerWindow - o.requests.remaining()
	case o.tokens.remaining() < tokens:
		return "tokens", o.tokens.wait(tokens), o.cfg.TokensPerWindow - o.tokens.remaining()
	}
	return "", 0, 0
}

// writeHeaders writes the six x-ratelimit-* fields. It requires o.mu.
func (o *OpenAI) writeHeaders(h http.Header) {
	h.Set("x-ratelimit-limit-requests", strconv.FormatInt(o.cfg.RequestsPerWindow, 10))
	h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(o.cfg.TokensPerWindow, 10))
	h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(o.requests.remaining(), 10))
	h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(o.tokens.remaining(), 10))
	h.Set("x-ratelimit-reset-requests", OpenAIDuration(o.requests.untilFull()))
	h.Set("x-ratelimit-reset-tokens", OpenAIDuration(o.tokens.untilFull()))
}

// OpenAIDuration formats d as OpenAI's reset headers do: Go's duration
// syntax ("6m0s", "1s", "20ms", "8.64s"), rounded up to the millisecond.
func OpenAIDuration(d time.Duration) string {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d.String()
}

func (o *OpenAI) writeRefusal(w http.ResponseWriter, refusal string, tokens, used int64, retry time.Duration) {
	h := w.Header()
	shouldRetry := "true"
	var body map[string]any
	switch refusal {
	case "too_large":
		shouldRetry = "false"
		body = openAIError(fmt.Sprintf("Request too large for %s in organization org-apisim on tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
			o.cfg.Model, o.cfg.TokensPerWindow, tokens), "tokens", "rate_limit_exceeded")
	case "insufficient_quota":
		shouldRetry = "false"
		body = openAIError("You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			"insufficient_quota", "insufficient_quota")
	default:
		limit, unit, requested := o.cfg.RequestsPerWindow, "requests per min (RPM)", int64(1)
		if refusal == "tokens" {
			limit, unit, requested = o.cfg.TokensPerWindow, "tokens per min (TPM)", tokens
		}
		body = openAIError(fmt.Sprintf("Rate limit reached for %s in organization org-apisim on %s: Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			o.cfg.Model, unit, limit, used, requested, OpenAIDuration(retry)), refusal, "rate_limit_exceeded")
		ms := (retry + time.Millisecond - 1) / time.Millisecond
		h.Set("retry-after-ms", strconv.FormatInt(int64(ms), 10))
		h.Set("retry-after", strconv.FormatInt(int64(math.Ceil(retry.Seconds())), 10))
	}
	if !o.cfg.OmitShouldRetry {
		h.Set("x-should-retry", shouldRetry)
	}
	writeJSON(w, http.StatusTooManyRequests, body)
}

func openAIError(msg, typ, code string) map[string]any {
	var c any
	if code != "" {
		c = code
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}
}

// writeJSON writes v as the JSON body of a response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
