// Package service is the rate-limit service that cmd/ratelimitd runs: an
// http.Handler deciding checks against a policy file (server.Policy), in
// memory or in Redis. It lives here, in the library's module, so that the
// service's Go client (repository/ratelimitd) is tested against it; the
// binary, which adds Prometheus, is a module of its own.
package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/repository/ratelimitd"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

// Config configures a Service.
type Config struct {
	// PolicyFile is the policy (server.LoadPolicy's format), read by New
	// and by every Reload. When it is empty, Policy (YAML) is used instead.
	PolicyFile string
	Policy     []byte
	// Redis, when set, holds the limits and the idempotency records;
	// otherwise they live in memory.
	Redis redis.UniversalClient
	// FailMode is the Redis repositories' failure mode (default FailClosed:
	// a check answers 503 while Redis is unreachable).
	FailMode redisrepo.FailMode
	// AdminToken is the bearer token of DELETE /v1/state/{key} and POST
	// /v1/policies/reload; empty disables them.
	AdminToken string
	// IdempotencyTTL is how long a check with an Idempotency-Key header is
	// remembered (default 24h).
	IdempotencyTTL time.Duration
	// Logger gets one line per reload and per Redis failure-mode or breaker
	// change, none per request (default slog.Default()).
	Logger *slog.Logger
	// Observer, when set, is told of every decision (metrics).
	Observer func(server.Event)
	// RedisObserver, when set, is told of the Redis repositories' events.
	RedisObserver func(redisrepo.Event)
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
}

// Service decides checks; see Handler for its API. Reload swaps its policy;
// Close releases its limits.
type Service struct {
	cfg  Config
	log  *slog.Logger
	cur  atomic.Pointer[generation]
	idem idempotency

	reloadMu sync.Mutex
	repos    map[string]*ruleRepo // by identity; guarded by reloadMu
	failing  atomic.Bool          // Redis is failing (logged once per change)
}

// generation is one loaded policy.
type generation struct {
	mu     sync.RWMutex // held for reading by each check; Lock marks it closed
	closed bool
	rl     *server.RateLimiter
	mw     http.Handler // rl's middleware in front of admit
	policy *server.Policy
	info   PolicyInfo
	repos  []*ruleRepo
	holds  bool // some rule's limits hold permits (a concurrency limit)
}

// PolicyInfo is GET /v1/policies' answer: the policy in force.
type PolicyInfo struct {
	File     string              `json:"file"`
	SHA256   string              `json:"sha256"`
	LoadedAt time.Time           `json:"loaded_at"`
	Backend  string              `json:"backend"`
	Plans    map[string]planView `json:"plans"`
	Default  string              `json:"default_plan"`
}

type planView struct {
	Rules map[string]ruleView `json:"rules"`
}

type ruleView struct {
	Limits   []limiters.Spec `json:"limits,omitempty"`
	CostCaps []limiters.Spec `json:"cost_caps,omitempty"`
	Action   string          `json:"action"`
	MaxDelay float64         `json:"max_delay,omitempty"` // seconds
}

// ruleRepo is one rule's limits (or cost caps): a repository the service
// keeps across reloads while a rule with the same limits exists, so that
// reloading loses no state.
type ruleRepo struct {
	repo  repository.Repository
	admin repository.Admin
	redis *redisrepo.Repository // the same repository in Redis; nil in memory
	holds bool                  // a concurrency limit: permits are held
}

// view is what a Policy gets: its Close does nothing, since the service
// decides when a ruleRepo goes, and its TryAcquire joins the batch its ctx
// carries, if any (see gather).
type view struct {
	repository.Repository
	redis *redisrepo.Repository
}

func (view) Close() error { return nil }

// Members reports each limit's state for key, for the headers and the
// JSON answer to list every limit on its own.
func (v view) Members(ctx context.Context, key string, n int, into []limiters.Member) ([]limiters.Member, error) {
	if v.redis != nil {
		if _, ok := ctx.Value(slotKey{}).(slot); ok {
			// In a batch, the decisions are one script call per rule,
			// and a look after it would see the whole batch's effect:
			// the limits are advertised as one.
			return into, errNoMembers
		}
		return v.redis.Members(ctx, key, n, into)
	}
	m, ok := v.Repository.(*repository.Memory)
	if !ok {
		return into, errNoMembers
	}
	ms, err := m.Members(key, n, into)
	if err != nil {
		return into, limiters.ErrClosed
	}
	return ms, nil
}

// errNoMembers: the repository cannot report its limits one by one.
var errNoMembers = errors.New("service: the limits are decided as one")

// TryAcquire waits for the round of the batch ctx carries, when there is
// one and the limits are in Redis; otherwise it asks the repository.
func (v view) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	if sl, ok := ctx.Value(slotKey{}).(slot); ok && v.redis != nil {
		return sl.g.try(sl.idx, v.redis, key, n)
	}
	return v.Repository.TryAcquire(ctx, key, n)
}

// The headers through which a check reaches the policy's extractors.
const (
	hdrKey  = "Ratelimitd-Key"
	hdrPlan = "Ratelimitd-Plan"
	hdrCost = "Ratelimitd-Cost"
)

// maxIdempotencyKeys bounds the answers kept in memory for Idempotency-Key
// retries; beyond it the oldest are forgotten first.
const maxIdempotencyKeys = 1 << 16

// New loads cfg.PolicyFile and returns a Service deciding by it.
func New(cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	s := &Service{cfg: cfg, log: cfg.Logger, repos: map[string]*ruleRepo{}}
	if cfg.Redis != nil {
		s.idem = &redisIdem{client: cfg.Redis, ttl: cfg.IdempotencyTTL}
	} else {
		s.idem = newMemoryIdem(cfg.IdempotencyTTL, maxIdempotencyKeys)
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the policy file again and, if it is valid, puts it in force;
// a bad file changes nothing and its error (a *server.PolicyError, with the
// line and column) is returned. Checks in flight finish under the old
// policy. Each reload is logged.
func (s *Service) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	g, next, err := s.load()
	if err != nil {
		for id, r := range next {
			if s.repos[id] != r {
				_ = r.repo.Close()
			}
		}
		if s.cur.Load() == nil {
			s.log.Error("policy load failed", "file", s.cfg.PolicyFile, "err", err)
		} else {
			s.log.Error("policy reload failed; the previous policy stays in force", "file", s.cfg.PolicyFile, "err", err)
		}
		return err
	}
	old := s.cur.Swap(g)
	if old != nil {
		old.mu.Lock() // waits for the checks in flight under it
		old.closed = true
		old.mu.Unlock()
		_ = old.policy.Close()
	}
	for id, r := range s.repos {
		if next[id] != r {
			_ = r.repo.Close()
		}
	}
	s.repos = next
	s.log.Info("policy loaded", "file", g.info.File, "sha256", g.info.SHA256, "plans", len(g.info.Plans), "rules", len(next))
	return nil
}

// load builds a generation from the policy file, with the repositories it
// uses (kept from the current ones where the limits are the same).
func (s *Service) load() (*generation, map[string]*ruleRepo, error) {
	next := map[string]*ruleRepo{}
	path, data, format := s.cfg.PolicyFile, s.cfg.Policy, "yaml"
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, next, fmt.Errorf("service: policy: %w", err)
		}
		data, err = io.ReadAll(io.LimitReader(f, server.MaxPolicySize+1))
		f.Close()
		if err != nil {
			return nil, next, fmt.Errorf("service: policy: %w", err)
		}
		if strings.EqualFold(filepath.Ext(path), ".json") {
			format = "json"
		}
	}
	g := &generation{}
	seen := map[string]int{}
	var pcfg server.PolicyConfig
	var err error
	storage := func(specs []limiters.Spec) (repository.Repository, error) {
		r, err := s.ruleRepo(specs, seen, next, pcfg)
		if err != nil {
			return nil, err
		}
		g.repos = append(g.repos, r)
		g.holds = g.holds || r.holds
		return view{r.repo, r.redis}, nil
	}
	pcfg, err = server.DecodePolicyConfig(data, format)
	if err == nil {
		g.policy, err = server.ParsePolicy(data, format,
			server.WithStorage(storage),
			server.WithPolicyDir(filepath.Dir(path)),
			server.WithPlan(func(r keyextract.Request) string { return r.Header(hdrPlan) }))
	}
	if err != nil {
		var pe *server.PolicyError
		if errors.As(err, &pe) {
			pe.File = path
		}
		return nil, next, err
	}
	g.rl = server.New(nil,
		server.WithPolicy(g.policy),
		server.WithKey(keyextract.Header(hdrKey)),
		server.WithAnonymousKey(""),
		server.WithCost(func(r keyextract.Request) int { n, _ := strconv.Atoi(r.Header(hdrCost)); return n }),
		server.WithFailOpen(false),
		server.WithObserver(s.observe))
	g.mw = g.rl.Middleware(admit)
	sum := sha256.Sum256(data)
	if path == "" {
		path = "(built in)"
	}
	g.info = PolicyInfo{File: path, SHA256: hex.EncodeToString(sum[:]), LoadedAt: time.Now().UTC(), Backend: s.backend(), Default: pcfg.DefaultPlan, Plans: views(pcfg)}
	return g, next, nil
}

func (s *Service) backend() string {
	if s.cfg.Redis != nil {
		return "redis"
	}
	return "memory"
}

// views describes cfg for GET /v1/policies, durations in seconds.
func views(cfg server.PolicyConfig) map[string]planView {
	out := make(map[string]planView, len(cfg.Plans))
	rv := func(r server.Rule) ruleView {
		a := string(r.Action)
		if a == "" {
			a = string(server.Block)
		}
		return ruleView{Limits: r.Limits, CostCaps: r.CostCaps, Action: a, MaxDelay: r.MaxDelay.Seconds()}
	}
	for name, p := range cfg.Plans {
		pv := planView{Rules: map[string]ruleView{}}
		for pattern, r := range p.Endpoints {
			pv.Rules[pattern] = rv(r)
		}
		if p.Default != nil {
			pv.Rules["default"] = rv(*p.Default)
		}
		out[name] = pv
	}
	return out
}

// ruleRepo returns the repository of one set of limits: the current one
// with the same identity, or a new one. A set's identity is a hash of its
// specs and how many sets with the same specs the policy built before it
// (NewPolicy builds them in a fixed, sorted order), which is also its key
// prefix in Redis.
func (s *Service) ruleRepo(specs []limiters.Spec, seen map[string]int, next map[string]*ruleRepo, cfg server.PolicyConfig) (*ruleRepo, error) {
	b, err := json.Marshal(specs)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:8])
	id := h + "." + strconv.Itoa(seen[h])
	seen[h]++
	if r := s.repos[id]; r != nil {
		next[id] = r
		return r, nil
	}
	r := &ruleRepo{holds: slices.ContainsFunc(specs, func(sp limiters.Spec) bool { return sp.Algorithm == limiters.AlgConcurrency })}
	if s.cfg.Redis != nil {
		rr, err := redisrepo.NewChain(s.cfg.Redis, specs,
			redisrepo.WithPrefix("ratelimitd:"+id+":"),
			redisrepo.WithFailMode(s.cfg.FailMode),
			redisrepo.WithBatch(ratelimitd.MaxBatch),
			redisrepo.WithObserver(s.redisEvent))
		if err != nil {
			return nil, err
		}
		r.repo, r.admin, r.redis = rr, rr, rr
	} else {
		maxKeys := cfg.MaxKeys
		if maxKeys == 0 {
			maxKeys = server.DefaultMaxKeys
		}
		m := repository.NewMemory(func(string) limiters.Limiter {
			ls := make([]limiters.Limiter, len(specs))
			for i, sp := range specs {
				ls[i], _ = sp.New() // NewPolicy validated every spec
			}
			if len(ls) == 1 {
				return ls[0]
			}
			return limiters.Chain(ls...)
		}, repository.WithMaxKeys(maxKeys), repository.WithIdleTimeout(cfg.IdleTimeout))
		r.repo, r.admin = m, m
	}
	next[id] = r
	return r, nil
}

// observe is the RateLimiter's observer: it records the check's outcome
// and passes the event on.
func (s *Service) observe(ev server.Event) {
	if ev.Request != nil {
		if o, ok := ev.Request.Context().Value(outcomeKey{}).(*outcome); ok && !o.seen && ev.Kind != server.EventNearLimit {
			o.seen, o.ev = true, ev
		}
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer(ev)
	}
}

// redisEvent logs the Redis repositories' changes: breaker states, and the
// first failure-mode decision after Redis was healthy.
func (s *Service) redisEvent(ev redisrepo.Event) {
	switch ev.Kind {
	case redisrepo.EventBreaker:
		s.log.Warn("redis circuit breaker", "state", ev.State)
		if ev.State == "closed" && s.failing.Swap(false) {
			s.log.Info("redis reachable again; checks are decided in Redis")
		}
	default:
		if !s.failing.Swap(true) {
			s.log.Warn("redis unreachable; checks follow the fail mode", "fail_mode", s.cfg.FailMode.String(), "err", ev.Err)
		}
	}
	if s.cfg.RedisObserver != nil {
		s.cfg.RedisObserver(ev)
	}
}

// Ready reports whether the service can decide: Redis answers a PING when
// it is used.
func (s *Service) Ready(ctx context.Context) error {
	if s.cfg.Redis == nil {
		return nil
	}
	return s.cfg.Redis.Ping(ctx).Err()
}

// Close releases the policy and its limits. Checks must have finished.
func (s *Service) Close() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	var err error
	if g := s.cur.Swap(nil); g != nil {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		err = g.policy.Close()
	}
	for _, r := range s.repos {
		err = errors.Join(err, r.repo.Close())
	}
	s.repos = nil
	return errors.Join(err, s.idem.close())
}

// acquire returns the current generation, read-locked; release it with
// g.mu.RUnlock.
func (s *Service) acquire() *generation {
	for {
		g := s.cur.Load()
		if g == nil {
			return nil
		}
		g.mu.RLock()
		if !g.closed {
			return g
		}
		g.mu.RUnlock()
	}
}
