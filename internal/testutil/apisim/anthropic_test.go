package apisim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// message is a Messages request of maxTokens whose body is exactly
// 4·inputTokens bytes long (inputTokens ≥ 20).
func message(inputTokens, maxTokens int) string {
	head := fmt.Sprintf(`{"max_tokens":%d,"system":"`, maxTokens)
	pad := 4*inputTokens - len(head) - 2
	return head + strings.Repeat("x", pad) + `"}`
}

type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnthropic(t *testing.T, body string) anthropicErrorBody {
	t.Helper()
	var e anthropicErrorBody
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.Equal(t, "error", e.Type)
	return e
}

func sendMessage(t *testing.T, h http.Handler, input, maxTokens int) reply {
	t.Helper()
	return send(t, &Transport{Handler: h}, http.MethodPost, "/v1/messages", message(input, maxTokens))
}

func TestAnthropicHeadersAsDocumented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble starts at 2000-01-01T00:00:00Z.
		a := NewAnthropic(AnthropicConfig{RequestsPerWindow: 50, InputTokensPerWindow: 40000, OutputTokensPerWindow: 8000})
		time.Sleep(250 * time.Millisecond)
		r := sendMessage(t, a, 100, 800)
		require.Equal(t, http.StatusOK, r.status)
		want := map[string]string{
			"anthropic-ratelimit-requests-limit":          "50",
			"anthropic-ratelimit-requests-remaining":      "49",
			"anthropic-ratelimit-requests-reset":          "2000-01-01T00:00:02Z", // 1.2s after 0.25s, rounded up
			"anthropic-ratelimit-input-tokens-limit":      "40000",
			"anthropic-ratelimit-input-tokens-remaining":  "39900",
			"anthropic-ratelimit-input-tokens-reset":      "2000-01-01T00:00:01Z", // 0.15s after 0.25s
			"anthropic-ratelimit-output-tokens-limit":     "8000",
			"anthropic-ratelimit-output-tokens-remaining": "7200",
			"anthropic-ratelimit-output-tokens-reset":     "2000-01-01T00:00:07Z", // 6s after 0.25s
			// tokens-* is the most restrictive: output here.
			"anthropic-ratelimit-tokens-limit":     "8000",
			"anthropic-ratelimit-tokens-remaining": "7200",
			"anthropic-ratelimit-tokens-reset":     "2000-01-01T00:00:07Z",
		}
		assertHeaders(t, r.header, want)
	})
}

func TestAnthropicInputAndOutputLimitedSeparately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAnthropic(AnthropicConfig{RequestsPerWindow: 100, InputTokensPerWindow: 1000, OutputTokensPerWindow: 600})
		require.Equal(t, http.StatusOK, sendMessage(t, a, 900, 100).status)
		// Output has room (500 left), input does not (100 left).
		r := sendMessage(t, a, 200, 100)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Equal(t, "rate_limit_error", decodeAnthropic(t, r.body).Error.Type)
		assert.Contains(t, decodeAnthropic(t, r.body).Error.Message, "1000 input tokens per minute")
		assert.Equal(t, "6", r.header.Get("retry-after"), "the 100 missing input tokens refill in 6s")
		// Input has room, output does not.
		r = sendMessage(t, a, 50, 600)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Contains(t, decodeAnthropic(t, r.body).Error.Message, "600 output tokens per minute")
		assert.Equal(t, "true", r.header.Get("x-should-retry"))
		// Both fit: a small request goes.
		require.Equal(t, http.StatusOK, sendMessage(t, a, 50, 100).status)

		s := a.Snapshot()
		assert.Equal(t, Counts{Refused: 1}, s.ByKey["input-tokens"])
		assert.Equal(t, Counts{Refused: 1}, s.ByKey["output-tokens"])
		assert.Equal(t, Counts{Admitted: 2}, s.ByKey["requests"])
		assert.Len(t, s.Refusals, 2)
	})
}

func TestAnthropicRetryAfterAndRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAnthropic(AnthropicConfig{OutputTokensPerWindow: 8000})
		require.Equal(t, http.StatusOK, sendMessage(t, a, 20, 8000).status)
		r := sendMessage(t, a, 20, 800)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Equal(t, "6", r.header.Get("retry-after"))
		assert.Equal(t, "0", r.header.Get("anthropic-ratelimit-output-tokens-remaining"))
		assert.Equal(t, "2000-01-01T00:01:00Z", r.header.Get("anthropic-ratelimit-output-tokens-reset"))
		time.Sleep(6 * time.Second)
		assert.Equal(t, http.StatusOK, sendMessage(t, a, 20, 800).status, "refilled continuously: 800 tokens back after 6s")
	})
}

func TestAnthropicChargesOutputUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAnthropic(AnthropicConfig{OutputTokensPerWindow: 8000, OutputUsed: func(int64) int64 { return 100 }})
		r := sendMessage(t, a, 20, 8000)
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "7900", r.header.Get("anthropic-ratelimit-output-tokens-remaining"), "charged what was used")
		assert.Contains(t, r.body, `"output_tokens":100`)
		// The check is against max_tokens: 8000 does not fit in 7900.
		assert.Equal(t, http.StatusTooManyRequests, sendMessage(t, a, 20, 8000).status)
	})
}

func TestAnthropicOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAnthropic(AnthropicConfig{RequestsPerWindow: 1})
		a.SetOverloaded(true)
		r := sendMessage(t, a, 20, 10)
		require.Equal(t, 529, r.status)
		e := decodeAnthropic(t, r.body)
		assert.Equal(t, "overloaded_error", e.Error.Type)
		assert.Equal(t, "Overloaded", e.Error.Message)
		assert.Empty(t, r.header.Get("retry-after"))
		assert.Empty(t, r.header.Get("anthropic-ratelimit-requests-remaining"))
		a.SetOverloaded(false)
		require.Equal(t, http.StatusOK, sendMessage(t, a, 20, 10).status, "overload charged nothing")
		assert.Equal(t, Counts{Refused: 1}, a.Snapshot().ByKey["overloaded"])
	})
}

func TestAnthropicBadBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAnthropic(AnthropicConfig{})
		for _, body := range []string{"{}", `{"max_tokens":0}`, "nope"} {
			r := send(t, &Transport{Handler: a}, http.MethodPost, "/v1/messages", body)
			assert.Equal(t, http.StatusBadRequest, r.status, body)
			assert.Equal(t, "invalid_request_error", decodeAnthropic(t, r.body).Error.Type)
		}
	})
}

func TestAnthropicTime(t *testing.T) {
	base := time.Date(2025, 10, 25, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, "2025-10-25T12:00:00Z", AnthropicTime(base))
	assert.Equal(t, "2025-10-25T12:00:01Z", AnthropicTime(base.Add(time.Nanosecond)))
	assert.Equal(t, "2025-10-25T12:00:00Z", AnthropicTime(base.In(time.FixedZone("X", 3600))), "always UTC")
}

func FuzzAnthropicTokens(f *testing.F) {
	for _, s := range []string{message(20, 10), `{}`, `{"max_tokens":-1}`, `{"max_tokens":1e99}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, out, err := AnthropicTokens(body)
		if err == nil && (in < 0 || out <= 0) {
			t.Fatalf("AnthropicTokens(%q) = %d, %d", body, in, out)
		}
	})
}
