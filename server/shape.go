package server

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// A leaky bucket is a queue that drains one request every emission
// interval (limiters.LeakyBucket: grants spaced 1/r apart, at most
// capacity permits waiting), and the server serves it as one, as nginx's
// limit_req serves its burst: a request that arrives while the bucket's
// slot is taken, and finds room in its queue, is held until its slot and
// then admitted; only a request that finds the queue full is refused.
//
// Refusing every request that arrives before its slot instead (a
// TryAcquire alone) would make the bucket a limit of one request per
// interval with no tolerance at all: capacity would mean nothing, the
// advertised Remaining (its free queue room) would be untrue, and no
// client could keep to the rate, since a request that arrives a
// millisecond early is refused and one that arrives late loses its
// lateness for good (the bucket restarts its phase from it). A client
// ten requests wide was refused nine times at its first burst, and one
// paced from the answers lost a round trip every slot (1.42× the ideal
// time at 20 ms each way).
//
// What a held bucket advertises follows: r is the room in its queue (what
// is admitted now, held until its turn), t the time until its next slot
// (when one more place frees), and a refusal's Retry-After the same.

// maxHold is the longest a request is held for its slot. A bucket that
// drains slowly (10 an hour: a slot every six minutes) would hold an HTTP
// request for minutes, past any client's or proxy's timeout: a slot
// further off than this is refused with its Retry-After, as any other
// limit's would be.
const maxHold = time.Second

// limiterSource is a repository that hands out a key's limiter
// (repository.Memory).
type limiterSource interface {
	Get(key string) limiters.Limiter
}

// shaper returns key's limiter when it is a lone leaky bucket of this
// package, the one case server.New can hold a request for: its own queue
// limit (its capacity) bounds the wait. Other repositories, and chains,
// are refused as before.
func (rl *RateLimiter) shaper(key string) limiters.Limiter {
	src, ok := rl.repo.(limiterSource)
	if !ok {
		return nil
	}
	l := src.Get(key)
	if _, ok := l.(*limiters.LeakyBucket); !ok {
		return nil
	}
	return l
}

// hold waits in the leaky bucket l of key for n permits, its refusal d
// having said its slot is taken. It returns the decision to advertise:
// allowed once the slot came, or refused when the queue is full (or the
// request ended first), with RetryAfter until the next slot. err is the
// repository's.
func (rl *RateLimiter) hold(ctx context.Context, key string, l limiters.Limiter, n int, d limiters.Decision) (limiters.Decision, error) {
	if n > d.Limit || d.RetryAfter > maxHold { // never, or not soon: refused, as before
		return d, nil
	}
	err := rl.repo.Acquire(ctx, key, n)
	var buf [1]limiters.Member
	ms := limiters.Members(l, 0, buf[:0])
	if len(ms) != 1 {
		return d, nil // closed meanwhile
	}
	m := ms[0]
	out := limiters.Decision{Allowed: err == nil, Limit: m.Limit, Remaining: max(m.Remaining, 0), ResetAfter: m.ResetAfter}
	next := max(m.Next, 0)
	switch {
	case err == nil:
		// X-RateLimit-Reset: until the queue has drained, or, with no
		// room, until the next slot frees a place; IETF t: until the
		// next slot, when more than r is admitted.
		out.RetryAfter = next
		if out.Remaining == 0 {
			out.ResetAfter = next
		}
		return out, nil
	case errors.Is(err, limiters.ErrQueueFull), errors.Is(err, limiters.ErrRateLimited),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out.Remaining = 0
		out.RetryAfter = max(next, time.Nanosecond)
		return out, nil
	case errors.Is(err, limiters.ErrClosed):
		return d, nil
	}
	return limiters.Decision{}, err
}

// members reads the state of each of s's limits for caller, and the
// limiter itself when the default storage holds it (nil otherwise).
func (s *stage) members(ctx context.Context, caller string, into []limiters.Member) ([]limiters.Member, limiters.Limiter, error) {
	if v, ok := s.set.repo.(view); ok && s.key != "" {
		// Members reads a key kept as a bare state without making its
		// limiter; only a chain's limiter is wanted (its waiters are its
		// own), and chains are never kept as states.
		ms, err := v.mem.Members(s.key, s.n, into)
		if err != nil {
			return into, nil, errNoMembers
		}
		var l limiters.Limiter
		if len(ms) > 1 {
			l = v.mem.Get(s.key)
		}
		return ms, l, nil
	}
	if mr, ok := s.set.repo.(memberReporter); ok {
		ms, err := mr.Members(ctx, caller, s.n, into)
		return ms, nil, err
	}
	return into, nil, errNoMembers
}

// holdSpan is how long s may hold a request for caller: when every limit
// that refuses it now is a leaky bucket (and at least one of s's limits
// is), the time a full queue of the largest takes to drain, capacity
// emission intervals (each interval's nanosecond rounded down, added
// back); ok is false when the request is not a leaky bucket's to hold.
func (s *stage) holdSpan(ctx context.Context, caller string) (span, slot time.Duration, ok bool) {
	var buf [4]limiters.Member
	ms, _, err := s.members(ctx, caller, buf[:0])
	if err != nil || len(ms) != len(s.set.ads) {
		return 0, 0, false
	}
	for i := range ms {
		a := &s.set.ads[i]
		leaky := a.spec.Algorithm == limiters.AlgLeakyBucket
		if ms[i].Wait != 0 && (!leaky || ms[i].Wait < 0) {
			return 0, 0, false
		}
		if d := satMul(a.interval+1, a.spec.Limit); leaky && d > span {
			span, slot = d, a.interval
		}
	}
	return span, slot, span > 0
}

// satMul is d·k, saturating at the largest Duration.
func satMul(d time.Duration, k int) time.Duration {
	if k <= 0 || d <= 0 {
		return 0
	}
	if d > math.MaxInt64/time.Duration(k) {
		return math.MaxInt64
	}
	return d * time.Duration(k)
}

// hold waits for s's n permits when s refused them only because a leaky
// bucket's slot is taken, and the turn of one more request (a peek, which
// counts every waiter, a chain's too) is within holdSpan (and maxHold).
// The wait's deadline is half a slot past that span: Acquire refuses at
// once a turn that would come later (requests that peeked together cannot
// all join), and a deadline on the very last slot would race its grant
// and refuse a request at its slot. held says the
// permits were granted, and s.d is then what a peek says; a refusal (the
// queue is full, or the request ended) leaves s as refused; err is the
// repository's.
func (s *stage) hold(ctx context.Context, caller string) (held bool, err error) {
	span, slot, ok := s.holdSpan(ctx, caller)
	if !ok {
		return false, nil
	}
	span = min(span, maxHold)
	repo := s.set.repo
	p, err := repo.TryAcquire(ctx, caller, 0)
	if err != nil || p.RetryAfter > span {
		return false, err
	}
	// The peek only spares a request the queue's lock; requests that
	// peeked together would all join. Acquire's own check of its turn
	// against its deadline is the bound, under the limiter's lock: slots
	// fall a whole interval apart, so a deadline half an interval past
	// the span admits the same turns and fires clear of the last one's
	// grant.
	hctx, cancel := context.WithTimeout(ctx, span+slot/2)
	defer cancel()
	if err := repo.Acquire(hctx, caller, s.n); err != nil {
		if waitRefusal(err) || errors.Is(err, limiters.ErrClosed) {
			return false, nil
		}
		return false, err
	}
	s.d, _ = repo.TryAcquire(context.WithoutCancel(ctx), caller, 0)
	s.d.Allowed = true
	return true, nil
}
