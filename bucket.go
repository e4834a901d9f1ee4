package throttle

import (
	"maps"
	"net/http"
	"strings"
	"time"
)

// A host often has several independent buckets, and says which one an
// answer speaks of: GitHub's x-ratelimit-resource (core, search, graphql),
// Discord's X-RateLimit-Bucket, the IETF draft's pk parameter. A partition
// then keeps one gate per bucket, below its own: an answer that names a
// bucket teaches that bucket's gate, and the request's route is remembered
// as that bucket's, so that later requests of the route wait only on their
// bucket's pauses and pace. A request whose route's bucket is not known
// yet goes as the last route learned of the same method and first path
// segment went (GET /repos/octocat/hello as GET /repos/torvalds/linux:
// GitHub's core): a crawler that meets a new owner with every request
// would otherwise send each into the pause of the bucket it spent. Its
// answer corrects the guess: the bucket it names, or none. A route of a
// family not learned yet goes through a scout's gate of its own family
// (scout): a first wave of its own, capped as a partition's first wave is
// (waveMax), held until its answers, which name the family's bucket or
// none, are all in; then the requests it held go through the gate they
// named.
// Requests of a host that names no bucket pass the partition's own gate.

// maxRoutes bounds the routes one partition remembers; later routes go
// through the partition's own gate.
const maxRoutes = 1024

// route is what a request's bucket is remembered by: by default its method
// and the first two segments of its path below an API prefix ("GET",
// "search", "issues"; "POST", "graphql", ""; "POST", "channels", "1234"
// for Discord's /api/v10/channels/1234/messages), or what a
// WithBucketRoute function returns.
type route struct{ method, first, second string }

// routeOf returns req's route under the default rule, without allocating.
// Below one of Discord's top-level resources (discordTop), the route goes
// one segment further: POST /channels/1234/messages and POST
// /channels/1234/typing are limited apart.
func routeOf(req *http.Request) route {
	p := apiPath(req.URL.Path)
	r := route{method: req.Method, first: p}
	if i := strings.IndexByte(p, '/'); i >= 0 {
		r.first, r.second = p[:i], p[i+1:]
		j := strings.IndexByte(r.second, '/')
		if j >= 0 && isDiscordTop(r.first) {
			if k := strings.IndexByte(r.second[j+1:], '/'); k >= 0 {
				j += 1 + k
			} else {
				j = -1
			}
		}
		if j >= 0 {
			r.second = r.second[:j]
		}
	}
	return r
}

// family is the routes of which one not learned yet goes as the last one
// learned went (routeTable.guess): r's method and first segment, and for a
// route below one of Discord's top-level resources, what follows its id
// (POST /channels/*/messages).
func (r route) family() route {
	f := route{method: r.method, first: r.first}
	if _, _, rest := r.discordTop(); rest != "" {
		f.second = rest
	}
	return f
}

// apiPath is p without its leading slash and the prefix that many APIs
// put before their resources: a first segment "api", then a version
// ("v" and digits) — /api/v10/channels (Discord), /api/v3/repos (GitHub
// Enterprise Server), /v1/messages — as long as something follows it.
// Without it, every route of such a host would be one ("api", "v10"),
// and the bucket last named would hold them all.
func apiPath(p string) string {
	p = strings.TrimPrefix(p, "/")
	if rest, ok := strings.CutPrefix(p, "api/"); ok && rest != "" {
		p = rest
	}
	if i := strings.IndexByte(p, '/'); i > 1 && p[0] == 'v' && i+1 < len(p) && digits(p[1:i]) {
		p = p[i+1:]
	}
	return p
}

// digits reports whether s is all ASCII digits.
func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// WithBucketRoute replaces the rule by which the Transport remembers which
// of a host's buckets a request belongs to. By default it is the request's
// method and the first two segments of its URL path ("GET /search/issues",
// "GET /repos/octocat", "POST /graphql"): once an answer to such a request
// names its bucket, later requests of the same route wait only on that
// bucket; a route not learned yet goes as the last route learned of the
// same method and first segment. f returns the route of a request
// (compared whole: a route from f has no segments); requests with equal
// routes share a bucket. A partition remembers at most 1024 routes. A nil f
// means the default rule.
func WithBucketRoute(f func(*http.Request) string) Option {
	return func(t *Transport) { t.route = f }
}

// bucketName returns the bucket an answer a names, or "": GitHub's
// x-ratelimit-resource or Discord's X-RateLimit-Bucket (a.bucket, read as
// the header was parsed), or the pk of the first IETF quota that has one.
// A success that reports no quota teaches a bucket nothing, so its bucket
// is not looked for.
func bucketName(a *answer) string {
	info := &a.info
	if len(info.Quotas) == 0 && !info.HasRetryAfter && a.status < 400 {
		return ""
	}
	if a.bucket != "" {
		return a.bucket
	}
	for i := range info.Quotas {
		if p := info.Quotas[i].Partition; p != "" {
			return p
		}
	}
	return ""
}

// routeTable is the routes a partition has learned, and each one's bucket
// gate: one route in the table itself (most hosts name one bucket, and a
// Transport may hold many hosts), more in a routeSet. It is replaced,
// never changed in place.
type routeTable struct {
	routeGate           // the only route, when more is nil
	more      *routeSet // every route, once there are two or more
}

// routeSet is the routes of a routeTable that has more than one: a list
// while there are few (comparing a few strings costs less than hashing a
// route, on every request), a map past smallRoutes. It is replaced, never
// changed in place.
type routeSet struct {
	list []routeGate // when m is nil
	m    map[route]*gate
	// families is the last route learned of each family (route.family)
	// and its bucket: the guess for a route of the family not learned
	// yet (routeTable.guess). At most maxFamilies.
	families []routeGate
}

// maxFamilies bounds routeSet.families.
const maxFamilies = 64

type routeGate struct {
	r route
	g *gate
}

// smallRoutes is the most routes a routeSet keeps in its list.
const smallRoutes = 8

func (t *routeTable) get(r route) *gate {
	if t.more != nil {
		return t.more.get(r)
	}
	if t.r == r {
		return t.g
	}
	return nil
}

func (t *routeTable) len() int {
	if t.more != nil {
		return t.more.len()
	}
	return 1
}

// guess returns the last route learned of r's family and its bucket
// (the package comment), or a zero routeGate.
func (t *routeTable) guess(r route) routeGate {
	fam := r.family()
	if t.more == nil {
		if t.r.family() == fam {
			return t.routeGate
		}
		return routeGate{}
	}
	for _, f := range t.more.families {
		if f.r.family() == fam {
			return f
		}
	}
	return routeGate{}
}

// with returns a copy of t (which may be nil) in which r is b's route.
func (t *routeTable) with(r route, b *gate) *routeTable {
	r = route{strings.Clone(r.method), strings.Clone(r.first), strings.Clone(r.second)}
	switch {
	case t == nil, t.more == nil && t.r == r:
		return &routeTable{routeGate: routeGate{r, b}}
	case t.more == nil:
		s := &routeSet{list: []routeGate{t.routeGate}}
		s.families = withFamily(nil, t.r, t.g)
		return &routeTable{more: s.with(r, b)}
	}
	return &routeTable{more: t.more.with(r, b)}
}

// withFamily returns a copy of families in which r (and b) is its
// family's, unless there are maxFamilies others.
func withFamily(families []routeGate, r route, b *gate) []routeGate {
	fam := r.family()
	i := 0
	for i < len(families) && families[i].r.family() != fam {
		i++
	}
	if i == len(families) && i == maxFamilies {
		return families
	}
	c := make([]routeGate, max(len(families), i+1))
	copy(c, families)
	c[i] = routeGate{r, b}
	return c
}

func (t *routeSet) get(r route) *gate {
	if t.m != nil {
		return t.m[r]
	}
	for i := range t.list {
		if t.list[i].r == r {
			return t.list[i].g
		}
	}
	return nil
}

func (t *routeSet) len() int {
	if t.m != nil {
		return len(t.m)
	}
	return len(t.list)
}

// with returns a copy of t in which r (cloned) is b's route.
func (t *routeSet) with(r route, b *gate) *routeSet {
	families := withFamily(t.families, r, b)
	if t.m != nil {
		m := maps.Clone(t.m)
		m[r] = b
		return &routeSet{m: m, families: families}
	}
	list := make([]routeGate, len(t.list), len(t.list)+1)
	copy(list, t.list)
	for i := range list {
		if list[i].r == r {
			list[i].g = b
			return &routeSet{list: list, families: families}
		}
	}
	if len(list) < smallRoutes {
		return &routeSet{list: append(list, routeGate{r, b}), families: families}
	}
	m := make(map[route]*gate, len(list)+1)
	for _, e := range list {
		m[e.r] = e.g
	}
	m[r] = b
	return &routeSet{m: m, families: families}
}

// routed returns the bucket gate a request of route r goes through, and
// whether r was learned (not guessed, routeTable.guess); nil if it goes
// through g, a partition's own gate. It takes no lock, but to learn the
// route of a new Discord top-level resource: the routes are replaced,
// never changed in place.
func (g *gate) routed(r route) (b *gate, learned bool) {
	t := g.routes.Load()
	if t == nil {
		return nil, false
	}
	if b = t.get(r); b == nil || b.scouting() {
		// Not learned, or only as its family's scout's: as its family
		// goes now.
		f := t.guess(r)
		if hash, ok := discordHash(f.g, f.r); ok && f.r != r {
			// A Discord bucket of the family: the same hash, counted
			// for r's top-level resource.
			b, learned = g.discordTwin(f.g, hash, r), true
		} else if f.g != nil || b == nil {
			b = f.g
		}
	} else {
		learned = true
	}
	if b == g {
		b = nil // a route learned to name no bucket
	}
	return b, learned
}

// scout returns the gate through which the requests of route r's family
// go until an answer names the family's bucket, or none: a gate of its
// own, named so that no server's bucket is (scoutName), which holds a
// first wave as a partition's gate does (waveFull) and learns nothing —
// its requests' answers are learned where they say (Transport.learn). nil
// when the partition keeps maxBuckets gates already: then they pass g, a
// partition's own gate, as they did before, and so do those of a family
// learned since the caller looked to have no bucket. r's family is
// remembered as the scout's (a scout's route is not learned: routed).
func (g *gate) scout(r route) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.routes.Load(); t != nil {
		known := t.get(r)
		if known == nil || known.scouting() {
			known = t.guess(r).g
		}
		if known != nil && !known.scouting() {
			// Learned since the caller looked (routes change under
			// g.mu): as it goes now.
			if known == g {
				return nil
			}
			return known
		}
	}
	f := r.family()
	name := scoutName + f.method + " " + f.first + " " + f.second
	b, n := g.findBucket(name)
	if b == nil && n >= maxBuckets {
		return nil
	}
	if b == nil {
		b = g.newBucket(name)
		b.mark(scoutGate)
	}
	g.learnRoute(r, b)
	return b
}

// scoutName begins the name of a scout's gate: no bucket a server names
// begins with a NUL (a header's value cannot hold one).
const scoutName = "\x00scout "

// gateFor returns the gate a request of route r goes through, g being a
// partition's own gate that has learned routes: its route's bucket, its
// family's (routed), or, for a family never learned, its scout's; nil for
// g itself. A family seen unknown here is looked at again under g.mu
// (scout): another request may have learned it, or made its scout, since.
func (g *gate) gateFor(r route) *gate {
	if t := g.routes.Load(); t.get(r) == nil && t.guess(r).g == nil {
		return g.scout(r)
	}
	b, _ := g.routed(r)
	return b
}

// scouting reports whether g is a scout's gate (scout).
func (g *gate) scouting() bool { return g.is(scoutGate) }

// bucket returns the gate of the bucket named name, creating it, and
// remembers r as its route. g is a partition's own gate.
// A partition keeps at most maxBuckets gates: past them, a Discord
// bucket is no longer counted for each top-level resource apart, and its
// new resources share the gate of its hash.
func (g *gate) bucket(name string, r route) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, n := g.findBucket(name)
	if b == nil && n >= maxBuckets {
		if hash, ok := discordHashOf(name, r); ok {
			name = hash
			b, _ = g.findBucket(name)
		}
	}
	if b == nil {
		b = g.newBucket(name)
	}
	g.learnRoute(r, b)
	return b
}

// newBucket makes the gate of a bucket named name. g.mu must be held.
func (g *gate) newBucket(name string) *gate {
	if g.buckets == nil {
		g.wire.Store(int64(g.inflight)) // storeWire's from now on
	}
	b := &gate{key: g.key + "#" + name, maxPause: g.maxPause, emit: g.emit,
		dispatcher: dispatcher{closed: g.closed}, family: family{parent: g, buckets: g.buckets}}
	if g.is(capped) {
		b.mark(capped)
	}
	g.buckets = b
	return b
}

// maxBuckets bounds the bucket gates a partition makes beyond those its
// server names: Discord's for each top-level resource apart (bucket), and
// scouts (scout).
const maxBuckets = 256

// findBucket returns the gate of the bucket named name, or nil, and how
// many bucket gates g has. g.mu must be held.
func (g *gate) findBucket(name string) (*gate, int) {
	n := 0
	for c := range g.bucketGates {
		if c.named() == name {
			return c, n
		}
		n++
	}
	return nil, n
}

// remember learns b, a bucket's gate or g itself (no bucket), as route
// r's. g is a partition's own gate.
func (g *gate) remember(r route, b *gate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.learnRoute(r, b)
}

// learnRoute is remember with g.mu held.
func (g *gate) learnRoute(r route, b *gate) {
	old := g.routes.Load()
	if old == nil || old.get(r) != b && old.len() < maxRoutes {
		g.routes.Store(old.with(r, b))
	}
}

// bucketGates yields the gates of the buckets of g, a partition's own
// gate, newest first. g.mu must be held.
func (g *gate) bucketGates(yield func(*gate) bool) {
	if g.parent != nil {
		return // a bucket's gate: its buckets field links its siblings
	}
	for b := g.buckets; b != nil; b = b.buckets {
		if !yield(b) {
			return
		}
	}
}

// named is the name of the bucket whose gate g is, or "" for a
// partition's own gate: its key after its partition's and "#".
func (g *gate) named() string {
	if g.parent == nil {
		return ""
	}
	return g.key[len(g.parent.key)+1:]
}

// observe learns from an answer to a request another gate let through
// (the partition's own gate, before the request's bucket was known; pause
// -1), or from one that came late (a stream's error event, after pause
// pauses had begun). Such an answer may be older than what the gate
// learned since: within a window, it can only lower the count. One
// another gate let through cannot tell when it was sent, so it is taken
// as sent before the last pause began: a wave of refusals sent before the
// bucket was known pauses it once, rather than each refusal slowing its
// pace again (a pace doubled eight times by one wave, seen with GitHub's
// secondary limits and 50 goroutines).
func (g *gate) observe(a *answer, pause int64, now time.Time) {
	g.mu.Lock()
	paused := g.learn(&ticket{ver: -1, pause: pause}, a, now)
	resumed := g.dispatch(now)
	g.mu.Unlock()
	if !paused.IsZero() && g.emit != nil {
		g.emit(Event{Kind: EventPaused, Key: g.key, Until: paused, Status: a.status})
	}
	g.report(resumed)
}
