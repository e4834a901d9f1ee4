package apisim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, h http.Handler, path string) reply {
	t.Helper()
	return send(t, &Transport{Handler: h}, http.MethodGet, path, "")
}

func gitHubMessage(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Message string `json:"message"`
		Doc     string `json:"documentation_url"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.NotEmpty(t, e.Doc)
	return e.Message
}

func TestGitHubHeadersAsDocumented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGitHub(GitHubConfig{})
		time.Sleep(10*time.Second + 600*time.Millisecond)
		r := get(t, g, "/repos/o/r")
		require.Equal(t, http.StatusOK, r.status)
		assertHeaders(t, r.header, map[string]string{
			"x-ratelimit-limit":     "5000",
			"x-ratelimit-remaining": "4999",
			"x-ratelimit-used":      "1",
			"x-ratelimit-resource":  "core",
			// The window runs an hour from the first request (the bubble
			// starts at 946684800, 2000-01-01T00:00:00Z), so it ends at
			// 946688410.6; the reset is in epoch seconds, rounded down.
			"x-ratelimit-reset": "946688410",
		})

		r = get(t, g, "/search/code")
		assert.Equal(t, "30", r.header.Get("x-ratelimit-limit"))
		assert.Equal(t, "search", r.header.Get("x-ratelimit-resource"))
	})
}

func TestGitHubSearchIndependentOfCore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGitHub(GitHubConfig{Resources: map[string]GitHubResource{
			"core":   {Limit: 50, Window: time.Second},
			"search": {Limit: 2, Window: time.Second},
		}})
		get(t, g, "/search/issues")
		get(t, g, "/search/issues")
		r := get(t, g, "/search/issues")
		require.Equal(t, http.StatusForbidden, r.status, "the primary limit is a 403")
		assert.Equal(t, "0", r.header.Get("x-ratelimit-remaining"))
		assert.True(t, strings.HasPrefix(gitHubMessage(t, r.body), "API rate limit exceeded"))
		for range 10 {
			require.Equal(t, http.StatusOK, get(t, g, "/users/u").status, "core is not search")
		}
		time.Sleep(time.Second)
		assert.Equal(t, http.StatusOK, get(t, g, "/search/issues").status, "a new window")

		s := g.Snapshot()
		assert.Equal(t, Counts{Admitted: 3, Refused: 1}, s.ByKey["search"])
		assert.Equal(t, Counts{Admitted: 10}, s.ByKey["core"])
	})
}

func TestGitHubGraphQLCostsPoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGitHub(GitHubConfig{
			Resources:     map[string]GitHubResource{"graphql": {Limit: 10, Window: time.Minute}},
			PrimaryStatus: http.StatusTooManyRequests,
			GraphQLCost:   func(body []byte) int64 { return int64(strings.Count(string(body), "node")) },
		})
		query := `{"query":"{ node node node }"}`
		for i, used := range []string{"3", "6", "9"} {
			r := send(t, &Transport{Handler: g}, http.MethodPost, "/graphql", query)
			require.Equal(t, http.StatusOK, r.status, i)
			assert.Equal(t, used, r.header.Get("x-ratelimit-used"))
			assert.Equal(t, "graphql", r.header.Get("x-ratelimit-resource"))
		}
		r := send(t, &Transport{Handler: g}, http.MethodPost, "/graphql", query)
		assert.Equal(t, http.StatusTooManyRequests, r.status, "PrimaryStatus 429")
		assert.Equal(t, "0", r.header.Get("x-ratelimit-remaining"))
		assert.Equal(t, http.StatusNotFound, get(t, g, "/repos/o/r").status, "no core resource configured")
	})
}

func TestGitHubSecondaryLimit(t *testing.T) {
	for _, retryAfter := range []time.Duration{0, 60 * time.Second} {
		t.Run(retryAfter.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGitHub(GitHubConfig{SecondaryLimit: 2, SecondaryRetryAfter: retryAfter})
				get(t, g, "/repos/o/r")
				get(t, g, "/search/code")
				r := get(t, g, "/repos/o/r")
				require.Equal(t, http.StatusForbidden, r.status)
				assert.True(t, strings.HasPrefix(gitHubMessage(t, r.body), "You have exceeded a secondary rate limit"))
				assert.Equal(t, "4999", r.header.Get("x-ratelimit-remaining"), "the primary limit is not at zero")
				if retryAfter == 0 {
					assert.Empty(t, r.header.Values("Retry-After"))
				} else {
					assert.Equal(t, "60", r.header.Get("Retry-After"))
				}
				time.Sleep(time.Minute)
				assert.Equal(t, http.StatusOK, get(t, g, "/repos/o/r").status)
				assert.Equal(t, Counts{Refused: 1}, g.Snapshot().ByKey["secondary"])
			})
		})
	}
}

func TestGitHubResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/search": "search", "/search/code": "search", "/searchlight": "core",
		"/graphql": "graphql", "/graphql/x": "core", "/": "core", "": "core",
	} {
		assert.Equal(t, want, GitHubResourceOf(path), path)
	}
}
