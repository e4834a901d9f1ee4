package throttle

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle/headers"
)

// Discord (discord.com/developers/docs/topics/rate-limits) names its
// buckets in X-RateLimit-Bucket, a hash "non-inclusive of top-level
// resources in the path": a bucket's limit is counted for each channel,
// guild and webhook apart, so a partition keeps a gate for each bucket
// and top-level resource ("hash channels/1234"). Beside them, a global
// limit (50 requests a second) spans every bucket: once an answer names
// a Discord bucket, every request of the partition passes the
// partition's own gate as well as its bucket's (spans), and the
// partition's gate learns the global limit from Discord's global
// refusals (X-RateLimit-Global: true, X-RateLimit-Scope: global), which
// name no bucket, as it learns a server that says nothing but refuses: a
// pause for their Retry-After and a pace searched from the answers.

// discordTop returns the top-level resource of route r that a Discord
// bucket is counted for ("channels", "1234"), and what follows it in r
// ("messages"), or "", "", "": Discord's X-RateLimit-Bucket is a hash
// "non-inclusive of top-level resources in the path", and a bucket's
// limit is counted for each channel, guild and webhook apart
// (discord.com/developers/docs/topics/rate-limits). Under the default
// route rule, they are r's first segments; under another, r is whole.
func (r route) discordTop() (kind, id, rest string) {
	if !isDiscordTop(r.first) || r.second == "" {
		return "", "", ""
	}
	id, rest, _ = strings.Cut(r.second, "/")
	return r.first, id, rest
}

// isDiscordTop reports whether a path's first segment is one of Discord's
// top-level resources.
func isDiscordTop(first string) bool {
	return first == "channels" || first == "guilds" || first == "webhooks"
}

// discordTwin returns the gate of Discord bucket hash counted for route
// r's top-level resource, a twin of fam's (the same hash, another
// channel's), creating it. A twin made now sends no more before its first
// answer than the limit fam's answers told (five messages a channel):
// twenty goroutines posting to a new channel sent ten at once, and five
// were refused.
func (g *gate) discordTwin(fam *gate, hash string, r route) *gate {
	fam.mu.Lock()
	limit := fam.leastLimit()
	fam.mu.Unlock()
	kind, id, _ := r.discordTop()
	b := g.bucket(discordName(hash, kind, id), r)
	b.mu.Lock()
	if limit > 0 && limit < waveMax && b.rf.answered == 0 && b.wave == 0 && b.waveCap == 0 {
		b.waveCap = uint8(limit)
	}
	b.mu.Unlock()
	return b
}

// unspanned reports whether route r is one a host's limit over all its
// buckets does not count (spans): Discord's interaction endpoints
// (POST /interactions/{id}/{token}/callback), "not bound to the bot's
// Global Rate Limit" — an interaction's answer is due within three
// seconds, and a bot busy elsewhere must not pace it.
func (r route) unspanned() bool { return r.first == "interactions" }

// discordName is the name of the bucket of hash bucket counted for the
// top-level resource kind/id (discordTop): "hash channels/1234".
func discordName(bucket, kind, id string) string {
	if kind == "" {
		return bucket
	}
	return bucket + " " + kind + "/" + id
}

// discordHash returns the Discord bucket hash whose bucket, counted for
// route r's top-level resource, is b (discordName), if b is one.
func discordHash(b *gate, r route) (string, bool) {
	if b == nil {
		return "", false
	}
	return discordHashOf(b.named(), r)
}

// discordHashOf returns the hash of the bucket named name, counted for
// route r's top-level resource (discordName), if name is such a name.
func discordHashOf(name string, r route) (string, bool) {
	kind, id, _ := r.discordTop()
	n := len(name) - len(kind) - len(id) - 2
	if kind == "" || n <= 0 || !isDiscordName(name, name[:n], kind, id) {
		return "", false
	}
	return name[:n], true
}

// isDiscordName reports whether name is discordName(bucket, kind, id),
// without building it.
func isDiscordName(name, bucket, kind, id string) bool {
	if kind == "" {
		return name == bucket
	}
	n := len(bucket)
	return len(name) == n+len(kind)+len(id)+2 && name[:n] == bucket && name[n] == ' ' &&
		name[n+1:n+1+len(kind)] == kind && name[n+1+len(kind)] == '/' && name[n+2+len(kind):] == id
}

// span marks g, a partition's gate, as one its buckets' requests pass too
// (spans). Its first wave is over: its answers named the buckets they
// were learned in.
func (g *gate) span() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mark(spans | heard)
	now := time.Now()
	// A cycle begins: the rate a refusal measures (aimd.refused,
	// finePace) is the rate since, not the first wave's.
	g.rf = cycle{resumed: now, answered: max(g.rf.answered, 1)}
	g.traits().pace.assume(discordGlobalStep, now)
}

// discordGlobalStep paces a partition's requests at Discord's global
// limit, "All bots can make up to 50 requests per second", before any
// refusal: learned from its refusals, the twenty requests on the wire
// when the first came back were refused, and the pace found from there
// ran at forty a second.
const discordGlobalStep = time.Second / 50

// learnSpan learns resp, the answer to a request that passed its
// bucket's gate g (ticket tk) and its partition's gate own as well (gtk,
// spans). A refusal by the limit over all buckets (globalRefusal) is
// own's to learn, and g learns nothing from it: learnSpan settles both
// and reports true. Any other answer is g's (the caller learns it), and
// own counts it as a success that says nothing: the limit over all
// buckets let it through.
func (t *Transport) learnSpan(own, g *gate, tk, gtk *ticket, resp *http.Response) bool {
	now := time.Now()
	switch {
	case resp == nil:
		own.done(gtk, nil, now)
	case globalRefusal(resp.StatusCode, resp.Header):
		var a answer
		body := headers.PeekBody(resp)
		a.read(resp, body, now)
		defer a.free()
		if d, ok := discordRetryAfter(body); ok && a.info.HasRetryAfter && d <= a.info.RetryAfter && d > a.info.RetryAfter-time.Second {
			// Retry-After is the body's rounded up to the second.
			a.info.RetryAfter = d
		}
		own.done(gtk, &a, now)
		g.done(tk, nil, now)
		return true
	default:
		own.done(gtk, &answer{status: http.StatusOK}, now)
	}
	return false
}

// globalRefusal reports whether an answer is a refusal by Discord's
// global limit: a 429 with X-RateLimit-Global: true or X-RateLimit-Scope:
// global.
func globalRefusal(status int, h http.Header) bool {
	return status == http.StatusTooManyRequests &&
		(strings.EqualFold(h.Get("X-Ratelimit-Global"), "true") || strings.EqualFold(h.Get("X-Ratelimit-Scope"), "global"))
}

// discordRetryAfter reads the retry_after of a Discord refusal's JSON
// body ({"message": ..., "retry_after": 0.412, "global": true}): the wait
// to the millisecond, where its Retry-After field rounds it up to the
// second. It reports false for a body that has none, or not a wait.
func discordRetryAfter(body []byte) (time.Duration, bool) {
	var v struct {
		RetryAfter *float64 `json:"retry_after"`
	}
	if len(body) == 0 || json.Unmarshal(body, &v) != nil || v.RetryAfter == nil {
		return 0, false
	}
	s := *v.RetryAfter
	if math.IsNaN(s) || s < 0 || s > maxRetryAfterSeconds {
		return 0, false
	}
	return time.Duration(s * float64(time.Second)), true
}

// maxRetryAfterSeconds bounds a retry_after read: a day.
const maxRetryAfterSeconds = 24 * 60 * 60
