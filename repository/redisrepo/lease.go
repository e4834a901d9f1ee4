package redisrepo

import "time"

// renew keeps this repository's concurrency leases alive: every third of
// the lease it renews the leases held on each key, in one pipeline, until
// Close. One goroutine per Repository, whatever the number of permits.
func (r *Repository) renew() {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		held := make(map[string][]string, len(r.held))
		for k, ms := range r.held {
			for _, m := range ms {
				if m != "" {
					held[k] = append(held[k], m)
				}
			}
		}
		r.mu.Unlock()
		calls := make([]*call, 0, len(held))
		for k, ms := range held {
			calls = append(calls, r.b.submit(r.script, nil, r.keys(k), r.args("renew", 0, -1, "", ms)))
		}
		for _, c := range calls {
			<-c.done // a failed renewal is retried at the next tick
		}
	}
}
