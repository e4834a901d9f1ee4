package apisim

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GitHubResource is the primary limit of one GitHub resource: Limit units
// per Window. A window starts with the first request after the previous one
// ended, as GitHub's do (the reset is an hour after the first request, not
// on the hour).
type GitHubResource struct {
	Limit  int64
	Window time.Duration
}

// GitHubConfig configures a [GitHub] simulator.
type GitHubConfig struct {
	// Resources maps a resource name to its limit. Default: core 5000/h,
	// search 30/min, graphql 5000 points/h (GitHub's documented figures for
	// an authenticated user). Only the resources named here exist; a request
	// whose resource is missing is answered 404.
	Resources map[string]GitHubResource
	// PrimaryStatus answers a request over the primary limit: 403 (the
	// default) or 429; GitHub documents both.
	PrimaryStatus int
	// GraphQLCost is the points a /graphql request costs, given its body.
	// GitHub computes it from the query; default 1.
	GraphQLCost func(body []byte) int64

	// SecondaryLimit, when positive, is a secondary limit: at most that many
	// requests (of all resources together) per SecondaryWindow (default 1m);
	// above it, SecondaryStatus (default 403) with GitHub's secondary-limit
	// message, and a Retry-After of SecondaryRetryAfter when positive (GitHub
	// sends it sometimes, often not). Requests it refuses spend nothing.
	SecondaryLimit      int64
	SecondaryWindow     time.Duration
	SecondaryStatus     int
	SecondaryRetryAfter time.Duration
}

// GitHub simulates GitHub's REST and GraphQL rate limits: one fixed window
// per resource, chosen by the path (/search/… → search, /graphql → graphql,
// anything else → core), reported in x-ratelimit-{limit,remaining,used,reset}
// (reset in epoch seconds, rounded down as GitHub's are) and
// x-ratelimit-resource; a primary-limit refusal is 403 (or 429) with
// remaining 0 (even when a costly GraphQL query was refused with a few
// points left); an optional secondary limit answers 403 with the documented
// message and no rate-limit field at zero. GitHub's other secondary limits
// (100 concurrent requests, CPU time) are not simulated.
//
// Stats.ByKey counts per resource ("core", "search", "graphql") and counts
// secondary-limit refusals under "secondary".
type GitHub struct {
	recorder
	cfg       GitHubConfig
	mu        sync.Mutex
	windows   map[string]*window
	secondary window
}

// window is a fixed window that starts with its first request.
type window struct {
	start time.Time
	used  int64
}

// at returns the units used in the window containing now, and its end,
// starting a new window when the last has ended.
func (w *window) at(now time.Time, length time.Duration) (used int64, end time.Time) {
	if w.start.IsZero() || !now.Before(w.start.Add(length)) {
		w.start, w.used = now, 0
	}
	return w.used, w.start.Add(length)
}

// NewGitHub returns a GitHub simulator with fresh windows.
func NewGitHub(cfg GitHubConfig) *GitHub {
	if cfg.Resources == nil {
		cfg.Resources = map[string]GitHubResource{
			"core":    {Limit: 5000, Window: time.Hour},
			"search":  {Limit: 30, Window: time.Minute},
			"graphql": {Limit: 5000, Window: time.Hour},
		}
	}
	cfg.PrimaryStatus = cmp0(cfg.PrimaryStatus, http.StatusForbidden)
	cfg.SecondaryStatus = cmp0(cfg.SecondaryStatus, http.StatusForbidden)
	cfg.SecondaryWindow = cmp0(cfg.SecondaryWindow, time.Minute)
	if cfg.GraphQLCost == nil {
		cfg.GraphQLCost = func([]byte) int64 { return 1 }
	}
	windows := make(map[string]*window, len(cfg.Resources))
	for name := range cfg.Resources {
		windows[name] = new(window)
	}
	return &GitHub{cfg: cfg, windows: windows}
}

// GitHubResourceOf names the resource a request path counts against:
// "search" for /search and below, "graphql" for /graphql, else "core".
func GitHubResourceOf(path string) string {
	switch {
	case path == "/search" || strings.HasPrefix(path, "/search/"):
		return "search"
	case path == "/graphql":
		return "graphql"
	}
	return "core"
}

// ServeHTTP answers like api.github.com.
func (g *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.enter()
	defer g.leave()
	resource := GitHubResourceOf(r.URL.Path)
	res, ok := g.cfg.Resources[resource]
	if !ok {
		writeJSON(w, http.StatusNotFound, gitHubError("Not Found", "https://docs.github.com/rest"))
		return
	}
	cost := int64(1)
	if resource == "graphql" {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, gitHubError("Problems parsing JSON", "https://docs.github.com/graphql"))
			return
		}
		cost = max(1, g.cfg.GraphQLCost(body))
	}

	now := time.Now()
	g.mu.Lock()
	secondary := false
	if g.cfg.SecondaryLimit > 0 {
		used, _ := g.secondary.at(now, g.cfg.SecondaryWindow)
		secondary = used >= g.cfg.SecondaryLimit
	}
	win := g.windows[resource]
	used, end := win.at(now, res.Window)
	admit := !secondary && used+cost <= res.Limit
	if admit {
		win.used += cost
		g.secondary.used++
		used += cost
	}
	g.mu.Unlock()

	h := w.Header()
	h.Set("x-ratelimit-limit", strconv.FormatInt(res.Limit, 10))
	h.Set("x-ratelimit-remaining", strconv.FormatInt(max(0, res.Limit-used), 10))
	h.Set("x-ratelimit-used", strconv.FormatInt(used, 10))
	h.Set("x-ratelimit-reset", strconv.FormatInt(end.Unix(), 10))
	h.Set("x-ratelimit-resource", resource)
	switch {
	case admit:
		g.admit(resource)
		writeJSON(w, http.StatusOK, map[string]any{"resource": resource, "cost": cost})
	case secondary:
		g.refuse("secondary", now)
		if g.cfg.SecondaryRetryAfter > 0 {
			h.Set("Retry-After", strconv.FormatInt(int64((g.cfg.SecondaryRetryAfter+time.Second-1)/time.Second), 10))
		}
		writeJSON(w, g.cfg.SecondaryStatus, gitHubError(
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",
			"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"))
	default:
		g.refuse(resource, now)
		h.Set("x-ratelimit-remaining", "0")
		writeJSON(w, g.cfg.PrimaryStatus, gitHubError(
			"API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",
			"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits"))
	}
}

func gitHubError(msg, doc string) map[string]any {
	return map[string]any{"message": msg, "documentation_url": doc}
}
