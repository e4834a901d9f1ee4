package throttle

import "net/http"

// GitHub's secondary rate limits count, among other things, requests in
// flight at once, and its documentation asks integrators to send
// requests for one user "serially, not concurrently". GitHub's own
// client, Octokit's throttling plugin, keeps at most ten requests in
// flight per client (its "global" group). A partition whose answers come
// from GitHub does the same: with twenty goroutines, a limit nobody
// advertises meets a burst of at most ten, and refuses at most ten.
// Ten in flight at 300 ms a request is 33 a second, above the 900
// points a minute GitHub documents for REST (15 a second): the bound
// costs only requests slower than two thirds of a second.

// githubMaxWire is how many requests a GitHub partition keeps on the
// wire at once.
const githubMaxWire = 10

// fromGitHub reports whether an answer whose fields named a bucket
// (answer.bucket) came from GitHub: GitHub names it in
// X-RateLimit-Resource, Discord in X-RateLimit-Bucket.
func fromGitHub(h http.Header) bool {
	_, ok := h["X-Ratelimit-Resource"]
	return ok
}

// capWire bounds the requests g, a partition's own gate, and its
// buckets keep on the wire at once to githubMaxWire. Buckets made later
// take the bound from g (bucket).
func (g *gate) capWire() {
	if gateFlag(g.flags.Or(uint32(capped)))&capped != 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for b := range g.bucketGates {
		b.mark(capped)
	}
}

// full reports whether g has as many requests on the wire as its bound
// allows: the next goes when an answer comes. g.mu must be held.
func (g *gate) full() bool {
	return g.is(capped) && g.onWire() >= githubMaxWire
}

// freed lets through what waits at g's buckets for a place on the wire
// that a request g let through has just left (onWire counts it in
// theirs too). g is a partition's own gate; g.mu is not held.
func (g *gate) freed() {
	if g.is(scoutGate) {
		g.parent.freed() // a scout's requests are its partition's (storeWire)
		return
	}
	if g.parent != nil || !g.is(capped) {
		return
	}
	var bs [8]*gate
	list := bs[:0]
	g.mu.Lock()
	for b := range g.bucketGates {
		list = append(list, b)
	}
	g.mu.Unlock()
	for _, b := range list {
		b.wake()
	}
}
