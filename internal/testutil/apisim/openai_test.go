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

// chat is a chat request whose token count is exactly maxTokens for any
// maxTokens ≥ 16 (its body is at most 4·16 characters long).
func chat(maxTokens int) string {
	return fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":%d}`, maxTokens)
}

func post(t *testing.T, h http.Handler, body string) reply {
	t.Helper()
	return send(t, &Transport{Handler: h}, http.MethodPost, "/v1/chat/completions", body)
}

type openAIErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeOpenAI(t *testing.T, body string) openAIErrorBody {
	t.Helper()
	var e openAIErrorBody
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e
}

func TestOpenAIHeadersAsDocumented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOpenAI(OpenAIConfig{RequestsPerWindow: 60, TokensPerWindow: 150000})
		r := post(t, o, chat(16))
		require.Equal(t, http.StatusOK, r.status)
		assertHeaders(t, r.header, map[string]string{
			"x-ratelimit-limit-requests":     "60",
			"x-ratelimit-limit-tokens":       "150000",
			"x-ratelimit-remaining-requests": "59",
			"x-ratelimit-remaining-tokens":   "149984",
			// One request of 60 a minute is back after 1s; 16 tokens of
			// 150000 a minute after 6.4ms, written rounded up.
			"x-ratelimit-reset-requests": "1s",
			"x-ratelimit-reset-tokens":   "7ms",
		})

		r = post(t, o, chat(149984)) // empties the tokens bucket
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "0", r.header.Get("x-ratelimit-remaining-tokens"))
		assert.Equal(t, "1m0s", r.header.Get("x-ratelimit-reset-tokens"))
		assert.Equal(t, "2s", r.header.Get("x-ratelimit-reset-requests"))
	})
}

func TestOpenAIDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{6 * time.Minute, "6m0s"},
		{time.Second, "1s"},
		{20 * time.Millisecond, "20ms"},
		{8640 * time.Millisecond, "8.64s"},
		{time.Second + time.Nanosecond, "1.001s"},
		{0, "0s"},
	} {
		assert.Equal(t, c.want, OpenAIDuration(c.d), c.d)
	}
}

func TestOpenAITokensRefillContinuously(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 60000 tokens a minute: 1000 a second, a token a millisecond.
		o := NewOpenAI(OpenAIConfig{RequestsPerWindow: 1000, TokensPerWindow: 60000})
		require.Equal(t, http.StatusOK, post(t, o, chat(60000)).status)

		r := post(t, o, chat(1000))
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Equal(t, "1000", r.header.Get("retry-after-ms"))
		assert.Equal(t, "1", r.header.Get("retry-after"))
		assert.Equal(t, "true", r.header.Get("x-should-retry"))

		// Half a second later half of it is back: a 500-token request fits
		// and a 1000-token one does not (a window would admit neither).
		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, http.StatusTooManyRequests, post(t, o, chat(1000)).status)
		r = post(t, o, chat(500))
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "0", r.header.Get("x-ratelimit-remaining-tokens"))

		time.Sleep(30 * time.Second)
		r = post(t, o, chat(100))
		assert.Equal(t, "29900", r.header.Get("x-ratelimit-remaining-tokens"))
		assert.Equal(t, "30.1s", r.header.Get("x-ratelimit-reset-tokens"))

		s := o.Snapshot()
		assert.Equal(t, int64(3), s.Admitted)
		assert.Equal(t, int64(2), s.Refused)
		assert.Equal(t, Counts{Refused: 2}, s.ByKey["tokens"])
	})
}

func TestOpenAIRefusalBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOpenAI(OpenAIConfig{RequestsPerWindow: 2, TokensPerWindow: 60000})
		post(t, o, chat(59500))
		r := post(t, o, chat(1000))
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		e := decodeOpenAI(t, r.body)
		assert.Equal(t, "tokens", e.Error.Type)
		require.NotNil(t, e.Error.Code)
		assert.Equal(t, "rate_limit_exceeded", *e.Error.Code)
		assert.Nil(t, e.Error.Param)
		assert.Equal(t, "Rate limit reached for gpt-4o in organization org-apisim on tokens per min (TPM): Limit 60000, Used 59500, Requested 1000. Please try again in 500ms. Visit https://platform.openai.com/account/rate-limits to learn more.", e.Error.Message)
		assert.Equal(t, "500", r.header.Get("retry-after-ms"))
		assert.Equal(t, "1", r.header.Get("retry-after"), "retry-after is whole seconds, rounded up")

		require.Equal(t, http.StatusOK, post(t, o, chat(16)).status)
		r = post(t, o, chat(16))
		require.Equal(t, http.StatusTooManyRequests, r.status)
		e = decodeOpenAI(t, r.body)
		assert.Equal(t, "requests", e.Error.Type)
		assert.Contains(t, e.Error.Message, "on requests per min (RPM): Limit 2, Used 2, Requested 1. Please try again in 30s.")
		assert.Equal(t, "30000", r.header.Get("retry-after-ms"))
		assert.Equal(t, "30", r.header.Get("retry-after"))
	})
}

func TestOpenAIRequestTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOpenAI(OpenAIConfig{TokensPerWindow: 30000})
		r := post(t, o, chat(45411))
		require.Equal(t, http.StatusTooManyRequests, r.status)
		e := decodeOpenAI(t, r.body)
		assert.Equal(t, "Request too large for gpt-4o in organization org-apisim on tokens per min (TPM): Limit 30000, Requested 45411. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", e.Error.Message)
		assert.Equal(t, "rate_limit_exceeded", *e.Error.Code)
		assert.Equal(t, "false", r.header.Get("x-should-retry"))
		assert.Empty(t, r.header.Get("retry-after-ms"), "no wait makes it fit")
		assert.Equal(t, "30000", r.header.Get("x-ratelimit-remaining-tokens"), "it spends nothing")
		assert.Equal(t, Counts{Refused: 1}, o.Snapshot().ByKey["too_large"])
	})
}

func TestOpenAIInsufficientQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOpenAI(OpenAIConfig{InsufficientQuota: true, OmitShouldRetry: true})
		r := post(t, o, chat(16))
		require.Equal(t, http.StatusTooManyRequests, r.status)
		e := decodeOpenAI(t, r.body)
		assert.Equal(t, "insufficient_quota", e.Error.Type)
		assert.Equal(t, "insufficient_quota", *e.Error.Code)
		assert.True(t, strings.HasPrefix(e.Error.Message, "You exceeded your current quota"))
		assert.Empty(t, r.header.Values("x-should-retry"), "OmitShouldRetry")
		assert.Empty(t, r.header.Get("retry-after"))
	})
}

func TestOpenAICountRefusals(t *testing.T) {
	for _, count := range []bool{false, true} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := NewOpenAI(OpenAIConfig{RequestsPerWindow: 3, TokensPerWindow: 1000, CountRefusals: count})
				post(t, o, chat(1000))
				r := post(t, o, chat(1000)) // refused for tokens
				require.Equal(t, http.StatusTooManyRequests, r.status)
				want := map[bool]string{false: "2", true: "1"}[count]
				assert.Equal(t, want, r.header.Get("x-ratelimit-remaining-requests"))
			})
		})
	}
}

func TestOpenAIBadBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOpenAI(OpenAIConfig{})
		for _, body := range []string{"", "not json", `{"max_tokens":-1}`, `{"max_tokens":"ten"}`, `[1]`} {
			r := post(t, o, body)
			assert.Equal(t, http.StatusBadRequest, r.status, body)
			assert.Equal(t, "invalid_request_error", decodeOpenAI(t, r.body).Error.Type, body)
		}
		s := o.Snapshot()
		assert.Zero(t, s.Admitted+s.Refused, "a bad request is neither admitted nor refused")
	})
}

func TestOpenAITokens(t *testing.T) {
	n, err := OpenAITokens([]byte(`{"max_tokens":100}`))
	require.NoError(t, err)
	assert.Equal(t, int64(100), n)
	n, err = OpenAITokens([]byte(`{"max_completion_tokens":300,"max_tokens":100}`))
	require.NoError(t, err)
	assert.Equal(t, int64(300), n)
	long := `{"messages":[{"content":"` + strings.Repeat("x", 400) + `"}],"max_tokens":10}`
	n, err = OpenAITokens([]byte(long))
	require.NoError(t, err)
	assert.Equal(t, int64((len(long)+3)/4), n, "the character estimate wins over a small max_tokens")
}

func FuzzOpenAITokens(f *testing.F) {
	for _, s := range []string{chat(10), `{}`, `{"max_tokens":-5}`, `{"max_tokens":1e30}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := OpenAITokens(body)
		if err == nil && n < 0 {
			t.Fatalf("negative token count %d for %q", n, body)
		}
	})
}
