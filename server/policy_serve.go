package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
)

// Limit names in Event.Limit.
const (
	limitRequests = "requests"
	limitInFlight = "in_flight"
	limitCost     = "cost"
)

// stage is one of a rule's three chains, as charged for one request.
type stage struct {
	kind  byte
	name  string // Event.Limit
	key   string
	n     int
	taken bool
	d     limiters.Decision
}

// outcome is the policy's verdict on one request.
type outcome struct {
	admitted bool
	delayed  bool
	d        limiters.Decision // to advertise: the refusing stage's, else the request limits'
	refused  *stage
	detail   string
	waitErr  error // why a Delay wait failed
	repoErr  error
}

func (rl *RateLimiter) servePolicy(w http.ResponseWriter, r *http.Request, next http.Handler) {
	p := rl.policy
	req := keyextract.HTTP(r)
	if allowed, blocked := p.listed(req); blocked {
		rl.emit(Event{Kind: EventForbidden, Request: r})
		WriteProblem(w, Problem{Status: http.StatusForbidden, Detail: "requests from this address are not accepted"})
		return
	} else if allowed {
		rl.emit(Event{Kind: EventBypassed, Request: r})
		next.ServeHTTP(w, r)
		return
	}
	pl := p.planFor(req)
	ru := pl.ruleFor(r)
	if ru == nil {
		next.ServeHTTP(w, r)
		return
	}
	caller, ok := rl.callerKey(req)
	if !ok {
		rl.emit(Event{Kind: EventForbidden, Plan: pl.name, Endpoint: ru.endpoint, Request: r})
		WriteProblem(w, Problem{Status: http.StatusForbidden, Detail: "the request carries no key to rate-limit it by"})
		return
	}
	n := rl.weight(req)
	cost := n
	if p.capCost != nil {
		cost = max(p.capCost(req), 0)
	}
	var stages [3]stage
	ss := stages[:0]
	if len(ru.conc) > 0 {
		ss = append(ss, stage{kind: kindConc, name: limitInFlight, n: 1})
	}
	if len(ru.rate) > 0 {
		ss = append(ss, stage{kind: kindRate, name: limitRequests, n: n})
	}
	if len(ru.caps) > 0 {
		ss = append(ss, stage{kind: kindCost, name: limitCost, n: cost})
	}
	for i := range ss {
		ss[i].key = string(ss[i].kind) + ru.index + "|" + caller
	}

	var o outcome
	if ru.action == Delay {
		o = rl.policyWait(r.Context(), ru, ss)
	} else {
		o = rl.policyTry(r.Context(), ss)
	}
	// Whatever was taken from a concurrency chain goes back exactly once,
	// when next returns or panics, or now if the request is not admitted.
	if held := &ss[0]; held.kind == kindConc && held.taken {
		defer p.repo.Release(context.Background(), held.key, held.n)
	}
	ev := Event{Key: caller, Plan: pl.name, Endpoint: ru.endpoint, Cost: n, Decision: o.d, Request: r}
	if s := o.refused; s != nil {
		ev.Limit, ev.Cost = s.name, s.n
	} else if i := advertised(ss); i >= 0 {
		ev.Limit, ev.Cost = ss[i].name, ss[i].n
	}
	if o.repoErr != nil {
		ev.Err = o.repoErr
		rl.failed(w, r, next, ev)
		return
	}
	h := w.Header()
	if !o.admitted {
		if ru.action == Shadow {
			ev.Kind = EventShadowRejected
			rl.emit(ev)
			next.ServeHTTP(w, r)
			return
		}
		headers.Write(h, o.d, rl.style)
		ev.Kind, ev.Err = EventRejected, o.waitErr
		rl.emit(ev)
		rl.reject(w, r, o.d, o.detail)
		return
	}
	if ru.action != Shadow {
		headers.Write(h, o.d, rl.style)
	}
	ev.Kind = EventAllowed
	if o.delayed {
		ev.Kind = EventDelayed
	}
	rl.emit(ev)
	if ru.action != Shadow {
		for i := range ss {
			if rl.isNear(ss[i].d) {
				ev.Kind, ev.Limit, ev.Cost, ev.Decision = EventNearLimit, ss[i].name, ss[i].n, ss[i].d
				rl.nearLimit(h, ev)
				break
			}
		}
	}
	next.ServeHTTP(w, r)
}

// advertised is the index of the stage whose decision an admitted
// request's fields show: the request limits', else the first.
func advertised(ss []stage) int {
	for i := range ss {
		if ss[i].kind == kindRate {
			return i
		}
	}
	return 0
}

// policyTry charges each stage at once, in order, and stops at the first
// that refuses; a concurrency permit already taken is given back then.
func (rl *RateLimiter) policyTry(ctx context.Context, ss []stage) outcome {
	repo := rl.policy.repo
	for i := range ss {
		s := &ss[i]
		d, err := repo.TryAcquire(ctx, s.key, s.n)
		if s.n == 0 {
			d.Allowed = true // a peek: admitted, charged nothing
		}
		s.d = d
		if err != nil {
			rl.policyUndo(ss)
			return outcome{repoErr: err}
		}
		if !d.Allowed {
			rl.policyUndo(ss)
			return outcome{d: d, refused: s, detail: stageDetail(s)}
		}
		s.taken = true
	}
	return outcome{admitted: true, d: ss[advertised(ss)].d}
}

// policyWait waits for each stage in order, all within the rule's
// MaxDelay, then peeks at each for the fields to advertise.
func (rl *RateLimiter) policyWait(ctx context.Context, ru *rule, ss []stage) outcome {
	repo := rl.policy.repo
	ctx, cancel := context.WithTimeout(ctx, ru.maxDelay)
	defer cancel()
	delayed := false
	for i := range ss {
		s := &ss[i]
		// A try first: most requests are admitted at once, and then
		// the decision is the one to advertise.
		d, err := repo.TryAcquire(ctx, s.key, s.n)
		if s.n == 0 {
			d.Allowed = true // a peek: admitted, charged nothing
		}
		if err == nil && d.Allowed {
			s.d, s.taken = d, true
			continue
		}
		if err == nil && s.n > d.Limit {
			rl.policyUndo(ss)
			s.d = d
			return outcome{d: d, refused: s, detail: stageDetail(s)}
		}
		if err == nil {
			err = repo.Acquire(ctx, s.key, s.n)
		}
		if err != nil {
			rl.policyUndo(ss)
			peek, perr := repo.TryAcquire(context.WithoutCancel(ctx), s.key, 0)
			if waitRefusal(err) {
				d := limiters.Decision{Limit: peek.Limit, ResetAfter: peek.ResetAfter, RetryAfter: ru.maxDelay}
				var re *limiters.RejectedError
				if errors.As(err, &re) {
					d.RetryAfter = re.RetryAfter
				}
				s.d = d
				o := outcome{d: d, refused: s, waitErr: err, detail: stageDetail(s)}
				if errors.Is(err, limiters.ErrExceedsLimit) {
					o.detail = "the request costs " + strconv.Itoa(s.n) + ", more than the " + s.name + " limit of " + strconv.Itoa(peek.Limit) + " allows at once"
				} else if perr == nil && !errors.Is(err, limiters.ErrQueueFull) && !errors.As(err, &re) {
					o.detail = "the " + s.name + " limit was not freed within " + ru.maxDelay.String()
				}
				return o
			}
			return outcome{repoErr: err}
		}
		s.taken, delayed = true, true
		s.d, _ = repo.TryAcquire(context.WithoutCancel(ctx), s.key, 0)
	}
	return outcome{admitted: true, delayed: delayed, d: ss[advertised(ss)].d}
}

// waitRefusal reports whether a wait's error is the limiter's refusal (or
// the wait's own deadline) rather than the repository's failure.
func waitRefusal(err error) bool {
	return errors.Is(err, limiters.ErrRateLimited) || errors.Is(err, limiters.ErrQueueFull) ||
		errors.Is(err, limiters.ErrExceedsLimit) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}

// policyUndo gives back a concurrency permit taken by a request that will
// not be admitted. (Rate and cost permits cannot be given back: they
// count.)
func (rl *RateLimiter) policyUndo(ss []stage) {
	if s := &ss[0]; s.kind == kindConc && s.taken {
		_ = rl.policy.repo.Release(context.Background(), s.key, s.n)
		s.taken = false
	}
}

// stageDetail is the problem detail of a refusal by s.
func stageDetail(s *stage) string {
	d := s.d
	if d.Limit > 0 && s.n > d.Limit {
		return "the request costs " + strconv.Itoa(s.n) + ", more than the " + s.name + " limit of " + strconv.Itoa(d.Limit) + " allows at once"
	}
	switch s.kind {
	case kindConc:
		return "too many requests in flight: the limit is " + strconv.Itoa(d.Limit)
	case kindCost:
		return "cost cap of " + strconv.Itoa(d.Limit) + " exceeded by a request costing " + strconv.Itoa(s.n) + "; retry after " + strconv.FormatInt(retrySeconds(d.RetryAfter), 10) + "s"
	}
	return ""
}
