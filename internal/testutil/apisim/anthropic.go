package apisim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// AnthropicConfig configures an [Anthropic] simulator. Zero fields take the
// defaults named on each.
type AnthropicConfig struct {
	RequestsPerWindow     int64         // RPM; default 50
	InputTokensPerWindow  int64         // ITPM; default 40000
	OutputTokensPerWindow int64         // OTPM; default 8000
	Window                time.Duration // all limits refill fully over it; default 1m
	// OutputUsed is how many output tokens a completion really produces for
	// a request's max_tokens. Anthropic estimates output tokens from
	// max_tokens when a request starts and corrects the charge when it ends;
	// the simulator checks max_tokens and charges OutputUsed (clamped to
	// [0, max_tokens]). Default: all of max_tokens.
	OutputUsed func(maxTokens int64) int64
}

// Anthropic simulates the rate limits of Anthropic's Messages API: requests,
// input tokens and output tokens each in its own continuously refilling
// bucket, reported in anthropic-ratelimit-* fields with RFC 3339 resets; a
// 429 rate_limit_error with retry-after; and, while overloaded (see
// [Anthropic.SetOverloaded]), 529 overloaded_error. The token count of a
// request is described at [AnthropicTokens].
//
// Stats.ByKey counts admissions under "requests" and refusals under the
// limit that refused: "requests", "input-tokens", "output-tokens" or
// "overloaded".
type Anthropic struct {
	recorder
	cfg        AnthropicConfig
	overloaded atomic.Bool
	mu         sync.Mutex
	requests   *bucket
	input      *bucket
	output     *bucket
}

// NewAnthropic returns an Anthropic simulator with full buckets.
func NewAnthropic(cfg AnthropicConfig) *Anthropic {
	cfg.RequestsPerWindow = cmp0(cfg.RequestsPerWindow, 50)
	cfg.InputTokensPerWindow = cmp0(cfg.InputTokensPerWindow, 40000)
	cfg.OutputTokensPerWindow = cmp0(cfg.OutputTokensPerWindow, 8000)
	cfg.Window = cmp0(cfg.Window, time.Minute)
	if cfg.OutputUsed == nil {
		cfg.OutputUsed = func(n int64) int64 { return n }
	}
	return &Anthropic{
		cfg:      cfg,
		requests: newBucket(cfg.RequestsPerWindow, cfg.Window),
		input:    newBucket(cfg.InputTokensPerWindow, cfg.Window),
		output:   newBucket(cfg.OutputTokensPerWindow, cfg.Window),
	}
}

// SetOverloaded switches the overload mode: while on, every request is
// answered 529 overloaded_error, with no rate-limit fields and no
// retry-after, and nothing is charged.
func (a *Anthropic) SetOverloaded(on bool) { a.overloaded.Store(on) }

// AnthropicTokens is what a Messages request body counts: its input tokens,
// estimated as ⌈len(body)/4⌉ (the simulator has no tokenizer), and its
// max_tokens, which Anthropic requires: a body without a positive max_tokens
// is an error.
func AnthropicTokens(body []byte) (input, maxTokens int64, err error) {
	var req struct {
		MaxTokens *int64 `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, 0, fmt.Errorf("apisim: request body is not a JSON object: %w", err)
	}
	if req.MaxTokens == nil || *req.MaxTokens <= 0 {
		return 0, 0, fmt.Errorf("apisim: max_tokens: a positive integer is required")
	}
	return (int64(len(body)) + 3) / 4, *req.MaxTokens, nil
}

// ServeHTTP answers like Anthropic's API.
func (a *Anthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.enter()
	defer a.leave()
	now := time.Now()
	if a.overloaded.Load() {
		a.refuse("overloaded", now)
		w.Header().Set("x-should-retry", "true")
		writeJSON(w, 529, anthropicError("overloaded_error", "Overloaded"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var input, maxTokens int64
	if err == nil {
		input, maxTokens, err = AnthropicTokens(body)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, anthropicError("invalid_request_error", err.Error()))
		return
	}

	output := min(maxTokens, max(0, a.cfg.OutputUsed(maxTokens)))
	a.mu.Lock()
	for _, b := range []*bucket{a.requests, a.input, a.output} {
		b.advance(now)
	}
	var refusal string
	var retry time.Duration
	switch {
	case a.requests.remaining() < 1:
		refusal, retry = "requests", a.requests.wait(1)
	case a.input.remaining() < input:
		refusal, retry = "input-tokens", a.input.wait(input)
	case a.output.remaining() < maxTokens:
		refusal, retry = "output-tokens", a.output.wait(maxTokens)
	default:
		a.requests.take(1)
		a.input.take(input)
		a.output.take(output)
	}
	a.writeHeaders(w.Header(), now)
	a.mu.Unlock()

	if refusal == "" {
		a.admit("requests")
		writeJSON(w, http.StatusOK, map[string]any{
			"type":  "message",
			"role":  "assistant",
			"usage": map[string]int64{"input_tokens": input, "output_tokens": output},
		})
		return
	}
	a.refuse(refusal, now)
	w.Header().Set("retry-after", strconv.FormatInt(int64(math.Ceil(retry.Seconds())), 10))
	w.Header().Set("x-should-retry", "true")
	msg := fmt.Sprintf("This request would exceed the rate limit for your organization (org-apisim) of %s per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage.", a.describe(refusal))
	writeJSON(w, http.StatusTooManyRequests, anthropicError("rate_limit_error", msg))
}

// describe names a limit as Anthropic's messages do: "50 requests".
func (a *Anthropic) describe(refusal string) string {
	switch refusal {
	case "input-tokens":
		return fmt.Sprintf("%d input tokens", a.cfg.InputTokensPerWindow)
	case "output-tokens":
		return fmt.Sprintf("%d output tokens", a.cfg.OutputTokensPerWindow)
	}
	return fmt.Sprintf("%d requests", a.cfg.RequestsPerWindow)
}

// writeHeaders writes the anthropic-ratelimit-* fields. The tokens-* trio is
// the most restrictive of input and output tokens (fewest remaining), as
// Anthropic documents. It requires a.mu.
func (a *Anthropic) writeHeaders(h http.Header, now time.Time) {
	set := func(name string, b *bucket) {
		h.Set("anthropic-ratelimit-"+name+"-limit", strconv.FormatInt(b.capacity, 10))
		h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.FormatInt(b.remaining(), 10))
		h.Set("anthropic-ratelimit-"+name+"-reset", AnthropicTime(now.Add(b.untilFull())))
	}
	set("requests", a.requests)
	set("input-tokens", a.input)
	set("output-tokens", a.output)
	tightest := a.input
	if a.output.remaining() < a.input.remaining() {
		tightest = a.output
	}
	set("tokens", tightest)
}

// AnthropicTime formats a reset as Anthropic does: RFC 3339 in UTC, whole
// seconds, rounded up so that a client waiting until then finds the limit
// replenished.
func AnthropicTime(t time.Time) string {
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

func anthropicError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}
