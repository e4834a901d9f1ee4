package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// Limit names in Event.Limit.
const (
	limitRequests = "requests"
	limitCost     = "cost"
)

// stage is one of a rule's sets of limits, as charged for one request.
type stage struct {
	set   *limitSet
	n     int
	taken bool
	seen  bool // decided: its limits are advertised
	d     limiters.Decision
	key   string // the key in the default storage (view), once tried
}

// try is tryAcquire of s's n permits for caller. In the default storage it
// keeps the key, so that advertising the limits looks them up again
// without building it twice.
func (s *stage) try(ctx context.Context, caller string) (limiters.Decision, error) {
	if v, ok := s.set.repo.(view); ok {
		if s.key == "" {
			s.key = v.prefix + caller
		}
		return tryAcquire(ctx, v.mem, s.key, s.n)
	}
	return tryAcquire(ctx, s.set.repo, caller, s.n)
}

// outcome is the policy's verdict on one request.
type outcome struct {
	admitted bool
	delayed  bool
	d        limiters.Decision // to advertise: the refusing stage's, else the first's
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
	var stages [2]stage
	ss := stages[:0]
	if ru.limits != nil {
		ss = append(ss, stage{set: ru.limits, n: n})
	}
	if ru.caps != nil {
		ss = append(ss, stage{set: ru.caps, n: cost})
	}

	var o outcome
	if ru.action == Delay {
		o = policyWait(r.Context(), ru.maxDelay, caller, ss)
	} else {
		o = policyTry(r.Context(), caller, ss, ru.action == Block)
	}
	// Permits held by the rule's limits go back exactly once, when next
	// returns or panics (or already, if the request was not admitted).
	if held := &ss[0]; held.taken && held.set.holds {
		defer held.set.repo.Release(context.Background(), caller, held.n)
	}
	ev := Event{Key: caller, Plan: pl.name, Endpoint: ru.endpoint, Cost: n, Decision: o.d, Request: r}
	if s := o.refused; s != nil {
		ev.Limit, ev.Cost = s.set.name, s.n
	} else {
		ev.Limit, ev.Cost = ss[0].set.name, ss[0].n
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
		var lbuf [6]headers.Limit
		ls := advertise(r.Context(), caller, ss, o.refused, lbuf[:0])
		headers.WriteLimits(h, ls, rl.style)
		ev.Limits = slices.Clone(ls)
		ev.Kind, ev.Err = EventRejected, o.waitErr
		ev.Final = final(ev.Limits)
		if ev.Final {
			o.detail = finalDetail(o.refused, ev.Limits)
		}
		rl.emit(ev)
		rl.reject(w, ev, ru.problem, o.detail)
		return
	}
	if ru.action != Shadow {
		var lbuf [6]headers.Limit
		ls := advertise(r.Context(), caller, ss, nil, lbuf[:0])
		headers.WriteLimits(h, ls, rl.style)
		if rl.observe != nil {
			ev.Limits = slices.Clone(ls)
		}
	}
	ev.Kind = EventAllowed
	if o.delayed {
		ev.Kind = EventDelayed
	}
	rl.emit(ev)
	if ru.action != Shadow {
		for i := range ss {
			if rl.isNear(ss[i].d) {
				ev.Kind, ev.Limit, ev.Cost, ev.Decision = EventNearLimit, ss[i].set.name, ss[i].n, ss[i].d
				rl.nearLimit(h, ev)
				break
			}
		}
	}
	if ru.caps != nil && p.chargeAfter {
		r = r.WithContext(context.WithValue(r.Context(), chargeKey{}, &charge{repo: ru.caps.repo, key: caller}))
	}
	next.ServeHTTP(w, r)
}

// advertise is what the stages decided advertise, each limit on its own.
func advertise(ctx context.Context, caller string, ss []stage, refused *stage, ls []headers.Limit) []headers.Limit {
	for i := range ss {
		if s := &ss[i]; s.seen {
			ls = s.appendLimits(ctx, caller, s == refused, ls)
		}
	}
	return ls
}

// final reports whether a limit refused for good.
func final(ls []headers.Limit) bool {
	for i := range ls {
		if ls[i].Refused && ls[i].Final {
			return true
		}
	}
	return false
}

// finalDetail explains a refusal by s that no wait can cure.
func finalDetail(s *stage, ls []headers.Limit) string {
	for i := range ls {
		l := &ls[i]
		if !l.Refused || !l.Final {
			continue
		}
		for _, a := range s.set.ads {
			if a.name == l.Name {
				return exceedsDetail(s.n, a.spec.Limit, s.set.name) + " (" + strconv.Quote(l.Name) + "); it can never be admitted, and retrying will not help"
			}
		}
	}
	return s.detail()
}

// policyTry charges each stage at once, in order, and stops at the first
// that refuses; permits already taken are given back then. With hold (the
// Block action), a stage refused only by leaky buckets with room in their
// queues waits for its slot (shape.go).
func policyTry(ctx context.Context, caller string, ss []stage, hold bool) outcome {
	delayed := false
	for i := range ss {
		s := &ss[i]
		d, err := s.try(ctx, caller)
		s.d, s.seen = d, true
		if err == nil && !d.Allowed && hold {
			var held bool
			if held, err = s.hold(ctx, caller); held {
				s.taken, delayed = true, true
				continue
			}
		}
		if err != nil {
			undo(caller, ss)
			return outcome{repoErr: err}
		}
		if !d.Allowed {
			undo(caller, ss)
			return outcome{d: d, refused: s, detail: s.detail()}
		}
		s.taken = true
	}
	return outcome{admitted: true, delayed: delayed, d: ss[0].d}
}

// policyWait waits for each stage in order, all within maxDelay, then
// peeks at each for the fields to advertise.
func policyWait(ctx context.Context, maxDelay time.Duration, caller string, ss []stage) outcome {
	ctx, cancel := context.WithTimeout(ctx, maxDelay)
	defer cancel()
	delayed := false
	for i := range ss {
		s := &ss[i]
		repo := s.set.repo
		// A try first: most requests are admitted at once, and then
		// the decision is the one to advertise.
		d, err := s.try(ctx, caller)
		s.seen = true
		if err == nil && d.Allowed {
			s.d, s.taken = d, true
			continue
		}
		if err == nil && s.n > d.Limit {
			undo(caller, ss)
			s.d = d
			return outcome{d: d, refused: s, detail: s.detail()}
		}
		if err == nil {
			err = repo.Acquire(ctx, caller, s.n)
		}
		if err != nil {
			undo(caller, ss)
			if !waitRefusal(err) {
				return outcome{repoErr: err}
			}
			peek, perr := repo.TryAcquire(context.WithoutCancel(ctx), caller, 0)
			s.d = limiters.Decision{Limit: peek.Limit, ResetAfter: peek.ResetAfter, RetryAfter: maxDelay}
			var re *limiters.RejectedError
			if errors.As(err, &re) {
				s.d.RetryAfter = re.RetryAfter
			}
			o := outcome{d: s.d, refused: s, waitErr: err, detail: s.detail()}
			if errors.Is(err, limiters.ErrExceedsLimit) {
				o.detail = exceedsDetail(s.n, peek.Limit, s.set.name)
			} else if perr == nil && !errors.Is(err, limiters.ErrQueueFull) && re == nil {
				o.detail = "the " + s.set.name + " limit was not freed within " + maxDelay.String()
			}
			return o
		}
		s.taken, delayed = true, true
		s.d, _ = repo.TryAcquire(context.WithoutCancel(ctx), caller, 0)
	}
	return outcome{admitted: true, delayed: delayed, d: ss[0].d}
}

// waitRefusal reports whether a wait's error is the limiter's refusal (or
// the wait's own deadline) rather than the repository's failure.
func waitRefusal(err error) bool {
	return errors.Is(err, limiters.ErrRateLimited) || errors.Is(err, limiters.ErrQueueFull) ||
		errors.Is(err, limiters.ErrExceedsLimit) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}

// undo gives back the permits held by the stages already taken of a
// request that will not be admitted. (Rate and cost permits cannot be given
// back: they count.)
func undo(caller string, ss []stage) {
	for i := range ss {
		if s := &ss[i]; s.taken && s.set.holds {
			_ = s.set.repo.Release(context.Background(), caller, s.n)
			s.taken = false
		}
	}
}

// detail is the problem detail of a refusal by s.
func (s *stage) detail() string {
	if msg := exceedsDetail(s.n, s.d.Limit, s.set.name); msg != "" || s.set.name != limitCost {
		return msg
	}
	return "cost cap of " + strconv.Itoa(s.d.Limit) + " exceeded by a request costing " + strconv.Itoa(s.n) + "; retry after " + strconv.FormatInt(retrySeconds(s.d.RetryAfter), 10) + "s"
}

// tryAcquire is repo.TryAcquire with the rule for a request that costs
// nothing: it is a peek, admitted, charged nothing, whatever the limiter's
// state.
func tryAcquire(ctx context.Context, repo repository.Repository, key string, n int) (limiters.Decision, error) {
	d, err := repo.TryAcquire(ctx, key, n)
	if n == 0 {
		d.Allowed = true
	}
	return d, err
}

// exceedsDetail explains a rejection of a request that costs n, more than
// a limit of limit could ever grant, or returns "" when n is within it.
// name says which limit ("requests", "cost"), or is empty.
func exceedsDetail(n, limit int, name string) string {
	if limit <= 0 || n <= limit {
		return ""
	}
	if name != "" {
		name = " " + name
	}
	return "the request costs " + strconv.Itoa(n) + ", more than the" + name + " limit of " + strconv.Itoa(limit) + " allows at once"
}
