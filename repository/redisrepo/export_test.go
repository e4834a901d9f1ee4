package redisrepo

// SetClock makes r's scripts read time (µs since the epoch) from f instead
// of Redis's TIME: the differential tests drive it in step with a synctest
// bubble. The scripts then give every TTL an hour of slack, since Redis
// expires keys by its real clock, which the driven clock does not follow.
// Production code has no way to set it.
func (r *Repository) SetClock(f func() int64) { r.clock = f }
