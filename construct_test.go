package throttle

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// panicText runs f and returns what it panicked with, or "".
func panicText(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestNilIsRefusedAtConstruction: what NewTransport and its options are
// given is either refused at once, naming the option, or has a documented
// meaning; nothing nil waits for the first request to crash it.
func TestNilIsRefusedAtConstruction(t *testing.T) {
	tests := []struct {
		name, want string
		f          func()
	}{
		{"nil option", "throttle: NewTransport: option 1 of 1 is nil", func() { NewTransport(nil, nil) }},
		{"nil second option", "throttle: NewTransport: option 2 of 2 is nil", func() { NewTransport(nil, WithMaxWait(1), nil) }},
		{"WithLimiter", "throttle: WithLimiter: nil limiter", func() { WithLimiter(nil) }},
		{"WithRepository", "throttle: WithRepository: nil repository", func() { WithRepository(nil) }},
		{"WithKey", "throttle: WithKey: nil extractor", func() { WithKey(nil) }},
		{"WithFeedbackStore", "throttle: WithFeedbackStore: nil store", func() { WithFeedbackStore(nil) }},
		{"NewRetryableClient", "throttle: NewTransport: option 1 of 1 is nil", func() { NewRetryableClient(nil, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, panicText(tt.f))
		})
	}
}

// TestNilWithAMeaning: the nils the options document as "none" or "the
// default" build a Transport that works.
func TestNilWithAMeaning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tr := NewTransport(nil, WithObserver(nil), WithLogger(nil), WithBucketRoute(nil),
		WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(100), 10)))
	defer tr.Close()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	tr2 := NewTransport(nil, WithRepository(repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewConcurrency(1)
	})))
	defer tr2.Close()
	resp, err = (&http.Client{Transport: tr2}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
}
