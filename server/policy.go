package server

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle/internal/clip"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// Action is what a rule does with a request over its limits.
type Action string

const (
	// Block rejects it with 429 (the default, also written ""). A
	// leaky bucket's queue still holds a request it has room for, until
	// its slot: that is what the bucket is (see the package doc).
	Block Action = "block"
	// Delay holds it until permits free up, for at most the rule's
	// MaxDelay, and rejects it with 429 if that would take longer: a
	// slowdown instead of a refusal.
	Delay Action = "delay"
	// Shadow admits it and reports it as EventShadowRejected: a dry run, for
	// rolling out limits safely. Shadow rules write no rate-limit fields.
	Shadow Action = "shadow"
)

// DefaultMaxKeys bounds a Policy's limiters when its config sets no MaxKeys.
const DefaultMaxKeys = 1 << 20

// PolicyConfig is a Policy as data: what NewPolicy compiles and policy files
// hold (see LoadPolicy for the file format). Limits are limiters.Spec values.
type PolicyConfig struct {
	// Plans maps plan names ("free", "pro", "enterprise") to their rules.
	Plans map[string]Plan `json:"plans" yaml:"plans"`
	// DefaultPlan is the plan of a request whose plan function (WithPlan)
	// returns "" or a plan not in Plans. It must name a plan; it may be
	// empty only if there is exactly one plan, which is then the default.
	DefaultPlan string `json:"default_plan" yaml:"default_plan"`
	// Allow lists IP addresses and CIDR prefixes that bypass every limit.
	Allow []string `json:"allow" yaml:"allow"`
	// Block lists IP addresses and CIDR prefixes answered with 403
	// Forbidden. Block wins over Allow.
	Block []string `json:"block" yaml:"block"`
	// AllowFile and BlockFile name files of more such entries, one a line
	// (ReadPrefixes' format), read each time the policy is built: the way
	// to lists of any length, which a policy file's size bound would
	// refuse. A relative path starts from the policy file's directory
	// (WithPolicyDir). WithAllowList and WithBlockList take lists from
	// elsewhere.
	AllowFile string `json:"allow_file" yaml:"allow_file"`
	BlockFile string `json:"block_file" yaml:"block_file"`
	// MaxKeys bounds how many limiters the policy holds at once in its
	// default storage (one per caller and rule for its limits, and one
	// more for its cost caps); DefaultMaxKeys when zero. See
	// repository.WithMaxKeys for what happens beyond it. WithStorage
	// ignores it.
	MaxKeys int `json:"max_keys" yaml:"max_keys"`
	// IdleTimeout forgets a caller's limiter once it is full again and has
	// not been used for this long (repository.WithIdleTimeout); zero keeps
	// limiters until MaxKeys evicts them. WithStorage ignores it.
	IdleTimeout time.Duration `json:"idle_timeout" yaml:"idle_timeout"`
}

// Plan is one plan's rules: a rule per endpoint pattern, and a default rule
// for the endpoints none of them matches.
type Plan struct {
	// Endpoints maps http.ServeMux patterns (Go 1.22 syntax: "POST
	// /api/ask", "GET /items/{id}", "/static/") to rules. When several
	// match a request, the most specific wins, as ServeMux decides.
	Endpoints map[string]Rule `json:"endpoints" yaml:"endpoints"`
	// Default applies to requests no endpoint matches. Without it those
	// requests are not limited.
	Default *Rule `json:"default" yaml:"default"`
}

// Rule is the limits on one endpoint (or a plan's default), per caller.
type Rule struct {
	// Limits must all admit a request, each charged the request's weight
	// (WithCost, default 1), all or nothing: e.g. 10 per minute and 1000
	// per day and 5 in flight (algorithm concurrency, given back when the
	// handler returns).
	Limits []limiters.Spec `json:"limits" yaml:"limits"`
	// CostCaps are charged the request's cost (WithCapCost), e.g. LLM
	// tokens or cents per hour and per day, separately from Limits. A
	// request costing more than a cap is rejected with 429.
	CostCaps []limiters.Spec `json:"cost_caps" yaml:"cost_caps"`
	// Action is what happens to a request over a limit: Block (default),
	// Delay or Shadow.
	Action Action `json:"action" yaml:"action"`
	// MaxDelay bounds the wait of the Delay action; it must be positive
	// with Delay and zero otherwise.
	MaxDelay time.Duration `json:"max_delay" yaml:"max_delay"`
	// Problem is the problem type of the rule's rejections, by its name in
	// the IETF draft: "quota-exceeded" (the default, also written ""),
	// "temporary-reduced-capacity" (answered with 503) or
	// "abnormal-usage-detected". See WithProblemType to decide per request.
	Problem string `json:"problem" yaml:"problem"`
}

// Policy chooses limits per request: it resolves the request's plan, matches
// the endpoint against the plan's patterns, and charges the caller's
// limiters for that rule. Close releases its limiters. Use it through
// New(nil, WithPolicy(p)).Middleware.
//
// Each rule (an endpoint's, or a plan's default) has its own limits per
// caller. A rule's Limits are decided together, all or nothing (by default
// one limiters.Chain per caller), and given back after the handler when
// they hold permits (limiters.HoldsPermits: a concurrency limit); its
// CostCaps are a second set, charged after the Limits admitted the request,
// so a request refused by a cost cap still counts as a request.
//
// Where the limits live is the storage's choice (WithStorage): by default
// one in-memory repository for the whole policy, bounded by MaxKeys.
//
// A Policy is safe for concurrent use.
type Policy struct {
	plans       map[string]*plan
	defaultPlan *plan
	allow       prefixTable
	block       prefixTable
	allowSrc    []PrefixSource // WithAllowList's
	blockSrc    []PrefixSource // WithBlockList's
	dir         string         // WithPolicyDir's
	sets        []*limitSet    // every rule's, in the order built

	storage     func(specs []limiters.Spec) (repository.Repository, error)
	mem         *memoryStore // the default storage; nil with WithStorage
	planOf      func(keyextract.Request) string
	capCost     func(keyextract.Request) int
	clientIP    keyextract.Extractor
	chargeAfter bool // WithChargeAfter
}

type plan struct {
	name string
	mux  *http.ServeMux
	def  *rule
}

// rule is a compiled Rule.
type rule struct {
	endpoint string    // "" for a plan's default
	limits   *limitSet // nil when the rule has no Limits
	caps     *limitSet // nil when the rule has no CostCaps
	action   Action
	maxDelay time.Duration
	problem  string // a ProblemType constant
}

// ServeHTTP is never called: a rule is registered in its plan's ServeMux
// only so that the mux can say which pattern matches.
func (*rule) ServeHTTP(http.ResponseWriter, *http.Request) {}

// limitSet is a rule's Limits, or its CostCaps, for every caller: one
// repository, keyed by the caller, that decides them all at once.
type limitSet struct {
	repo      repository.Repository
	holds     bool      // whether granted permits stay taken until Release
	name      string    // Event.Limit
	ads       []limitAd // what each spec advertises, in order
	aggregate string    // the policy name of all of them as one
}

// PolicyOption configures a Policy.
type PolicyOption func(*Policy)

// WithPlan sets how a request's plan is found, e.g. by looking its API key
// up. A request for which f returns "" or an unknown plan gets the config's
// DefaultPlan. Without WithPlan, or with a nil f, every request gets
// DefaultPlan.
func WithPlan(f func(keyextract.Request) string) PolicyOption {
	return func(p *Policy) { p.planOf = f }
}

// WithCapCost sets a request's cost against its rule's cost caps (LLM
// tokens, cents). Without it a request's cost is its weight (WithCost). A
// cost of zero or less charges nothing. A nil f means the default.
func WithCapCost(f func(keyextract.Request) int) PolicyOption {
	return func(p *Policy) { p.capCost = f }
}

// WithClientIP sets how the client address that Allow and Block are
// matched against is found. The default is keyextract.IP() with no trusted
// proxies; behind proxies pass keyextract.IP(yourProxies...), as for WithKey.
// An IPv6 client is its /64 (as keyextract.IP keys it): it is allowed only
// if an Allow prefix holds all of that /64, and blocked if a Block prefix
// overlaps it. A nil e panics.
func WithClientIP(e keyextract.Extractor) PolicyOption {
	if e == nil {
		panic("server: WithClientIP: nil extractor")
	}
	return func(p *Policy) { p.clientIP = e }
}

// WithChargeAfter lets handlers charge their rule's cost caps once they
// know what a request cost, with ChargeCost: the request that reaches the
// handler of a rule with CostCaps then carries what ChargeCost needs in its
// context. It costs the middleware a shallow copy of each such request
// (http.Request.WithContext), so it is off by default.
func WithChargeAfter() PolicyOption { return func(p *Policy) { p.chargeAfter = true } }

// WithStorage sets where a policy's limits live, for example in a store
// that a fleet of servers shares. f is called while the policy is
// built: once for each rule's Limits, and once more for its CostCaps if it
// has any, with those specs (already validated). It returns one repository,
// keyed by the caller's key, that decides all of them at once, all or
// nothing, per key: TryAcquire grants n of every spec or none, Release gives
// n of each back. An error fails NewPolicy. The policy closes the
// repositories f returned whenever it is closed (so their Close must be
// idempotent, as the Policy's is), or when NewPolicy fails.
//
// The default keeps them in memory: one repository.Memory for the whole
// policy, bounded by the config's MaxKeys and IdleTimeout, whose limiter for
// a caller is a limiters.Chain of each spec's New(); a nil f means that
// default.
//
// A repository that also has the method
//
//	Members(ctx context.Context, key string, n int, into []limiters.Member) ([]limiters.Member, error)
//
// (as redisrepo's has) reports each spec's state after a decision, in the
// specs' order, and the Middleware advertises each limit on its own. Without
// it, or when it fails, a set's limits are advertised as one item, from the
// repository's Decision.
func WithStorage(f func(specs []limiters.Spec) (repository.Repository, error)) PolicyOption {
	return func(p *Policy) { p.storage = f }
}

// PolicyError reports what is wrong with a policy: where (Path, a field
// path such as plans.pro.endpoints["POST /api/ask"].limits[1], and, for a
// policy file, File, Line and Column) and what (Err).
type PolicyError struct {
	File         string
	Line, Column int // 1-based; zero when unknown
	Path         string
	Err          error

	path []seg // Path as segments, to find its position in a file
}

func (e *PolicyError) Error() string {
	var b strings.Builder
	b.WriteString("server: policy")
	if e.File != "" {
		b.WriteString(" ")
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *PolicyError) Unwrap() error { return e.Err }

// seg is one step of a field path: a field name or map key, or a list
// index.
type seg struct {
	key     string
	index   int
	isIndex bool
}

func name(k string) seg { return seg{key: k} }
func at(i int) seg      { return seg{index: i, isIndex: true} }

// pathError builds a *PolicyError for a field path.
func pathError(path []seg, err error) *PolicyError {
	return &PolicyError{Path: joinPath(path), Err: err, path: path}
}

// joinPath writes a path as plans.pro.endpoints["POST /x"].limits[1]: a
// key that is not a bare name is quoted (and truncated) in brackets.
func joinPath(path []seg) string {
	var b strings.Builder
	for i, s := range path {
		switch {
		case s.isIndex:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case bareName(s.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			b.WriteString("[" + clip.Quote(s.key) + "]")
		}
	}
	return b.String()
}

// bareName reports whether k can be written unquoted in a path.
func bareName(k string) bool {
	if k == "" || len(k) > clip.Max {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z') {
			return false
		}
	}
	return true
}

// NewPolicy compiles cfg into a Policy, or returns a *PolicyError naming
// the first field that is wrong (plans, endpoints and lists are checked in
// sorted order, so the error is always the same one). Every limit is
// validated and built once here, so that no request can find a limit that
// fails to build. Nothing is half built: on error there is no Policy.
func NewPolicy(cfg PolicyConfig, opts ...PolicyOption) (*Policy, error) {
	p := &Policy{plans: make(map[string]*plan, len(cfg.Plans)), clientIP: keyextract.IP()}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("server: NewPolicy: option %d of %d is nil", i+1, len(opts)))
		}
		o(p)
	}
	if err := p.compile(cfg); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Policy) compile(cfg PolicyConfig) error {
	if len(cfg.Plans) == 0 {
		return pathError([]seg{name("plans")}, errors.New("no plans"))
	}
	if cfg.MaxKeys < 0 {
		return pathError([]seg{name("max_keys")}, fmt.Errorf("must not be negative, got %d", cfg.MaxKeys))
	}
	if cfg.IdleTimeout < 0 {
		return pathError([]seg{name("idle_timeout")}, fmt.Errorf("must not be negative, got %v", cfg.IdleTimeout))
	}
	if p.storage == nil {
		p.mem = newMemoryStore(cfg.MaxKeys, cfg.IdleTimeout)
		p.storage = p.mem.add
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Plans)) {
		pl, err := p.compilePlan(name, cfg.Plans[name])
		if err != nil {
			return err
		}
		p.plans[name] = pl
	}
	switch {
	case cfg.DefaultPlan != "":
		p.defaultPlan = p.plans[cfg.DefaultPlan]
		if p.defaultPlan == nil {
			return pathError([]seg{name("default_plan")}, fmt.Errorf("no plan named %s", clip.Quote(cfg.DefaultPlan)))
		}
	case len(p.plans) == 1:
		for _, pl := range p.plans {
			p.defaultPlan = pl
		}
	default:
		return pathError([]seg{name("default_plan")}, errors.New("missing: with several plans, name the one for requests without a plan"))
	}
	var err error
	if p.allow, err = p.buildList("allow", cfg.Allow, "allow_file", cfg.AllowFile, p.allowSrc); err != nil {
		return err
	}
	p.block, err = p.buildList("block", cfg.Block, "block_file", cfg.BlockFile, p.blockSrc)
	return err
}

func (p *Policy) compilePlan(planName string, cp Plan) (*plan, error) {
	path := []seg{name("plans"), name(planName)}
	if planName == "" {
		return nil, pathError(path, errors.New("a plan needs a name"))
	}
	pl := &plan{name: planName, mux: http.NewServeMux()}
	for _, pattern := range slices.Sorted(maps.Keys(cp.Endpoints)) {
		epath := append(slices.Clip(path), name("endpoints"), name(pattern))
		r, err := p.compileRule(epath, pattern, cp.Endpoints[pattern])
		if err != nil {
			return nil, err
		}
		if err := register(pl.mux, pattern, r); err != nil {
			return nil, pathError(epath, err)
		}
	}
	if cp.Default != nil {
		r, err := p.compileRule(append(slices.Clip(path), name("default")), "", *cp.Default)
		if err != nil {
			return nil, err
		}
		pl.def = r
	}
	return pl, nil
}

// register adds pattern to mux, turning ServeMux's panics on an invalid or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string, r *rule) (err error) {
	if strings.TrimSpace(pattern) == "" {
		return errors.New("empty endpoint pattern")
	}
	defer func() {
		if v := recover(); v != nil {
			msg := fmt.Sprint(v)
			msg = strings.TrimPrefix(msg, "http: ")
			err = errors.New("invalid endpoint pattern: " + msg)
		}
	}()
	mux.Handle(pattern, r)
	return nil
}

func (p *Policy) compileRule(path []seg, endpoint string, cr Rule) (*rule, error) {
	r := &rule{endpoint: endpoint, action: cr.Action, maxDelay: cr.MaxDelay}
	if r.action == "" {
		r.action = Block
	}
	switch r.action {
	case Block, Shadow:
		if cr.MaxDelay != 0 {
			return nil, pathError(append(path, name("max_delay")), fmt.Errorf("only the delay action takes a max_delay, and the action is %q", r.action))
		}
	case Delay:
		if cr.MaxDelay <= 0 {
			return nil, pathError(append(path, name("max_delay")), fmt.Errorf("the delay action needs a positive max_delay such as \"2s\", got %v", cr.MaxDelay))
		}
	default:
		return nil, pathError(append(path, name("action")), fmt.Errorf("unknown action %s; want block, delay or shadow", clip.Quote(string(cr.Action))))
	}
	var ok bool
	if r.problem, ok = problemTypes[cr.Problem]; !ok {
		return nil, pathError(append(path, name("problem")), fmt.Errorf("unknown problem type %s; want quota-exceeded, temporary-reduced-capacity or abnormal-usage-detected", clip.Quote(cr.Problem)))
	}
	if len(cr.Limits) == 0 && len(cr.CostCaps) == 0 {
		return nil, pathError(path, errors.New("a rule needs limits or cost_caps"))
	}
	var err error
	rn := cmp.Or(endpoint, "default")
	if r.limits, err = p.compileSet(append(slices.Clip(path), name("limits")), rn, limitRequests, cr.Limits); err != nil {
		return nil, err
	}
	r.caps, err = p.compileSet(append(slices.Clip(path), name("cost_caps")), rn, limitCost, cr.CostCaps)
	return r, err
}

// compileSet validates specs, builds each once (so that a spec whose
// limiter cannot be built fails here, not on a request), and asks the
// storage for their repository. It returns nil for no specs.
func (p *Policy) compileSet(path []seg, ruleName, setName string, specs []limiters.Spec) (*limitSet, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	holds := false
	for i, s := range specs {
		if setName == limitCost && s.Algorithm == limiters.AlgConcurrency {
			return nil, pathError(append(path, at(i), name("algorithm")), errors.New("a cost cap cannot be a concurrency limit"))
		}
		l, err := build(s)
		if err != nil {
			return nil, pathError(append(path, at(i)), err)
		}
		holds = holds || limiters.HoldsPermits(l)
		_ = l.Close()
	}
	repo, err := p.storage(slices.Clone(specs))
	if err != nil {
		return nil, pathError(path, fmt.Errorf("storage: %w", err))
	}
	set := &limitSet{repo: repo, holds: holds, name: setName,
		ads: newLimitAds(ruleName, setName == limitCost, specs), aggregate: policyName(ruleName)}
	if setName == limitCost {
		set.aggregate = policyName(ruleName + " cost")
	}
	p.sets = append(p.sets, set)
	return set, nil
}

// build is s.New(), which validates s. It turns a panic of a limiter's
// constructor into an error: defence in depth, since a spec that validates
// should always build, and this is the one place a Policy builds limiters.
func build(s limiters.Spec) (l limiters.Limiter, err error) {
	defer func() {
		if v := recover(); v != nil {
			l, err = nil, fmt.Errorf("cannot build this limiter: %v", v)
		}
	}()
	return s.New()
}

// Close closes the policy's limiters; requests waiting under the Delay
// action fail (the repository fails closed or open as WithFailOpen says).
// It is idempotent.
func (p *Policy) Close() error {
	var err error
	for _, s := range p.sets {
		err = errors.Join(err, s.repo.Close())
	}
	if p.mem != nil {
		err = errors.Join(err, p.mem.mem.Close())
	}
	return err
}

// Len returns the number of limiters the default storage holds (at most
// MaxKeys), or -1 with WithStorage.
func (p *Policy) Len() int {
	if p.mem == nil {
		return -1
	}
	return p.mem.mem.Len()
}

// planFor returns the request's plan.
func (p *Policy) planFor(req keyextract.Request) *plan {
	if p.planOf != nil {
		if pl := p.plans[p.planOf(req)]; pl != nil {
			return pl
		}
	}
	return p.defaultPlan
}

// ruleFor returns the rule that applies to r under pl, or nil.
func (pl *plan) ruleFor(r *http.Request) *rule {
	if h, _ := pl.mux.Handler(r); h != nil {
		if ru, ok := h.(*rule); ok {
			return ru
		}
	}
	return pl.def
}

// listed reports whether the client key (an address, or an IPv6 /64 as
// keyextract.IP writes it) is allowed (all of it within an Allow prefix) or
// blocked (any of it within a Block prefix).
func (p *Policy) listed(req keyextract.Request) (allowed, blocked bool) {
	if p.allow.empty() && p.block.empty() {
		return false, false
	}
	k, ok := p.clientIP.Extract(req)
	if !ok {
		return false, false
	}
	var client netip.Prefix
	if strings.Contains(k, "/") {
		pf, err := netip.ParsePrefix(k)
		if err != nil {
			return false, false
		}
		client = pf
	} else {
		a, err := netip.ParseAddr(k)
		if err != nil {
			return false, false
		}
		client = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
	}
	if p.block.overlaps(client) {
		return false, true
	}
	return p.allow.holds(client), false
}
