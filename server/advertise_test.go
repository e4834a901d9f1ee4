package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// TestLastPermitAdvertisesTheNextPermit: the response that takes the last
// permit of a token bucket advertises, as its reset, when the next permit
// comes (60 s at 1/min), not when the bucket is full again (300 s), so a
// client that waits for the reset loses no throughput.
func TestLastPermitAdvertisesTheNextPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := repository.NewMemory(func(string) limiters.Limiter {
			return limiters.NewTokenBucket(limiters.PerMinute(1), 5)
		})
		defer repo.Close()
		rl := server.New(repo, server.WithKey(keyextract.Global()), server.WithHeaders(headers.Both))
		h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		var last *httptest.ResponseRecorder
		for range 5 {
			last = httptest.NewRecorder()
			h.ServeHTTP(last, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Equal(t, http.StatusOK, last.Code)
		}
		assert.Equal(t, "0", last.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, "60", last.Header().Get("X-RateLimit-Reset"))
		assert.Equal(t, `"default";r=0;t=60`, last.Header().Get("RateLimit"))

		denied := httptest.NewRecorder()
		h.ServeHTTP(denied, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, http.StatusTooManyRequests, denied.Code)
		assert.Equal(t, "60", denied.Header().Get("Retry-After"))
	})
}
