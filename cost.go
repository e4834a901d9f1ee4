package throttle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// costKey and priorityKey are the context keys of WithCost and WithPriority.
type (
	costKey     struct{}
	priorityKey struct{}
)

// cost is one WithCost declaration; next is the one made before it.
type cost struct {
	quota string
	units int64
	next  *cost
}

// WithCost returns a context whose requests, sent through a Transport,
// declare that they will spend units of the server's quota named quota:
// the name headers.Parse gives it ("tokens", "input-tokens",
// "output-tokens", GitHub's "graphql", an IETF policy's name, …). Call it
// again for other quotas; for one quota, the last call wins.
//
// A Transport lets a request go only when every quota the server reported
// for its partition has room for what the request will spend, counting
// what the requests on the wire have claimed. Undeclared, a request spends
// 1 of a quota that counts requests or whose name says nothing of its unit,
// and of any other quota what its partition's recent requests declared on
// average (the server's next answer corrects the estimate). A cost above a
// quota's limit fails at once, unsent, with an error matching
// limiters.ErrExceedsLimit that names the quota. A negative cost fails the
// request at once. A name the server's answer does not report charges
// nothing; the observer hears of it (EventUnknownQuota), and WithLogger
// logs it, once per partition and name.
func WithCost(ctx context.Context, quota string, units int64) context.Context {
	prev, _ := ctx.Value(costKey{}).(*cost)
	return context.WithValue(ctx, costKey{}, &cost{quota: quota, units: units, next: prev})
}

// costsOf returns the costs ctx declares, or nil.
func costsOf(ctx context.Context) *cost {
	c, _ := ctx.Value(costKey{}).(*cost)
	return c
}

// of returns the units declared for the quota named name (names match
// case-insensitively).
func (c *cost) of(name string) (int64, bool) {
	for ; c != nil; c = c.next {
		if strings.EqualFold(c.quota, name) {
			return c.units, true
		}
	}
	return 0, false
}

// check returns an error if a declared cost is negative.
func (c *cost) check() error {
	for ; c != nil; c = c.next {
		if c.units < 0 {
			return fmt.Errorf("throttle: WithCost(%q, %d): a cost cannot be negative", c.quota, c.units)
		}
	}
	return nil
}

// WithPriority returns a context whose requests wait at priority p: in a
// partition's queue, for the server's feedback and for the Transport's
// limiter alike, a waiting request with a higher p goes before every
// waiting request with a lower one; equal priorities keep arrival order.
// The default is 0; negative priorities wait behind it. It also sets
// limiters.WithPriority, so one call serves both.
//
// Low priority delays a request but never starves it: a waiting request
// yields its place to at most 64 later arrivals of higher priority, then
// keeps it against everyone.
func WithPriority(ctx context.Context, p int) context.Context {
	return context.WithValue(limiters.WithPriority(ctx, p), priorityKey{}, p)
}

// priorityOf returns the priority WithPriority put in ctx, or 0.
func priorityOf(ctx context.Context) int {
	p, _ := ctx.Value(priorityKey{}).(int)
	return p
}

// ExceedsQuotaError is the error of a request whose cost is above the
// limit of a quota the server reported: it can never fit, so it fails at
// once, unsent. It matches limiters.ErrExceedsLimit with errors.Is.
type ExceedsQuotaError struct {
	Partition string // the partition key
	Quota     string // the quota's name, as headers.Parse gives it
	Cost      int64  // what the request would spend of it
	Limit     int64  // the quota's limit
}

func (e *ExceedsQuotaError) Error() string {
	return fmt.Sprintf("throttle: a cost of %d exceeds the limit %d of quota %q (partition %q)", e.Cost, e.Limit, e.Quota, e.Partition)
}

// Unwrap returns limiters.ErrExceedsLimit.
func (e *ExceedsQuotaError) Unwrap() error { return limiters.ErrExceedsLimit }

// unknownQuotas remembers the (partition, quota name) pairs already
// reported as EventUnknownQuota, so that each is reported once; past
// maxUnknownQuotas pairs nothing more is reported (a caller who declares
// a new name per request must not grow it without bound).
type unknownQuotas struct {
	mu   sync.Mutex
	seen map[[2]string]struct{}
}

const maxUnknownQuotas = 1024

// first records the pair and reports whether it is new and may be reported.
func (u *unknownQuotas) first(key, name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := [2]string{key, strings.ToLower(name)}
	if _, ok := u.seen[p]; ok || len(u.seen) >= maxUnknownQuotas {
		return false
	}
	if u.seen == nil {
		u.seen = make(map[[2]string]struct{})
	}
	u.seen[p] = struct{}{}
	return true
}

// unmatched returns the first name c declares that none of qs is named
// (case-insensitively, as costs are matched), skipping local, the quota
// WithLimiterCost charges to the local limiter. A "*-tokens" name counts
// as matched by a "tokens" quota, which is charged their sum (quota.charge).
func unmatched(c *cost, qs []headers.Quota, local string) (string, bool) {
	for ; c != nil; c = c.next {
		if local != "" && strings.EqualFold(c.quota, local) {
			continue
		}
		found := false
		for i := range qs {
			n := qs[i].Name
			if strings.EqualFold(n, c.quota) ||
				strings.EqualFold(n, "tokens") && len(c.quota) > 7 && strings.EqualFold(c.quota[len(c.quota)-7:], "-tokens") {
				found = true
				break
			}
		}
		if !found {
			return c.quota, true
		}
	}
	return "", false
}

// checkNames tells the observer, once per partition and name, of a
// declared cost that names none of the quotas an answer reported.
func (t *Transport) checkNames(key string, c *cost, qs []headers.Quota) {
	name, ok := unmatched(c, qs, t.charge)
	if !ok || !t.unknown.first(key, name) {
		return
	}
	names := make([]string, 0, len(qs))
	for i := range qs {
		if !slices.Contains(names, qs[i].Name) { // "" too: an unnamed quota
			names = append(names, qs[i].Name)
		}
	}
	slices.Sort(names)
	t.emit(Event{Kind: EventUnknownQuota, Key: key, Quota: name,
		Err: fmt.Errorf("throttle: WithCost(%q) names no quota the server of partition %q reported (it reported %q)", name, key, names)})
}
