package server

import (
	"context"
	"strconv"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// A repository's limiter may be a limiters.Chain: a burst limit under a
// per-second window, say. Its Decision mixes its members (the smallest
// Remaining, the largest reset), which a client reads as one limit that
// does neither: the token bucket's refilling count under the window's
// reset looks like a bucket that refills, and the client sends into a
// window that is spent. So a chain is advertised limit by limit, as a
// Policy's limits are: one IETF item per member, and the legacy fields
// from the one that binds (headers.WriteLimits).

// keyMembers is a repository that reports the state of each limit of a
// key's limiter without a context (repository.Memory).
type keyMembers interface {
	Members(key string, n int, into []limiters.Member) ([]limiters.Member, error)
}

// What a RateLimiter knows of its repository's limiters (its chains
// field): not looked at yet, chains (advertised member by member), or
// single.
const (
	chainsUnknown int32 = iota
	chainsYes
	chainsNo
)

// maxMembers is the most members of a chain advertised on their own;
// a longer chain is advertised as one.
const maxMembers = 4

// members reads the state of each member of key's limiter, for a request
// of n permits, when the repository can report it and the limiter is a
// chain; ok is false otherwise. The first request decides, for the
// RateLimiter's life, whether its repository's limiters are chains at
// all: a factory makes one kind for every key, and a single limiter's
// own Decision says all there is.
func (rl *RateLimiter) members(ctx context.Context, key string, n int, into []limiters.Member) (ms []limiters.Member, ok bool) {
	if rl.chains.Load() == chainsNo {
		return into, false
	}
	var err error
	switch r := rl.repo.(type) {
	case keyMembers:
		ms, err = r.Members(key, n, into)
	case memberReporter:
		ms, err = r.Members(ctx, key, n, into)
	default:
		rl.chains.Store(chainsNo)
		return into, false
	}
	if err != nil {
		return into, false
	}
	if len(ms) < 2 || len(ms) > maxMembers {
		rl.chains.CompareAndSwap(chainsUnknown, chainsNo)
		return into, false
	}
	rl.chains.CompareAndSwap(chainsUnknown, chainsYes)
	return ms, true
}

// memberLimits is how ms, the members of a chain that decided a request
// of n permits, are advertised: each under its algorithm's name (with
// its place in the chain when two share one), refused when it alone
// would not grant the request now.
func memberLimits(ms []limiters.Member, n int, refused bool, into []headers.Limit) []headers.Limit {
	for i, m := range ms {
		name := m.Algorithm
		for j, o := range ms {
			if j != i && o.Algorithm == m.Algorithm {
				name += "-" + strconv.Itoa(i+1)
				break
			}
		}
		l := headers.Limit{Name: name, Quota: int64(max(m.Limit, 0)), Remaining: int64(max(m.Remaining, 0)), Reset: m.Next}
		if refused && m.Wait != 0 {
			l.Refused = true
			l.Final = m.Wait < 0 && n > m.Limit
			l.RetryAfter = max(m.Wait, 0)
		}
		into = append(into, l)
	}
	return into
}
