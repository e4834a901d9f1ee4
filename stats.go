package throttle

import "time"

// Stats is a snapshot of what a Transport holds: its partitions (and the
// buckets their servers named), the requests waiting their turn, the
// requests on the wire, and the partitions paused now.
type Stats struct {
	Partitions int // partitions and server-named buckets the Transport tracks
	Queued     int // requests waiting for their turn in the gates
	InFlight   int // requests let through and not yet answered
	Paused     int // partitions or buckets paused at the moment of the call
}

// Stats reports the Transport's state across every partition. It takes each
// partition's lock in turn, never two partitions at once, so it is safe to
// call at any time (from a metrics scrape, say), though not free: it walks
// every partition. Requests waiting for a WithLimiter/WithRepository limiter
// are counted by that limiter's own Stats, not here.
func (t *Transport) Stats() Stats {
	t.mu.RLock()
	gates := make([]*gate, 0, len(t.parts.ring))
	for _, p := range t.parts.ring {
		gates = append(gates, p.g)
	}
	t.mu.RUnlock()
	var s Stats
	now := time.Now()
	count := func(g *gate) {
		if !g.scouting() {
			s.Partitions++
		}
		s.Queued += g.q.Len()
		s.InFlight += g.inflight
		if g.pz.until.After(now) {
			s.Paused++
		}
	}
	for _, g := range gates {
		g.mu.Lock()
		count(g)
		for b := range g.bucketGates {
			b.mu.Lock() // a partition's gate, then its buckets': as close does
			count(b)
			b.mu.Unlock()
		}
		g.mu.Unlock()
	}
	return s
}
