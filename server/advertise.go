package server

import (
	"context"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// What a rule's limits advertise, per algorithm (each limit is its own
// IETF policy item, named after the rule and the limit):
//
//	algorithm        q;w                          r                     t
//	token_bucket,    burst;burst/rate when that   permits free now      until one more permit
//	gcra             is whole seconds, else the                         is free
//	                 rate over the fewest whole
//	                 seconds (10/s burst 5: q=10;w=1)
//	leaky_bucket     the rate, as above (burst 1)  its free queue room     until its next slot
//	                                               (a request held until   (one more place); none
//	                                               its slot: shape.go)     when idle and empty
//	fixed_window     limit;window                  permits left            until the window ends
//	sliding_window   limit;window                  permits admitted now    until one more is
//	sliding_log      limit;window                  permits admitted now    until one more is
//	concurrency      max;qu="concurrent-requests"  permits free now        none (no wait brings one)
//
// Cost caps say qu="cost". A limit with all its permits free says no t.
// Every whole-second field rounds up, so that no client is told to come
// back early, and q;w state the rate the limit admits, so that a client
// that paces by them needs no finer t.

// limitAd is what one spec of a set advertises that does not change: its
// name and its q, w and qu.
type limitAd struct {
	name     string
	spec     limiters.Spec
	quota    int64
	window   time.Duration
	unit     string
	interval time.Duration // the leaky bucket's emission interval
}

// newLimitAds describes a set's specs; rule names the rule ("default" for
// a plan's default), cost says the set is its cost caps.
func newLimitAds(rule string, cost bool, specs []limiters.Spec) []limitAd {
	ads := make([]limitAd, len(specs))
	seen := map[string]int{}
	for i, sp := range specs {
		a := limitAd{spec: sp}
		label := ""
		switch sp.Algorithm {
		case limiters.AlgTokenBucket, limiters.AlgGCRA:
			a.quota, a.window = rateQuota(sp.Rate, sp.Limit)
			label = sp.Rate.String()
			if sp.Limit != sp.Rate.N {
				label += " burst " + strconv.Itoa(sp.Limit)
			}
		case limiters.AlgLeakyBucket:
			a.quota, a.window = rateQuota(sp.Rate, 1)
			a.interval = max(sp.Rate.Per/time.Duration(sp.Rate.N), 1)
			label = sp.Rate.String() + " shaped"
		case limiters.AlgConcurrency:
			a.quota, a.unit = int64(sp.Limit), "concurrent-requests"
			label = strconv.Itoa(sp.Limit) + " in flight"
		default:
			a.quota, a.window = int64(sp.Limit), sp.Window
			label = strconv.Itoa(sp.Limit) + "/" + shortDuration(sp.Window)
		}
		if cost {
			a.unit = "cost"
			label = "cost " + label
		}
		a.name = policyName(rule + " " + label)
		if k := seen[a.name]; k > 0 {
			seen[a.name] = k + 1
			a.name += "#" + strconv.Itoa(k+1)
		} else {
			seen[a.name] = 1
		}
		ads[i] = a
	}
	return ads
}

// rateQuota is q and w of a bucket of rate r and burst b: q=b, w=b/r when
// b/r is a whole number of seconds; otherwise the rate over the fewest
// whole seconds that hold a whole number of permits (at most an hour), or,
// failing that, the permits of a whole-second window rounded down, never
// less than one.
func rateQuota(r limiters.Rate, b int) (int64, time.Duration) {
	n, per, sec := big.NewInt(int64(r.N)), big.NewInt(int64(r.Per)), big.NewInt(int64(time.Second))
	// b·Per/N in ns.
	t, rem := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(int64(b)), per), n, new(big.Int))
	if rem.Sign() == 0 && t.IsInt64() && t.Int64() >= int64(time.Second) && t.Int64()%int64(time.Second) == 0 {
		return int64(b), time.Duration(t.Int64())
	}
	for k := int64(1); k <= 3600; k++ {
		// N·k·1s / Per
		q, rem := new(big.Int).QuoRem(new(big.Int).Mul(new(big.Int).Mul(n, big.NewInt(k)), sec), per, new(big.Int))
		if rem.Sign() == 0 && q.IsInt64() {
			return q.Int64(), time.Duration(k) * time.Second
		}
	}
	k := (int64(r.Per) + int64(time.Second) - 1) / int64(time.Second)
	q := new(big.Int).Quo(new(big.Int).Mul(new(big.Int).Mul(n, big.NewInt(k)), sec), per)
	if !q.IsInt64() {
		return 1 << 62, time.Duration(k) * time.Second
	}
	return max(q.Int64(), 1), time.Duration(k) * time.Second
}

// shortDuration writes d as "1m", "24h", "90s", "500ms".
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// policyName makes s a policy name that survives the header: bytes outside
// printable ASCII are percent-encoded.
func policyName(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// advertised is what a limit advertises in state m, for a request of n
// permits; refused says it refused the request. around is the permits
// waiting in a chain of limits around it, which its own state does not
// count.
func (a *limitAd) advertised(m limiters.Member, n int, refused bool, around int) headers.Limit {
	l := headers.Limit{Name: a.name, Quota: a.quota, Window: a.window, Unit: a.unit,
		Remaining: int64(max(m.Remaining, 0)), Reset: m.Next}
	wait := m.Wait
	switch a.spec.Algorithm {
	case limiters.AlgLeakyBucket:
		// A queue the server holds requests in (shape.go): r is its
		// free room, what is admitted now; t its next slot, which frees
		// one more place (none when it is idle and empty), and a
		// refusal's wait the same.
		l.Remaining = int64(max(m.Remaining-around, 0))
		if m.Next == 0 {
			l.Reset = a.interval
			if l.Remaining >= int64(m.Limit) {
				l.Reset = -1
			}
		}
		if m.Next > 0 {
			wait = m.Next
		}
	case limiters.AlgConcurrency:
		l.Reset = -1
	}
	if refused {
		l.Refused = true
		l.Final = n > m.Limit
		l.RetryAfter = max(wait, 0)
	}
	return l
}

// errNoMembers: the repository cannot report its limits one by one.
var errNoMembers = errors.New("server: no member states")

// memberReporter is a repository that can report the state of each limit
// it decides for a key (limiters.Members): the Policy's default storage,
// and any WithStorage repository with this method. Without it, a set's
// limits are advertised as one, from the repository's Decision.
type memberReporter interface {
	Members(ctx context.Context, key string, n int, into []limiters.Member) ([]limiters.Member, error)
}

// Members reports the state of each of the view's limits for key.
func (v view) Members(_ context.Context, key string, n int, into []limiters.Member) ([]limiters.Member, error) {
	l := v.mem.Get(v.prefix + key)
	if l == nil {
		return into, limiters.ErrClosed
	}
	return limiters.Members(l, n, into), nil
}

// appendLimits appends what stage s advertises for caller.
func (s *stage) appendLimits(ctx context.Context, caller string, refused bool, into []headers.Limit) []headers.Limit {
	set := s.set
	var buf [4]limiters.Member
	ms, lim, err := s.members(ctx, caller, buf[:0])
	{
		if err == nil && len(ms) == len(set.ads) {
			around := 0
			if lim != nil && len(ms) > 1 { // a chain: its waiters are its own
				around = lim.Stats().Queued * s.n
			}
			start := len(into)
			anyRefused := false
			for i := range ms {
				r := refused && ms[i].Wait != 0
				anyRefused = anyRefused || r
				into = append(into, set.ads[i].advertised(ms[i], s.n, r, around))
			}
			if refused && !anyRefused {
				// The state moved on between the decision and the
				// look: blame the limit with the least left.
				ls := into[start:]
				i := headers.Binding(ls)
				ls[i].Refused, ls[i].RetryAfter = true, s.d.RetryAfter
				ls[i].Final = s.n > set.ads[i].spec.Limit
			}
			return into
		}
	}
	// One limit, from the set's Decision.
	d := s.d
	l := headers.Limit{Name: set.aggregate, Quota: int64(max(d.Limit, 0)), Remaining: int64(max(d.Remaining, 0)), Reset: d.ResetAfter}
	if d.Remaining >= d.Limit {
		l.Reset = -1 // full: waiting brings no more
	}
	if len(set.ads) == 1 {
		a := &set.ads[0]
		l.Name, l.Quota, l.Window, l.Unit = a.name, a.quota, a.window, a.unit
		switch a.spec.Algorithm {
		case limiters.AlgLeakyBucket:
			// The decision's Remaining is the free queue room; the slot
			// this request took is the next one's wait.
			l.Remaining, l.Reset = 0, a.interval
		case limiters.AlgConcurrency:
			l.Reset = -1
		}
	}
	if refused {
		l.Refused, l.RetryAfter, l.Final = true, d.RetryAfter, s.n > d.Limit
		l.Reset = d.RetryAfter
	}
	return append(into, l)
}
