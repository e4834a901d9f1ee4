package throttle

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnknownQuotaIsReported: a cost declared for a quota the server does
// not report ("token" for OpenAI's "tokens") charges nothing; the observer
// hears of it once per partition and name, and WithLogger logs it.
func TestUnknownQuotaIsReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("x-ratelimit-limit-requests", "100")
		h.Set("x-ratelimit-remaining-requests", "99")
		h.Set("x-ratelimit-reset-requests", "1s")
		h.Set("x-ratelimit-limit-tokens", "10000")
		h.Set("x-ratelimit-remaining-tokens", "9000")
		h.Set("x-ratelimit-reset-tokens", "6s")
	}))
	defer srv.Close()
	var mu sync.Mutex
	var got []Event
	var logs bytes.Buffer
	tr := NewTransport(nil, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithObserver(func(e Event) {
		if e.Kind == EventUnknownQuota {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}
	}))
	defer tr.Close()
	client := &http.Client{Transport: tr}
	send := func(quota string) {
		t.Helper()
		ctx := WithCost(context.Background(), quota, 10)
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	send("tokens")       // right: nothing to say
	send("Tokens")       // names match case-insensitively
	send("input-tokens") // charged to "tokens" as a part of it
	assert.Empty(t, got)
	send("token")
	send("token") // once per partition and name
	require.Len(t, got, 1)
	e := got[0]
	assert.Equal(t, "token", e.Quota)
	assert.Equal(t, srv.Listener.Addr().String(), e.Key)
	assert.Equal(t, "unknown_quota", e.Kind.String())
	assert.ErrorContains(t, e.Err, `WithCost("token") names no quota`)
	assert.ErrorContains(t, e.Err, `"requests" "tokens"`)
	assert.Contains(t, logs.String(), "WithCost names a quota the server did not report")
	assert.Contains(t, logs.String(), "quota=token")
}

// TestUnknownQuotaSkipsTheLocalQuota: the quota WithLimiterCost charges to
// the local limiter is the caller's own, not the server's.
func TestUnknownQuotaSkipsTheLocalQuota(t *testing.T) {
	c := &cost{quota: "budget", units: 1}
	_, ok := unmatched(c, nil, "budget")
	assert.False(t, ok)
	name, ok := unmatched(&cost{quota: "points", units: 1, next: c}, nil, "budget")
	assert.True(t, ok)
	assert.Equal(t, "points", name)
}

// TestUnknownQuotasAreBounded: a caller declaring a new name per request
// does not grow the record without bound.
func TestUnknownQuotasAreBounded(t *testing.T) {
	var u unknownQuotas
	for i := range maxUnknownQuotas + 10 {
		u.first("p", string(rune('a'+i%26))+string(rune(i)))
	}
	assert.Len(t, u.seen, maxUnknownQuotas)
	assert.False(t, u.first("p", "new"))
}
