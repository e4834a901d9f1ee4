package apisim

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DiscordRoute is one of a [Discord] simulator's per-route limits: Limit
// requests per Window, under the bucket hash Bucket. Routes with the same
// Bucket share it, each top-level resource of theirs separately.
type DiscordRoute struct {
	Method string // "GET", "POST", ...
	// Template is the route's path below /api/v{n}, with {id} where an
	// identifier goes: "/channels/{id}/messages", "/guilds/{id}/members".
	Template string
	Bucket   string
	Limit    int64
	Window   time.Duration
}

// DiscordConfig configures a [Discord] simulator.
type DiscordConfig struct {
	// Routes are the routes that exist; a request to any other is
	// answered 404. Default: POST /channels/{id}/messages, 5 per 5 s
	// (bucket "80c17d2f203122d936070c88c8d10f33"), and GET
	// /guilds/{id}/members, 10 per 10 s (bucket
	// "b2b5e1d4e1f0e4c0a2e8b5f4f7c6d3a1").
	Routes []DiscordRoute
	// Global is the most requests per second of all routes together:
	// Discord's global limit, 50 by default.
	Global int64
}

// Discord simulates Discord's HTTP API rate limits as its documentation
// describes them (discord.com/developers/docs/topics/rate-limits): per-route
// limits, each under a bucket hash named in X-RateLimit-Bucket that routes
// may share, counted separately for each top-level resource in the path
// (channels/{channel_id}, guilds/{guild_id}, webhooks/{webhook_id}) — which
// the hash does not include — beside a global limit of 50 requests a
// second. Every answer of a route carries X-RateLimit-Limit, -Remaining,
// -Reset (epoch seconds, with milliseconds), -Reset-After (seconds, with
// milliseconds) and -Bucket; a refusal is a 429 with a JSON body
// ({"message", "retry_after" in fractional seconds, "global"}), Retry-After
// in whole seconds rounded up, the route's fields and X-RateLimit-Scope:
// user. A refusal by the global limit carries only Retry-After,
// X-RateLimit-Global: true and X-RateLimit-Scope: global; interaction
// endpoints (a Template under /interactions/) are not bound to it. Each
// route's window starts with its first request. Paths are /api/v{n}/...
// or /api/...
//
// Stats.ByKey counts per bucket and top-level resource ("<hash>
// channels/1"), and the global limit's refusals under "global".
type Discord struct {
	recorder
	cfg     DiscordConfig
	mu      sync.Mutex
	windows map[string]*window // by bucket and top-level resource
	global  window
}

// NewDiscord returns a Discord simulator with fresh windows.
func NewDiscord(cfg DiscordConfig) *Discord {
	if cfg.Routes == nil {
		cfg.Routes = []DiscordRoute{
			{Method: http.MethodPost, Template: "/channels/{id}/messages", Bucket: "80c17d2f203122d936070c88c8d10f33", Limit: 5, Window: 5 * time.Second},
			{Method: http.MethodGet, Template: "/guilds/{id}/members", Bucket: "b2b5e1d4e1f0e4c0a2e8b5f4f7c6d3a1", Limit: 10, Window: 10 * time.Second},
		}
	}
	cfg.Global = cmp0(cfg.Global, 50)
	return &Discord{cfg: cfg, windows: make(map[string]*window)}
}

// DiscordRouteOf returns the route of cfg that a request of method to
// path (/api/v10/channels/1/messages) matches, and the top-level resource
// its limit is counted for ("channels/1"; "" when the path has none).
func DiscordRouteOf(routes []DiscordRoute, method, path string) (*DiscordRoute, string) {
	p := strings.TrimPrefix(path, "/api")
	if rest, ok := strings.CutPrefix(p, "/v"); ok {
		if i := strings.IndexByte(rest, '/'); i > 0 {
			if _, err := strconv.Atoi(rest[:i]); err == nil {
				p = rest[i:]
			}
		}
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i := range routes {
		rt := &routes[i]
		tmpl := strings.Split(strings.Trim(rt.Template, "/"), "/")
		if rt.Method != method || len(tmpl) != len(segs) {
			continue
		}
		match := true
		for j := range tmpl {
			if tmpl[j] != "{id}" && tmpl[j] != segs[j] {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		top := ""
		switch segs[0] {
		case "channels", "guilds", "webhooks":
			if len(segs) > 1 {
				top = segs[0] + "/" + segs[1]
			}
		}
		return rt, top
	}
	return nil, ""
}

// ServeHTTP answers like discord.com/api.
func (d *Discord) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.enter()
	defer d.leave()
	rt, top := DiscordRouteOf(d.cfg.Routes, r.Method, r.URL.Path)
	if rt == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
		return
	}
	key := rt.Bucket + " " + top
	now := time.Now()
	// "Interaction endpoints are not bound to the bot's Global Rate
	// Limit."
	global := !strings.HasPrefix(rt.Template, "/interactions/")
	d.mu.Lock()
	gused, gend := d.global.at(now, time.Second)
	if global && gused >= d.cfg.Global {
		d.mu.Unlock()
		d.refuse("global", now)
		wait := gend.Sub(now)
		h := w.Header()
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		h.Set("X-RateLimit-Global", "true")
		h.Set("X-RateLimit-Scope", "global")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{
			"message": "You are being rate limited.", "retry_after": discordSeconds(wait), "global": true})
		return
	}
	win := d.windows[key]
	if win == nil {
		win = new(window)
		d.windows[key] = win
	}
	used, end := win.at(now, rt.Window)
	admit := used < rt.Limit
	if admit {
		win.used++
		used++
	}
	if global {
		d.global.used++ // a request refused by its route counts globally too
	}
	d.mu.Unlock()

	wait := end.Sub(now)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(rt.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(rt.Limit-used, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', -1, 64))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(discordSeconds(wait), 'f', -1, 64))
	h.Set("X-RateLimit-Bucket", rt.Bucket)
	if admit {
		d.admit(key)
		writeJSON(w, http.StatusOK, map[string]any{"id": "1"})
		return
	}
	d.refuse(key, now)
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	h.Set("X-RateLimit-Scope", "user")
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"message": "You are being rate limited.", "retry_after": discordSeconds(wait), "global": false})
}

// discordSeconds is d in seconds, to the millisecond, as Discord writes
// them (64.57).
func discordSeconds(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}
