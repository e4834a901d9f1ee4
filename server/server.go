package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// AnonymousKey is the key of the one bucket that every request without a key
// of its own (its extractor returned ok == false) shares by default; see
// WithAnonymousKey.
const AnonymousKey = "anonymous"

// DefaultNearLimit is the share of a limit that, once used, counts as near
// the limit: 80%.
const DefaultNearLimit = 0.8

// ErrNoRepository is returned by TryAllow, Allow and Release of a RateLimiter
// made with a nil repository (one that only serves a Policy).
var ErrNoRepository = errors.New("server: no repository")

// RateLimiter is admission control for inbound requests: it charges each
// request to its caller's limiter, held in a repository, and admits or
// rejects it. Its Middleware does that for net/http handlers; TryAllow, Allow
// and Release serve everything else (gRPC interceptors, job queues).
//
// A RateLimiter is safe for concurrent use. It holds no goroutines and needs
// no Close; close the repository (or Policy) it was given when done.
type RateLimiter struct {
	repo        repository.Repository
	key         keyextract.Extractor
	anon        string
	style       headers.Style
	cost        func(keyextract.Request) int
	onRejected  func(http.ResponseWriter, *http.Request, limiters.Decision)
	failOpen    bool
	observe     func(Event)
	near        nearLimit
	policy      *Policy
	holds       bool // whether repo's permits stay taken until Release
	problemType func(Event) string
	chains      atomic.Int32 // chainsUnknown, chainsYes or chainsNo: whether repo's limiters are chains, advertised member by member (chain.go)
}

// nearLimit is the "near limit" signal: a threshold in per-mille (integer
// arithmetic on the hot path) and an optional response header.
type nearLimit struct {
	permille int64 // 0 disables it
	header   string
}

// Option configures a RateLimiter.
type Option func(*RateLimiter)

// WithKey sets how a request's caller is found. The default is
// keyextract.IP() with no trusted proxies: the peer's address, never a
// forwarding header. Behind proxies, pass keyextract.IP(yourProxies...).
// A nil e panics.
func WithKey(e keyextract.Extractor) Option {
	if e == nil {
		panic("server: WithKey: nil extractor")
	}
	return func(rl *RateLimiter) { rl.key = e }
}

// WithAnonymousKey sets the key charged for a request whose extractor finds
// no key (ok == false): all such requests share that one bucket. The default
// is AnonymousKey ("anonymous"). An empty key rejects them instead, with 403
// Forbidden, since they cannot be told apart.
func WithAnonymousKey(key string) Option { return func(rl *RateLimiter) { rl.anon = key } }

// WithHeaders sets which rate-limit fields responses carry (headers.Legacy,
// headers.IETF or headers.Both, the default). Rejections always carry
// Retry-After.
func WithHeaders(s headers.Style) Option { return func(rl *RateLimiter) { rl.style = s } }

// WithCost makes requests weighted: f says how many permits a request takes
// (say 10 for an expensive endpoint). The default is 1. A cost below zero
// counts as zero (a peek: the request is admitted and takes nothing); a cost
// above what the limiter could ever grant is rejected with 429. A nil f
// means the default.
func WithCost(f func(keyextract.Request) int) Option { return func(rl *RateLimiter) { rl.cost = f } }

// WithOnRejected replaces the response to a rejected request. When f is
// called the rate-limit fields and Retry-After are already set on w's
// header; f writes the status and body. The default writes 429 Too Many
// Requests with an RFC 9457 problem details body (see WriteProblem); a nil
// f means that default.
func WithOnRejected(f func(w http.ResponseWriter, r *http.Request, d limiters.Decision)) Option {
	return func(rl *RateLimiter) { rl.onRejected = f }
}

// WithFailOpen says what happens when the repository fails (a closed
// repository, repository.ErrTooManyKeys, a remote store that does not
// answer): fail open (true, the default) admits the request without
// rate-limit fields, so an outage of the limiter is not an outage of the
// API; fail closed (false) answers 503 Service Unavailable. Either way the
// observer sees an EventError.
func WithFailOpen(open bool) Option { return func(rl *RateLimiter) { rl.failOpen = open } }

// WithProblemType lets f choose the problem type of each rejection, seeing
// its Event (kind EventRejected): ProblemTypeTemporaryReducedCapacity
// during an incident, say, or ProblemTypeAbnormalUsageDetected for a
// caller an abuse detector flagged. An empty result keeps the type the
// rejection had: ProblemTypeQuotaExceeded, or a policy Rule's Problem. The
// body is as RateLimited writes it, with Problem.WithType's status and
// title. A refusal no wait can cure (Event.Final) always has
// ProblemTypeRequestExceedsLimit, and f is not asked. WithOnRejected, if
// given, writes the response instead. A nil f keeps every rejection's type.
func WithProblemType(f func(Event) string) Option {
	return func(rl *RateLimiter) { rl.problemType = f }
}

// WithObserver calls f for every decision (see Event), synchronously, on the
// request's goroutine: f must be fast and safe for concurrent use. A nil f
// means no observer.
func WithObserver(f func(Event)) Option { return func(rl *RateLimiter) { rl.observe = f } }

// WithNearLimit sets the share of a limit (0 < threshold ≤ 1; the default is
// DefaultNearLimit) past which an admitted request is near the limit: the
// observer sees EventNearLimit and, if header is not empty, the response
// carries that header with the value "true", so clients can back off early.
// A threshold of zero or less turns the signal off.
func WithNearLimit(threshold float64, header string) Option {
	return func(rl *RateLimiter) {
		rl.near = nearLimit{permille: int64(math.Round(min(threshold, 1) * 1000)), header: http.CanonicalHeaderKey(header)}
		if threshold <= 0 {
			rl.near.permille = 0
		}
	}
}

// WithPolicy makes the Middleware choose limits per request from p: plans,
// endpoints, several limits at once, cost caps, allow and block lists, and
// actions (see Policy). The policy owns its limiters; the repository passed
// to New, which may then be nil, is used only by TryAllow, Allow and Release.
// A nil p panics.
func WithPolicy(p *Policy) Option {
	if p == nil {
		panic("server: WithPolicy: nil policy")
	}
	return func(rl *RateLimiter) { rl.policy = p }
}

// New returns a RateLimiter charging requests to repo's per-key limiters.
// With no options it keys requests by the peer's IP address, charges each 1
// permit, writes legacy and IETF rate-limit fields, answers rejections with
// 429 and problem details, and fails open when repo fails.
//
// repo may be nil only with WithPolicy. As for every constructor and option
// of this module, nil is accepted only where it has a documented meaning:
// a nil option, a nil extractor (WithKey) or a nil policy (WithPolicy)
// panics at once, naming it; a nil function given to WithCost,
// WithOnRejected, WithProblemType or WithObserver means the default.
func New(repo repository.Repository, opts ...Option) *RateLimiter {
	rl := &RateLimiter{
		repo:     repo,
		key:      keyextract.IP(),
		anon:     AnonymousKey,
		style:    headers.Both,
		failOpen: true,
		near:     nearLimit{permille: int64(DefaultNearLimit * 1000)},
	}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("server: New: option %d of %d is nil", i+1, len(opts)))
		}
		o(rl)
	}
	if rl.repo == nil && rl.policy == nil {
		panic("server: New: nil repository and no policy")
	}
	rl.holds = true
	if h, ok := rl.repo.(limiters.PermitHolder); ok {
		rl.holds = h.HoldsPermits()
	}
	return rl
}

// advertise is the decision the headers tell the client. When the request
// took the last permit, the reset a client should wait for is the time until
// the next permit, not until the limiter is full again (which, for a token
// bucket, can be far longer): a peek says when that is.
func (rl *RateLimiter) advertise(ctx context.Context, key string, d limiters.Decision) limiters.Decision {
	if !d.Allowed || d.Remaining != 0 || rl.style&headers.Both == 0 {
		return d
	}
	if p, err := rl.repo.TryAcquire(ctx, key, 0); err == nil && !p.Allowed && p.RetryAfter > 0 {
		d.ResetAfter = p.RetryAfter
	}
	return d
}

// TryAllow charges n permits to key's limiter now or not at all, and returns
// its decision. It never waits. The error is the repository's: with it the
// decision is the zero Decision, and whether to admit is the caller's choice
// (the Middleware follows WithFailOpen).
func (rl *RateLimiter) TryAllow(ctx context.Context, key string, n int) (limiters.Decision, error) {
	if rl.repo == nil {
		return limiters.Decision{}, ErrNoRepository
	}
	d, err := rl.repo.TryAcquire(ctx, key, n)
	if rl.observe != nil {
		ev := Event{Kind: EventAllowed, Key: key, Cost: n, Decision: d, Err: err}
		switch {
		case err != nil:
			ev.Kind = EventError
		case !d.Allowed:
			ev.Kind = EventRejected
		}
		rl.observe(ev)
		if err == nil && rl.isNear(d) {
			ev.Kind = EventNearLimit
			rl.observe(ev)
		}
	}
	return d, err
}

// Allow waits, in arrival order, until key's limiter grants n permits, or
// until ctx ends. It fails at once with a *limiters.RejectedError when ctx's
// deadline would pass before its turn, and with limiters.ErrExceedsLimit when
// n is more than the limiter ever grants.
func (rl *RateLimiter) Allow(ctx context.Context, key string, n int) error {
	if rl.repo == nil {
		return ErrNoRepository
	}
	return rl.repo.Acquire(ctx, key, n)
}

// Release gives n permits back to key's limiter, for concurrency limits
// ("5 in flight"); rate limiters ignore it. Call it once per admitted
// TryAllow or Allow whose limiter holds permits. The Middleware does this
// itself.
func (rl *RateLimiter) Release(ctx context.Context, key string, n int) {
	if rl.repo == nil {
		return
	}
	_ = rl.repo.Release(context.WithoutCancel(ctx), key, n)
}

// isNear reports whether an admitted decision has used at least the
// near-limit share of its limit.
func (rl *RateLimiter) isNear(d limiters.Decision) bool {
	if rl.near.permille == 0 || !d.Allowed || d.Limit <= 0 {
		return false
	}
	used := int64(d.Limit - max(d.Remaining, 0))
	return used*1000 >= rl.near.permille*int64(d.Limit)
}

// callerKey is the request's key, or the anonymous key; ok is false when
// the request has no key and anonymous requests are refused.
func (rl *RateLimiter) callerKey(req keyextract.Request) (string, bool) {
	if k, ok := rl.key.Extract(req); ok {
		return k, true
	}
	return rl.anon, rl.anon != ""
}

// weight is the request's permit count under WithCost.
func (rl *RateLimiter) weight(req keyextract.Request) int {
	if rl.cost == nil {
		return 1
	}
	return max(rl.cost(req), 0)
}

// Middleware returns a handler that admits or rejects each request before
// next sees it. Every response it lets through, and every rejection, carries
// the rate-limit fields of WithHeaders; a rejection is 429 Too Many Requests
// with Retry-After and an RFC 9457 problem details body (or what
// WithOnRejected writes). Permits a limiter holds (concurrency limits) are
// given back exactly once when next returns, even if it panics.
//
// It works with any router built on net/http, and with those (echo, gin)
// that adapt net/http middleware.
func (rl *RateLimiter) Middleware(next http.Handler) http.Handler {
	if rl.policy != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rl.servePolicy(w, r, next)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rl.serve(w, r, next)
	})
}

func (rl *RateLimiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	req := keyextract.HTTP(r)
	key, ok := rl.callerKey(req)
	if !ok {
		rl.emit(Event{Kind: EventForbidden, Request: r})
		WriteProblem(w, Problem{Status: http.StatusForbidden, Detail: "the request carries no key to rate-limit it by"})
		return
	}
	n := rl.weight(req)
	d, err := tryAcquire(r.Context(), rl.repo, key, n)
	held := false
	if err == nil && !d.Allowed {
		if l := rl.shaper(key); l != nil {
			d, err = rl.hold(r.Context(), key, l, n, d)
			held = d.Allowed
		}
	}
	if err != nil {
		rl.failed(w, r, next, Event{Key: key, Cost: n, Err: err, Request: r})
		return
	}
	h := w.Header()
	var mbuf [maxMembers]limiters.Member
	var ms []limiters.Member
	chained := false
	if !held && rl.style&headers.Both != 0 {
		ms, chained = rl.members(r.Context(), key, n, mbuf[:0])
	}
	var lbuf [maxMembers]headers.Limit
	if !d.Allowed {
		ev := Event{Kind: EventRejected, Key: key, Cost: n, Decision: d, Request: r, Final: d.Limit > 0 && n > d.Limit}
		ls := lbuf[:0]
		if chained {
			ls = memberLimits(ms, n, true, ls)
		} else {
			ls = append(ls, headers.Limit{Name: "default", Quota: int64(max(d.Limit, 0)),
				Remaining: int64(max(d.Remaining, 0)), Reset: d.RetryAfter,
				Refused: true, RetryAfter: d.RetryAfter, Final: ev.Final})
		}
		headers.WriteLimits(h, ls, rl.style)
		rl.emit(ev)
		rl.reject(w, ev, ProblemTypeQuotaExceeded, exceedsDetail(n, d.Limit, ""))
		return
	}
	if chained {
		headers.WriteLimits(h, memberLimits(ms, n, false, lbuf[:0]), rl.style)
	} else {
		if !held {
			d = rl.advertise(r.Context(), key, d)
		}
		headers.Write(h, d, rl.style)
	}
	if rl.observe != nil {
		kind := EventAllowed
		if held {
			kind = EventDelayed
		}
		rl.observe(Event{Kind: kind, Key: key, Cost: n, Decision: d, Request: r})
	}
	if rl.isNear(d) {
		rl.nearLimit(h, Event{Kind: EventNearLimit, Key: key, Cost: n, Decision: d, Request: r})
	}
	if n > 0 && rl.holds {
		defer rl.repo.Release(context.Background(), key, n)
	}
	next.ServeHTTP(w, r)
}

func (rl *RateLimiter) emit(ev Event) {
	if rl.observe != nil {
		rl.observe(ev)
	}
}

func (rl *RateLimiter) nearLimit(h http.Header, ev Event) {
	if rl.near.header != "" {
		h.Set(rl.near.header, "true")
	}
	rl.emit(ev)
}

// failed handles a repository error: admit (fail open) or 503.
func (rl *RateLimiter) failed(w http.ResponseWriter, r *http.Request, next http.Handler, ev Event) {
	ev.Kind = EventError
	ev.FailedOpen = rl.failOpen
	rl.emit(ev)
	if rl.failOpen {
		next.ServeHTTP(w, r)
		return
	}
	WriteProblem(w, Problem{Status: http.StatusServiceUnavailable, Detail: "the rate limiter is unavailable"})
}

// reject answers a rejected request, described by ev, with problem type
// typ unless WithProblemType says otherwise; the rate-limit fields are
// already set.
func (rl *RateLimiter) reject(w http.ResponseWriter, ev Event, typ, detail string) {
	if rl.onRejected != nil {
		rl.onRejected(w, ev.Request, ev.Decision)
		return
	}
	if ev.Final {
		typ = ProblemTypeRequestExceedsLimit
	} else if rl.problemType != nil {
		if t := rl.problemType(ev); t != "" {
			typ = t
		}
	}
	p := RateLimited(ev.Decision, detail).WithType(typ)
	if ev.Limits != nil {
		p.ViolatedPolicies = nil
		for i := range ev.Limits {
			if l := &ev.Limits[i]; l.Refused {
				p.ViolatedPolicies = append(p.ViolatedPolicies, l.Name)
				if !ev.Final {
					p.RetryAfter = max(p.RetryAfter, retrySeconds(l.RetryAfter))
				}
			}
		}
	}
	if ev.Final {
		p.RetryAfter = 0
		p.Title = "Request Exceeds Limit"
	}
	WriteProblem(w, p)
}
