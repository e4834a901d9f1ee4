package service

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/ratelimitd"
	"github.com/throttlekit/throttle/repository/redisrepo"
)

// handleBatch decides a batch's checks as if they came one after the other,
// in the batch's order, all under the policy in force when it arrived.
//
// In memory they are decided one by one. In Redis, each check runs through
// the policy on a goroutine of its own, and its rule's try waits in a
// gather (see view.TryAcquire): once every check still running waits
// there, all their calls go to Redis at once, each rule's calls decided in
// order by one script call (redisrepo's TryAcquireMany), the rules' calls
// in parallel. So a batch costs one round trip per rule its checks fall
// in, on a single node (on a Cluster, one per node holding its keys); a
// rule with cost caps charges them in a second round, for the checks its
// limits admitted; a Delay rule's wait is a round trip of its own. A
// policy with a concurrency limit decides one check after another in Redis
// too: a check gives its permit back when it has been decided, which a
// later check of the same batch must see.
func (s *Service) handleBatch(ctx context.Context, body []byte) (int, []byte) {
	var b ratelimitd.BatchRequest
	if p := decodeStrict(body, &b); p != nil {
		return p.Status, jsonBytes(p)
	}
	if len(b.Checks) == 0 || len(b.Checks) > ratelimitd.MaxBatch {
		p := problem(http.StatusBadRequest, "a batch holds 1 to "+strconv.Itoa(ratelimitd.MaxBatch)+" checks, got "+strconv.Itoa(len(b.Checks)))
		return p.Status, jsonBytes(p)
	}
	g := s.acquire()
	if g == nil {
		return errShutdown.Status, jsonBytes(errShutdown)
	}
	defer g.mu.RUnlock()
	out := ratelimitd.BatchResponse{Results: make([]ratelimitd.BatchItem, len(b.Checks))}
	one := func(ctx context.Context, i int) {
		c := b.Checks[i]
		method, path, p := validate(c)
		var res ratelimitd.Result
		if p == nil {
			res, p = decideIn(ctx, g, c, method, path, false)
		}
		out.Results[i] = ratelimitd.BatchItem{Result: res, Error: p}
	}
	if s.cfg.Redis == nil || g.holds {
		for i := range b.Checks {
			one(ctx, i)
		}
		return http.StatusOK, jsonBytes(out)
	}
	ga := &gather{ctx: ctx, running: len(b.Checks)}
	var wg sync.WaitGroup
	for i := range b.Checks {
		wg.Go(func() {
			defer ga.finish()
			one(context.WithValue(ctx, slotKey{}, slot{ga, i}), i)
		})
	}
	wg.Wait()
	return http.StatusOK, jsonBytes(out)
}

// slotKey is the context key of a batched check's slot.
type slotKey struct{}

// slot is a check's place in a gathered batch.
type slot struct {
	g   *gather
	idx int
}

// gather collects the Redis tries of a batch's checks, each running on its
// own goroutine, and sends them together once every check that has not
// finished waits for one: the round's calls, in the batch's order, one
// TryAcquireMany per repository. A check makes one call at a time, so a
// round holds at most one per check.
type gather struct {
	ctx     context.Context // the batch's
	mu      sync.Mutex
	running int       // checks not finished
	waiting []*waiter // the calls of this round, one per waiting check
}

// waiter is one check's call, waiting for its round.
type waiter struct {
	idx  int
	repo *redisrepo.Repository
	call redisrepo.Call
	d    limiters.Decision
	err  error
	done chan struct{}
}

// try waits for the round of the call of the batch's check idx and returns
// its decision.
func (g *gather) try(idx int, repo *redisrepo.Repository, key string, n int) (limiters.Decision, error) {
	w := &waiter{idx: idx, repo: repo, call: redisrepo.Call{Key: key, N: n}, done: make(chan struct{})}
	g.mu.Lock()
	g.waiting = append(g.waiting, w)
	g.flushLocked()
	<-w.done
	return w.d, w.err
}

// finish marks a check as finished: the round may then be complete.
func (g *gather) finish() {
	g.mu.Lock()
	g.running--
	g.flushLocked()
}

// flushLocked, called with g.mu held, unlocks it and, when every running
// check waits, decides the round's calls.
func (g *gather) flushLocked() {
	if len(g.waiting) == 0 || len(g.waiting) < g.running {
		g.mu.Unlock()
		return
	}
	round := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	slices.SortFunc(round, func(a, b *waiter) int { return cmp.Compare(a.idx, b.idx) })
	byRepo := map[*redisrepo.Repository][]*waiter{}
	for _, w := range round {
		byRepo[w.repo] = append(byRepo[w.repo], w)
	}
	var wg sync.WaitGroup
	for repo, ws := range byRepo {
		wg.Go(func() {
			calls := make([]redisrepo.Call, len(ws))
			for i, w := range ws {
				calls[i] = w.call
			}
			ds, errs := repo.TryAcquireMany(g.ctx, calls)
			for i, w := range ws {
				w.d, w.err = ds[i], errs[i]
			}
		})
	}
	wg.Wait()
	for _, w := range round {
		close(w.done)
	}
}
