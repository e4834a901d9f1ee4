package apisim

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func discordPost(t *testing.T, h http.Handler, path string) reply {
	t.Helper()
	return send(t, &Transport{Handler: h}, http.MethodPost, path, "")
}

type discordRefusal struct {
	Message    string  `json:"message"`
	RetryAfter float64 `json:"retry_after"`
	Global     bool    `json:"global"`
}

func discordBody(t *testing.T, body string) discordRefusal {
	t.Helper()
	var r discordRefusal
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	return r
}

// TestDiscordHeadersAsDocumented: the fields of the documentation's
// examples, a refusal's JSON body and its Retry-After in whole seconds
// rounded up.
func TestDiscordHeadersAsDocumented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble starts at 946684800 (2000-01-01T00:00:00Z).
		d := NewDiscord(DiscordConfig{})
		time.Sleep(250 * time.Millisecond)
		r := discordPost(t, d, "/api/v10/channels/1/messages")
		require.Equal(t, http.StatusOK, r.status)
		assertHeaders(t, r.header, map[string]string{
			"X-RateLimit-Limit":       "5",
			"X-RateLimit-Remaining":   "4",
			"X-RateLimit-Reset":       "946684805.25",
			"X-RateLimit-Reset-After": "5",
			"X-RateLimit-Bucket":      "80c17d2f203122d936070c88c8d10f33",
			"X-RateLimit-Scope":       "",
			"Retry-After":             "",
		})
		for range 4 {
			time.Sleep(100 * time.Millisecond)
			require.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/channels/1/messages").status)
		}
		time.Sleep(1123 * time.Millisecond)
		r = discordPost(t, d, "/api/v10/channels/1/messages")
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assertHeaders(t, r.header, map[string]string{
			"X-RateLimit-Remaining":   "0",
			"X-RateLimit-Reset-After": "3.477",
			"X-RateLimit-Scope":       "user",
			"Retry-After":             "4",
		})
		body := discordBody(t, r.body)
		assert.InDelta(t, 3.477, body.RetryAfter, 1e-9)
		assert.False(t, body.Global)
	})
}

// TestDiscordTopLevelResourcesApart: one bucket hash, counted for each
// channel apart; the /api prefix with or without a version.
func TestDiscordTopLevelResourcesApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDiscord(DiscordConfig{})
		for range 5 {
			require.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/channels/1/messages").status)
		}
		assert.Equal(t, http.StatusTooManyRequests, discordPost(t, d, "/api/channels/1/messages").status)
		r := discordPost(t, d, "/api/v9/channels/2/messages")
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "4", r.header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "80c17d2f203122d936070c88c8d10f33", r.header.Get("X-RateLimit-Bucket"))
		assert.Equal(t, http.StatusNotFound, discordPost(t, d, "/api/v10/channels/1/typing").status)
		st := d.Snapshot()
		assert.Equal(t, Counts{Admitted: 5, Refused: 1}, st.ByKey["80c17d2f203122d936070c88c8d10f33 channels/1"])
		assert.Equal(t, Counts{Admitted: 1}, st.ByKey["80c17d2f203122d936070c88c8d10f33 channels/2"])
	})
}

// TestDiscordGlobalLimit: past the global limit, a 429 that names no
// bucket: Retry-After, X-RateLimit-Global and X-RateLimit-Scope: global.
func TestDiscordGlobalLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDiscord(DiscordConfig{Global: 3})
		time.Sleep(400 * time.Millisecond)
		for c := range 3 {
			require.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/channels/"+string(rune('1'+c))+"/messages").status)
		}
		r := discordPost(t, d, "/api/v10/channels/9/messages")
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assertHeaders(t, r.header, map[string]string{
			"Retry-After":        "1",
			"X-RateLimit-Global": "true",
			"X-RateLimit-Scope":  "global",
			"X-RateLimit-Bucket": "",
			"X-RateLimit-Limit":  "",
		})
		body := discordBody(t, r.body)
		assert.True(t, body.Global)
		assert.InDelta(t, 1.0, body.RetryAfter, 1e-9)
		assert.EqualValues(t, 1, d.Snapshot().ByKey["global"].Refused)

		// A request its route refuses counts globally too.
		d = NewDiscord(DiscordConfig{Global: 3, Routes: []DiscordRoute{
			{Method: http.MethodPost, Template: "/channels/{id}/messages", Bucket: "m", Limit: 1, Window: time.Minute},
		}})
		assert.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/channels/1/messages").status)
		assert.Equal(t, "user", discordPost(t, d, "/api/v10/channels/1/messages").header.Get("X-RateLimit-Scope"))
		assert.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/channels/2/messages").status)
		assert.Equal(t, "global", discordPost(t, d, "/api/v10/channels/3/messages").header.Get("X-RateLimit-Scope"))
	})
}

// TestDiscordInteractionsNotGlobal: interaction endpoints are not bound
// to the global limit.
func TestDiscordInteractionsNotGlobal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDiscord(DiscordConfig{Global: 1, Routes: []DiscordRoute{
			{Method: http.MethodPost, Template: "/channels/{id}/messages", Bucket: "m", Limit: 5, Window: time.Second},
			{Method: http.MethodPost, Template: "/interactions/{id}/{id}/callback", Bucket: "cb", Limit: 5, Window: time.Second},
		}})
		require.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/channels/1/messages").status)
		assert.Equal(t, "global", discordPost(t, d, "/api/v10/channels/1/messages").header.Get("X-RateLimit-Scope"))
		for i := range 3 {
			assert.Equal(t, http.StatusOK, discordPost(t, d, "/api/v10/interactions/"+string(rune('1'+i))+"/tok/callback").status)
		}
	})
}
