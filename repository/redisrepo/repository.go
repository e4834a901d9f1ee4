package redisrepo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// ErrUnavailable is wrapped by the errors returned while Redis cannot be
// reached (a failed or timed-out round trip, or an open circuit breaker).
var ErrUnavailable = errors.New("redisrepo: redis unavailable")

// ErrForeignValue is wrapped by the error returned when one of the
// repository's keys holds a value it did not write (someone SET it).
var ErrForeignValue = errors.New("redisrepo: foreign value at key")

// maxLogLimit bounds a sliding log's limit: the log keeps one sorted-set
// entry per grant, so its memory is O(limit) per key.
const maxLogLimit = 100_000

// maxWindow (in µs, about 50 days) and maxWindowLimit bound the window
// algorithms' specs: the sliding window's products of a count and a
// duration are kept exact in two limbs under them (see luaWide).
const (
	maxWindow      = 1<<42 - 1
	maxWindowLimit = 1<<31 - 1
)

// maxExact is the bound under which the scripts' products stay exact in
// Lua's doubles (2^53), with headroom.
const maxExact = 1 << 51

// Repository keeps limits in Redis, one set of keys per limiter key; see
// the package documentation. It implements repository.Repository and
// repository.Admin and is safe for concurrent use.
type Repository struct {
	client redis.UniversalClient // the caller's
	rc     redis.UniversalClient // the round trips': client, or our own that honours deadlines
	own    bool                  // rc is ours, closed with the repository
	dials  *dialWatch            // rc's failed dials, when it is ours
	cfg    config
	limits []limit
	script *redis.Script
	fast   *fast // for a lone try or peek; nil when none fits
	maxN   int   // the most permits one call may take: the smallest limit
	rate   bool  // every limit is a bucket algorithm: Acquire reserves
	conc   bool  // some limit is a concurrency limit: permits are leases

	b     *batcher
	cb    *gobreaker.CircuitBreaker[struct{}]
	local *repository.Memory // FailLocal only
	q     *quota             // lease mode (WithLeases) only

	id  string
	seq atomic.Uint64

	mu       sync.Mutex
	held     map[string][]string // concurrency leases held, per key; "" is a local permit
	released chan struct{}       // closed and replaced on every Release

	clock func() int64 // tests only: the scripts' clock, µs

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ repository.Repository = (*Repository)(nil)
	_ repository.Admin      = (*Repository)(nil)
)

// limit is one spec as the scripts take it: its algorithm's code and its
// six ARGV fields.
type limit struct {
	code string
	args [6]any
	max  int // the most permits one call may take: the limit (a bucket's saturated burst)
}

// New returns a repository deciding spec's limit for every key in Redis,
// through client (a *redis.Client, *redis.ClusterClient or a Sentinel
// failover client). An invalid spec is an error naming the field. Close
// stops its background work; it does not close client.
func New(client redis.UniversalClient, spec limiters.Spec, opts ...Option) (*Repository, error) {
	return NewChain(client, []limiters.Spec{spec}, opts...)
}

// NewChain returns a repository deciding several limits of each key at
// once (10/s and 1000/day and 5 in flight, say): a call is admitted only if
// every limit admits it, all or nothing, in one round trip. Its Decision is
// the most restrictive: the smallest Remaining (with its Limit), the largest
// RetryAfter and ResetAfter.
func NewChain(client redis.UniversalClient, specs []limiters.Spec, opts ...Option) (*Repository, error) {
	if client == nil {
		return nil, errors.New("redisrepo: nil client")
	}
	if len(specs) == 0 {
		return nil, errors.New("redisrepo: no spec")
	}
	r := &Repository{client: client, cfg: defaults(), rate: true, maxN: -1,
		held: map[string][]string{}, released: make(chan struct{}), stop: make(chan struct{})}
	applyOptions(&r.cfg, opts)
	var direct bool
	r.rc, r.dials, r.own, direct = deadlineClient(client)
	codes := make([]string, len(specs))
	for i, s := range specs {
		l, err := newLimit(s, r.cfg.lease)
		if err != nil {
			if len(specs) > 1 {
				return nil, fmt.Errorf("redisrepo: spec %d: %w", i, err)
			}
			return nil, err
		}
		r.limits = append(r.limits, l)
		codes[i] = l.code
		if r.maxN < 0 || l.max < r.maxN {
			r.maxN = l.max
		}
		switch l.code {
		case codeGCRA, codeTokenBucket, codeLeakyBucket:
		default:
			r.rate = false
		}
		r.conc = r.conc || l.code == codeConcurrency
	}
	r.script = newScript(codes...)
	r.fast = fastFor(r.limits)
	if r.cfg.fail == FailLocal {
		local := make([]limiters.Spec, len(specs))
		for i, s := range specs {
			local[i] = divide(s, r.cfg.replicas)
		}
		r.local = repository.NewMemory(func(string) limiters.Limiter { return chain(local) })
	}
	r.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "redisrepo",
		MaxRequests: 1,
		Timeout:     r.cfg.cooldown,
		IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(r.cfg.failures) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			r.observe(Event{Kind: EventBreaker, State: to.String()})
		},
	})
	r.id = rand.Text()[:16] // names this repository's leases
	if r.cfg.leases > 0 {
		if len(specs) != 1 {
			return nil, errors.New("redisrepo: WithLeases shares one limit: use New with one spec")
		}
		var err error
		if r.q, err = newQuota(r, specs[0], r.cfg.leases); err != nil {
			return nil, err
		}
	}
	r.b = newBatcher(r, direct)
	if r.q != nil {
		r.wg.Add(1)
		go r.q.run()
	}
	if r.conc {
		r.wg.Add(1)
		go r.renew()
	}
	return r, nil
}

// newLimit checks s and turns it into a limit's script arguments.
func newLimit(s limiters.Spec, lease time.Duration) (limit, error) {
	if err := s.Validate(); err != nil {
		return limit{}, err
	}
	var l limit
	switch s.Algorithm {
	case limiters.AlgGCRA, limiters.AlgTokenBucket, limiters.AlgLeakyBucket:
		b, err := newBucket(s.Rate, s.Limit)
		if err != nil {
			return l, err
		}
		ql := int64(s.QueueLimit) // 0: unlimited, except the leaky bucket's capacity
		if ql == 0 && s.Algorithm == limiters.AlgLeakyBucket {
			ql = b.burst
		}
		l.code = map[string]string{limiters.AlgGCRA: codeGCRA, limiters.AlgTokenBucket: codeTokenBucket, limiters.AlgLeakyBucket: codeLeakyBucket}[s.Algorithm]
		l.args = [6]any{l.code, b.us, b.fr, b.den, b.burst, ql}
		l.max = int(b.burst)
	case limiters.AlgConcurrency:
		l.code = codeConcurrency
		l.args = [6]any{l.code, s.Limit, lease.Microseconds(), 0, 0, 0}
		l.max = s.Limit
	default:
		if s.Window%time.Microsecond != 0 {
			return l, fmt.Errorf("redisrepo: spec window: must be a whole number of microseconds, got %v", s.Window)
		}
		w := int64(s.Window / time.Microsecond)
		if w > maxWindow {
			return l, fmt.Errorf("redisrepo: spec window: at most %v on Redis (exact arithmetic in Lua's doubles), got %v", time.Duration(maxWindow)*time.Microsecond, s.Window)
		}
		if int64(s.Limit) > maxWindowLimit {
			return l, fmt.Errorf("redisrepo: spec limit: at most %d on Redis (exact arithmetic in Lua's doubles), got %d", maxWindowLimit, s.Limit)
		}
		if s.Algorithm == limiters.AlgSlidingLog && s.Limit > maxLogLimit {
			return l, fmt.Errorf("redisrepo: spec limit: a sliding log keeps one entry per grant, at most %d; use sliding_window for %d", maxLogLimit, s.Limit)
		}
		l.code = map[string]string{limiters.AlgFixedWindow: codeFixedWindow, limiters.AlgSlidingWindow: codeSlidingWindow, limiters.AlgSlidingLog: codeSlidingLog}[s.Algorithm]
		l.args = [6]any{l.code, s.Limit, w, 0, 0, 0}
		l.max = s.Limit
	}
	return l, nil
}

// divide is s shared by replicas: its limit divided (at least 1), and its
// rate's period multiplied, so the replicas together admit about s.
func divide(s limiters.Spec, replicas int) limiters.Spec {
	s.Limit = max(s.Limit/replicas, 1)
	s.Rate.Per *= time.Duration(replicas)
	return s
}

func chain(specs []limiters.Spec) limiters.Limiter {
	ls := make([]limiters.Limiter, len(specs))
	for i, s := range specs {
		ls[i], _ = s.New() // validated in NewChain
	}
	if len(ls) == 1 {
		return ls[0]
	}
	return limiters.Chain(ls...)
}

// keys are the Redis keys of key's limits: prefix{encoded key}:i<code>, and
// the same with "s" appended for a sliding log's second key.
func (r *Repository) keys(key string) []string {
	enc := encodeKey(key)
	ks := make([]string, 0, 2*len(r.limits))
	for i, l := range r.limits {
		k2 := r.cfg.prefix + "{" + enc + "}:" + strconv.Itoa(i) + l.code + "s"
		ks = append(ks, k2[:len(k2)-1], k2) // one allocation for both
	}
	return ks
}

// call runs the script for key through the batcher.
func (r *Repository) call(ctx context.Context, key, op string, n int, maxWait int64, id string, extra []string) (any, error) {
	fast, keys, args := r.request(key, op, n, maxWait, id, extra)
	res, err := r.b.do(ctx, r.script, fast, keys, args)
	if ours(err) {
		msg := strings.TrimPrefix(err.Error(), "THROTTLE foreign value at key ")
		return nil, fmt.Errorf("%w %s", ErrForeignValue, msg)
	}
	return res, err
}

// request is what a call of op sends: the keys and ARGV of the main
// script, or, for a try or peek it serves, of the fast script (fast not
// nil), which needs only the first key.
func (r *Repository) request(key, op string, n int, maxWait int64, id string, extra []string) (*fast, []string, []any) {
	if r.fast != nil && (op == "try" || op == "peek") {
		k := r.cfg.prefix + "{" + encodeKey(key) + "}:0" + r.limits[0].code
		return r.fast, []string{k}, r.fast.args(boxed[op], n, r.clockArg(), &r.limits[0])
	}
	return nil, r.keys(key), r.args(op, n, maxWait, id, extra)
}

// clockArg is the scripts' clock argument: empty (Redis's TIME) unless a
// test drives the clock.
func (r *Repository) clockArg() string {
	if r.clock != nil {
		return strconv.FormatInt(r.clock(), 10)
	}
	return ""
}

// args is the script's ARGV; see lua.go.
func (r *Repository) args(op string, n int, maxWait int64, id string, extra []string) []any {
	clock := r.clockArg()
	args := make([]any, 0, 6+6*len(r.limits)+len(extra))
	var wait any = maxWait
	if maxWait == -1 {
		wait = noWait
	}
	args = append(args, boxed[op], n, clock, wait, id, len(r.limits))
	for _, l := range r.limits {
		args = append(args, l.args[:]...)
	}
	for _, e := range extra {
		args = append(args, e)
	}
	return args
}

// boxed holds the scripts' ops, and noWait a max wait of -1, as the
// interface values args takes, so that making them costs no allocation.
var (
	boxed = map[string]any{"try": "try", "peek": "peek", "members": "members", "reserve": "reserve",
		"cancel": "cancel", "release": "release", "renew": "renew"}
	noWait any = int64(-1)
)

func (r *Repository) observe(e Event) {
	if r.cfg.observer != nil {
		r.cfg.observer(e)
	}
}

// BreakerState is the circuit breaker's state: "closed" (Redis in use),
// "open" (Redis skipped, the fail mode decides) or "half-open" (a trial).
func (r *Repository) BreakerState() string { return r.cb.State().String() }

// decision reads a try's or peek's reply: allowed, limit, remaining,
// reset and retry (µs).
func decision(res any) (limiters.Decision, error) {
	var v [5]int64
	arr, ok := res.([]any)
	if ok && len(arr) == len(v) {
		for i, x := range arr {
			if v[i], ok = x.(int64); !ok {
				break
			}
		}
	}
	if !ok || len(arr) != len(v) {
		return limiters.Decision{}, fmt.Errorf("redisrepo: bad decision reply %v", res)
	}
	return limiters.Decision{Allowed: v[0] == 1, Limit: int(v[1]), Remaining: int(v[2]),
		ResetAfter: us(v[3]), RetryAfter: us(v[4])}, nil
}

func ints(res any) ([]int64, []string, error) {
	arr, ok := res.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("redisrepo: unexpected script reply %T", res)
	}
	var nums []int64
	var strs []string
	for _, v := range arr {
		switch v := v.(type) {
		case int64:
			nums = append(nums, v)
		case string:
			strs = append(strs, v)
		default:
			return nil, nil, fmt.Errorf("redisrepo: unexpected script reply element %T", v)
		}
	}
	return nums, strs, nil
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

func checkN(n int) {
	if n < 0 {
		panic(fmt.Sprintf("redisrepo: negative permit count %d", n))
	}
}

// TryAcquire takes n permits for key now or not at all, in one round trip.
// n == 0 is a peek that takes nothing; n larger than the (smallest) limit
// is refused, as the local limiters refuse it: a Decision that is not
// Allowed, with a zero RetryAfter (no wait helps) and the key's state, and
// a nil error (Acquire returns limiters.ErrExceedsLimit). The Decision's fields
// are what the local algorithm would report, with durations in whole
// microseconds (Redis's clock resolution). While Redis is unreachable the
// fail mode decides.
func (r *Repository) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	checkN(n)
	if err := ctx.Err(); err != nil {
		return limiters.Decision{}, err
	}
	if n > r.maxN {
		d, err := r.TryAcquire(ctx, key, 0)
		d.Allowed, d.RetryAfter = false, 0
		return d, err
	}
	if r.q != nil {
		return r.q.tryAcquire(ctx, key, n)
	}
	op, id := "try", ""
	if n == 0 {
		op = "peek"
	} else if r.conc {
		id = r.newID()
	}
	res, err := r.call(ctx, key, op, n, -1, id, nil)
	if err != nil {
		return r.failTry(ctx, key, n, err)
	}
	d, err := decision(res)
	if err != nil {
		return d, err
	}
	if d.Allowed && id != "" {
		r.hold(key, id, n)
	}
	return d, nil
}

// Members appends each limit's own state for key, as seen by a request of
// n permits, in the order of the specs (see limiters.Members): what a
// server advertises of each limit (package server asks for it after each
// decision, which costs one more round trip). It takes nothing. While
// Redis is unreachable it fails, and the server advertises the limits as
// one.
func (r *Repository) Members(ctx context.Context, key string, n int, into []limiters.Member) ([]limiters.Member, error) {
	checkN(n)
	res, err := r.call(ctx, key, "members", n, -1, "", nil)
	if err != nil {
		return into, err
	}
	v, _, err := ints(res)
	if err != nil || len(v) != 5*len(r.limits) {
		return into, fmt.Errorf("redisrepo: bad members reply %v: %v", res, err)
	}
	dur := func(x int64) time.Duration {
		if x < 0 {
			return -1
		}
		return us(x)
	}
	for i, l := range r.limits {
		w := v[5*i : 5*i+5]
		into = append(into, limiters.Member{Algorithm: algNames[l.code], Limit: int(w[0]), Remaining: int(max(w[1], 0)),
			ResetAfter: us(max(w[2], 0)), Wait: dur(w[3]), Next: dur(w[4])})
	}
	return into, nil
}

// algNames are the algorithms' names by their codes.
var algNames = map[string]string{
	codeGCRA: limiters.AlgGCRA, codeTokenBucket: limiters.AlgTokenBucket, codeLeakyBucket: limiters.AlgLeakyBucket,
	codeFixedWindow: limiters.AlgFixedWindow, codeSlidingWindow: limiters.AlgSlidingWindow,
	codeSlidingLog: limiters.AlgSlidingLog, codeConcurrency: limiters.AlgConcurrency,
}

// failTry applies the fail mode to a TryAcquire that could not reach Redis.
func (r *Repository) failTry(ctx context.Context, key string, n int, err error) (limiters.Decision, error) {
	if cerr := ctx.Err(); cerr != nil {
		return limiters.Decision{}, cerr
	}
	if !errors.Is(err, ErrUnavailable) {
		return limiters.Decision{}, err
	}
	switch r.cfg.fail {
	case FailOpen:
		r.observe(Event{Kind: EventFailOpen, Err: err})
		return limiters.Decision{Allowed: true, Limit: r.maxN, Remaining: r.maxN - n}, nil
	case FailLocal:
		r.observe(Event{Kind: EventFailLocal, Err: err})
		if n == 0 {
			return r.local.Peek(ctx, key)
		}
		d, lerr := r.local.TryAcquire(ctx, key, n)
		if lerr == nil && d.Allowed && r.conc {
			r.hold(key, "", n)
		}
		return d, lerr
	}
	r.observe(Event{Kind: EventFailClosed, Err: err})
	return limiters.Decision{}, err
}

// failAcquire applies the fail mode to an Acquire that could not reach
// Redis.
func (r *Repository) failAcquire(ctx context.Context, key string, n int, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if !errors.Is(err, ErrUnavailable) {
		return err
	}
	switch r.cfg.fail {
	case FailOpen:
		r.observe(Event{Kind: EventFailOpen, Err: err})
		return nil
	case FailLocal:
		r.observe(Event{Kind: EventFailLocal, Err: err})
		if lerr := r.local.Acquire(ctx, key, n); lerr != nil {
			return lerr
		}
		if r.conc {
			r.hold(key, "", n)
		}
		return nil
	}
	r.observe(Event{Kind: EventFailClosed, Err: err})
	return err
}

// Acquire waits until n permits are granted for key. It fails at once with
// ctx's error if ctx is done, with limiters.ErrExceedsLimit for n above the
// limit, and with a *limiters.RejectedError (whose Cause is
// context.DeadlineExceeded) when the permits would come after ctx's
// deadline.
//
// For the bucket algorithms (token bucket, GCRA, leaky bucket, and chains
// of them only) the script reserves the permits at the earliest time they
// can be granted, so waiters are served in reservation order whichever
// replica they are on, and Acquire sleeps until then. A caller that gives
// up (ctx done, or Close) cancels its reservation: the permits are given
// back if it is still the latest reservation on the key, and otherwise left
// in place (reservations made after it keep their times) to expire with the
// key. The window algorithms and concurrency limits cannot reserve: Acquire
// retries when the script says the permits could be free (windows), or when
// a permit is released in this process and at least every lease/8 otherwise
// (concurrency); it is not FIFO across replicas.
func (r *Repository) Acquire(ctx context.Context, key string, n int) error {
	checkN(n)
	if err := ctx.Err(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if n > r.maxN {
		return limiters.ErrExceedsLimit
	}
	if r.q != nil {
		return r.q.acquire(ctx, key, n)
	}
	if r.rate {
		return r.reserve(ctx, key, n)
	}
	return r.poll(ctx, key, n)
}

func rejected(wait time.Duration) error {
	return &limiters.RejectedError{RetryAfter: wait, Reason: "would wait past the context deadline",
		Cause: context.DeadlineExceeded}
}

func (r *Repository) reserve(ctx context.Context, key string, n int) error {
	maxWait := int64(-1)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(dl).Microseconds(), 0)
	}
	res, err := r.call(ctx, key, "reserve", n, maxWait, "", nil)
	if err != nil {
		return r.failAcquire(ctx, key, n, err)
	}
	v, tokens, err := ints(res)
	if err != nil || len(v) < 2 {
		return fmt.Errorf("redisrepo: bad reservation reply %v: %v", res, err)
	}
	wait := us(v[1])
	switch v[0] {
	case 0:
		return rejected(wait)
	case 2:
		return limiters.ErrQueueFull
	case 3:
		return limiters.ErrExceedsLimit
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var gave error
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		gave = ctx.Err()
	case <-r.stop:
		gave = limiters.ErrClosed
	}
	r.cancel(ctx, key, n, tokens)
	return gave
}

// cancel gives back a reservation that is still the latest on key, within
// the round-trip timeout even though ctx is done.
func (r *Repository) cancel(ctx context.Context, key string, n int, tokens []string) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.timeout)
	defer stop()
	r.call(cctx, key, "cancel", n, -1, "", tokens) // on failure the reservation expires with the key
}

// poll is Acquire for limits that cannot reserve.
func (r *Repository) poll(ctx context.Context, key string, n int) error {
	for {
		r.mu.Lock()
		rel := r.released
		r.mu.Unlock()
		id := ""
		if r.conc {
			id = r.newID()
		}
		res, err := r.call(ctx, key, "try", n, -1, id, nil)
		if err != nil {
			return r.failAcquire(ctx, key, n, err)
		}
		v, _, err := ints(res)
		if err != nil || len(v) != 5 {
			return fmt.Errorf("redisrepo: bad decision reply %v: %v", res, err)
		}
		if v[0] == 1 {
			if id != "" {
				r.hold(key, id, n)
			}
			return nil
		}
		wait := us(v[4])
		if wait == 0 { // a concurrency limit: no time is known
			wait = max(r.cfg.lease/8, time.Millisecond)
		} else if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return rejected(wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-rel:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-r.stop:
			t.Stop()
			return limiters.ErrClosed
		}
		t.Stop()
	}
}

func (r *Repository) newID() string {
	return r.id + "." + strconv.FormatUint(r.seq.Add(1), 36)
}

// hold records n permits of key held under lease id ("" for local permits).
func (r *Repository) hold(key, id string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for j := 1; j <= n; j++ {
		m := ""
		if id != "" {
			m = id + ":" + strconv.Itoa(j)
		}
		r.held[key] = append(r.held[key], m)
	}
}

// Release gives back n of the concurrency permits this repository holds
// for key: exactly its own leases, the latest first. Releasing more than it
// holds (a double Release) gives back what it holds and is otherwise
// harmless. Limits other than concurrency hold nothing: Release does
// nothing. ctx's cancellation is ignored, so that permits go back even when
// the request that took them was cancelled; if Redis cannot be reached the
// leases expire by themselves.
func (r *Repository) Release(ctx context.Context, key string, n int) error {
	checkN(n)
	if n == 0 || !r.conc {
		return nil
	}
	r.mu.Lock()
	h := r.held[key]
	k := min(n, len(h))
	give := h[len(h)-k:]
	if k == len(h) {
		delete(r.held, key)
	} else {
		r.held[key] = h[:len(h)-k]
	}
	r.mu.Unlock()
	defer r.wakeWaiters()
	var members []string
	local := 0
	for _, m := range give {
		if m == "" {
			local++
		} else {
			members = append(members, m)
		}
	}
	if local > 0 {
		r.local.Release(ctx, key, local)
	}
	if len(members) == 0 {
		return nil
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.timeout)
	defer stop()
	if _, err := r.call(cctx, key, "release", 0, -1, "", members); err != nil && r.cfg.fail == FailClosed {
		return err
	}
	return nil
}

// wakeWaiters tells this process's waiters for a concurrency permit that
// one came back.
func (r *Repository) wakeWaiters() {
	r.mu.Lock()
	close(r.released)
	r.released = make(chan struct{})
	r.mu.Unlock()
}

// Peek reports key's state as TryAcquire(ctx, key, 0) does, spending
// nothing and creating no key.
func (r *Repository) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	return r.TryAcquire(ctx, key, 0)
}

// Reset deletes key's state in Redis (and in the FailLocal limiter): its
// next call finds full limits. Concurrency permits held on it are forgotten
// (a later Release of them is harmless). Waiters in Acquire keep their
// reservations' times.
func (r *Repository) Reset(ctx context.Context, key string) error {
	r.mu.Lock()
	delete(r.held, key)
	r.mu.Unlock()
	if r.local != nil {
		r.local.Reset(ctx, key)
	}
	keys := r.keys(key)
	if r.q != nil {
		r.q.forget(key)
		keys = append(keys, r.q.key(key))
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	if err := r.rc.Del(ctx, keys...).Err(); err != nil {
		return unavailable(err, r.cfg.timeout)
	}
	return nil
}

// Close stops the batcher and the lease renewer and waits for them; calls
// in flight and waiters fail with limiters.ErrClosed. Concurrency permits
// still held are not renewed any more and expire after the lease. It does
// not close the Redis client. It is idempotent.
func (r *Repository) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.wg.Wait()
		r.b.close()
		if r.local != nil {
			r.local.Close()
		}
		if r.own {
			r.rc.Close()
		}
	})
	return nil
}
