package redisrepo

// SetClock makes r's scripts read time (µs since the epoch) from f instead
// of Redis's TIME: the differential tests drive it in step with a synctest
// bubble. The scripts then give every TTL an hour of slack, since Redis
// expires keys by its real clock, which the driven clock does not follow.
// Production code has no way to set it.
func (r *Repository) SetClock(f func() int64) { r.clock = f }

// Share is this process's current share of key in lease mode (-1: none).
func (r *Repository) Share(key string) int64 {
	r.q.mu.RLock()
	l := r.q.lease[key]
	r.q.mu.RUnlock()
	if l == nil {
		return -1
	}
	<-l.ready
	return l.grant.Load().share
}
