package redisrepo

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/limiters"
)

// Lease mode (WithLeases): each process holds, per key, a share of the
// spec's rate, granted by Redis and decided locally by a limiter of that
// rate. The lease script keeps a hash per key, one field per process,
// "grant:want:expiry" (µs, Redis's clock). A process asks for want (its
// recent demand, with room to double); the script drops expired fields,
// computes the max-min fair share of want among every live process's
// wants (water-filling), adds an equal part of what no want takes (so a
// process alone gets the whole rate, and a sudden demand finds room), and
// grants the smaller of that and what the others' grants leave free. So the grants in Redis never sum past the
// rate; a process whose fair share shrank gives the difference back at
// its next renewal, and the others take it at theirs. want 0 gives the
// share back.
const luaShare = `
local k, id = KEYS[1], ARGV[1]
local want, ttl, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tm = redis.call('TIME')
local t = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local ok, all = pcall(redis.call, 'HGETALL', k)
if not ok then return redis.error_reply('THROTTLE foreign value at key ' .. k .. ': not a hash') end
local wants, others, last = {want}, 0, t + ttl
for i = 1, #all, 2 do
  local g, w, e = string.match(all[i + 1], '^(%d+):(%d+):(%d+)$')
  if not g then return redis.error_reply('THROTTLE foreign value at key ' .. k .. ': unexpected field') end
  g, w, e = tonumber(g), tonumber(w), tonumber(e)
  if e <= t then redis.call('HDEL', k, all[i])
  elseif all[i] ~= id then
    others = others + g
    wants[#wants + 1] = w
    if e > last then last = e end
  end
end
if want == 0 then
  redis.call('HDEL', k, id)
  return 0
end
table.sort(wants)
local left, level = cap, cap
for i = 1, #wants do
  level = math.floor(left / (#wants - i + 1))
  if wants[i] > level then break end
  left = left - wants[i]
  level = cap
end
local spare = cap
for i = 1, #wants do spare = spare - math.min(wants[i], level) end
local target = math.min(want, level) + math.floor(spare / #wants)
local grant = math.max(math.min(target, cap - others), 0)
redis.call('HSET', k, id, string.format('%.0f:%.0f:%.0f', grant, want, t + ttl))
redis.call('PEXPIRE', k, math.ceil((last - t) / 1000))
return grant
`

var shareScript = redis.NewScript(luaShare)

// quota is a Repository's lease mode.
type quota struct {
	r        *Repository
	spec     limiters.Spec
	refresh  time.Duration
	ttl      time.Duration // a lease's life in Redis: three refreshes
	capacity int64         // the permits per per to share: the spec's rate
	per      time.Duration // the spec's period, times what makes capacity at least 1024
	base     time.Time     // grant.until counts from it

	mu    sync.RWMutex
	lease map[string]*lease
}

// lease is this process's share of one key.
type lease struct {
	id    string                // its field in Redis
	ready chan struct{}         // closed once the first grant is in
	asked atomic.Int64          // permits asked since the last renewal
	grant atomic.Pointer[grant] // set before ready closes
	mu    sync.Mutex            // serializes apply
	idle  int                   // renewals without demand; the renewer's
	ok    time.Time             // when the last successful renewal was sent; under mu
}

// grant is a lease's current share and the limiter deciding it.
type grant struct {
	share   int64
	until   atomic.Int64     // the lease's end on our clock (ns since quota.base): its renewal's sending + ttl
	lim     limiters.Limiter // nil when share is 0
	err     error            // Redis unreachable for longer than a lease
	changed chan struct{}    // closed when a new grant replaces this one
}

func newQuota(r *Repository, spec limiters.Spec, refresh time.Duration) (*quota, error) {
	if spec.Algorithm != limiters.AlgGCRA && spec.Algorithm != limiters.AlgTokenBucket {
		return nil, fmt.Errorf("redisrepo: spec algorithm: WithLeases shares a rate, so it needs gcra or token_bucket, got %s", spec.Algorithm)
	}
	// Shares are whole permits per period: a small rate is counted over a
	// longer period, so that a share can be a small part of it.
	m := max((shareUnits+int64(spec.Rate.N)-1)/int64(spec.Rate.N), 1)
	return &quota{r: r, spec: spec, refresh: refresh, ttl: 3 * refresh,
		capacity: int64(spec.Rate.N) * m, per: spec.Rate.Per * time.Duration(m), base: time.Now(), lease: map[string]*lease{}}, nil
}

// shareUnits is the least number of parts a rate is shared in.
const shareUnits = 1024

// local is the spec of a share: the spec's rate and burst scaled by
// share/capacity, the burst rounded up.
func (q *quota) local(share int64) limiters.Spec {
	s := q.spec
	s.Rate = limiters.Rate{N: int(share), Per: q.per}
	s.Limit = int((int64(q.spec.Limit)*share + q.capacity - 1) / q.capacity)
	s.QueueLimit = 0
	return s
}

func (q *quota) key(key string) string { return q.r.cfg.prefix + "{" + encodeKey(key) + "}:L" }

// get returns key's lease, taking one from Redis first if there is none.
func (q *quota) get(ctx context.Context, key string) (*lease, error) {
	q.mu.RLock()
	l := q.lease[key]
	q.mu.RUnlock()
	if l == nil {
		q.mu.Lock()
		if l = q.lease[key]; l == nil {
			l = &lease{id: q.r.newID(), ready: make(chan struct{})}
			q.lease[key] = l
			q.mu.Unlock()
			q.first(ctx, key, l)
		} else {
			q.mu.Unlock()
		}
	}
	select {
	case <-l.ready:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// first takes key's first lease, asking for the whole rate (its demand is
// not known yet: it gets its fair share of what is free).
func (q *quota) first(ctx context.Context, key string, l *lease) {
	defer close(l.ready)
	sent := time.Now()
	res, err := q.r.b.do(context.WithoutCancel(ctx), shareScript, nil, []string{q.key(key)}, q.args(l.id, q.capacity))
	l.mu.Lock()
	l.ok = sent
	l.mu.Unlock()
	q.apply(l, res, err, sent)
}

func (q *quota) args(id string, want int64) []any {
	return []any{id, want, q.ttl.Microseconds(), q.capacity}
}

// apply installs the result of a renewal sent at sent: a new share, or,
// after a lease's life without one, the error.
func (q *quota) apply(l *lease, res any, err error, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.grant.Load()
	if err == nil {
		if _, ok := res.(int64); !ok {
			err = fmt.Errorf("redisrepo: bad lease reply %v", res)
		}
	}
	if err != nil {
		if ours(err) {
			err = fmt.Errorf("%w %s", ErrForeignValue, err.Error()[len("THROTTLE foreign value at key "):])
		}
		if old != nil && old.err == nil && time.Since(l.ok) < q.ttl {
			return // the lease still stands; the next renewal may succeed
		}
		if old != nil && old.lim != nil {
			old.lim.Close()
		}
		q.swap(l, &grant{err: err})
		return
	}
	l.ok = sent
	share := res.(int64)
	until := int64(sent.Add(q.ttl).Sub(q.base))
	if old != nil && old.err == nil && old.share == share {
		old.until.Store(until)
		return
	}
	g := &grant{share: share}
	g.until.Store(until)
	switch {
	case share == 0:
		if old != nil && old.lim != nil {
			old.lim.Close()
		}
	case old != nil && old.lim != nil:
		g.lim = old.lim
		// The spec validated, and so does its share: Reconfigure succeeds.
		_ = old.lim.(limiters.Reconfigurable).Reconfigure(q.local(share))
	default:
		// A new share starts empty, as if its burst had just been spent:
		// permits come only from its rate, so that shares moving between
		// processes never add bursts.
		spec := q.local(share)
		g.lim, _ = spec.New()
		g.lim.TryAcquire(spec.Limit)
	}
	q.swap(l, g)
}

func (q *quota) swap(l *lease, g *grant) {
	g.changed = make(chan struct{})
	if old := l.grant.Swap(g); old != nil {
		close(old.changed)
	}
}

// expired reports whether g's lease has ended on our clock: Redis gives
// its share to the others from then on, whether or not a renewal is in
// flight, so the process has no share until a renewal answers (or, if it
// fails, the fail mode decides).
func (q *quota) expired(g *grant) bool { return time.Since(q.base) >= time.Duration(g.until.Load()) }

// tryAcquire decides locally, within this process's share of key.
func (q *quota) tryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	l, err := q.get(ctx, key)
	if err != nil {
		return limiters.Decision{}, err
	}
	l.asked.Add(int64(n))
	g := l.grant.Load()
	switch {
	case g.err != nil:
		return q.r.failTry(ctx, key, n, g.err)
	case g.lim == nil || q.expired(g):
		return limiters.Decision{Limit: q.spec.Limit, RetryAfter: q.refresh}, nil
	}
	return g.lim.TryAcquire(n), nil
}

// acquire waits locally until this process's share of key grants n
// permits, trying again when the limiter says they could be there or the
// share changes.
func (q *quota) acquire(ctx context.Context, key string, n int) error {
	for first := true; ; first = false {
		l, err := q.get(ctx, key) // again each time: an idle lease may be gone
		if err != nil {
			return err
		}
		if first {
			l.asked.Add(int64(n))
		}
		g := l.grant.Load()
		if g.err != nil {
			return q.r.failAcquire(ctx, key, n, g.err)
		}
		wait := q.refresh
		if g.lim != nil && !q.expired(g) {
			d := g.lim.TryAcquire(n)
			if d.Allowed {
				return nil
			}
			if n > d.Limit {
				return limiters.ErrExceedsLimit
			}
			wait = d.RetryAfter
		}
		wait = max(wait, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && g.lim != nil && time.Until(dl) < wait {
			return rejected(wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-g.changed:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-q.r.stop:
			t.Stop()
			return limiters.ErrClosed
		}
		t.Stop()
	}
}

// run renews every lease each refresh, in one pipeline, until Close; then
// it gives the shares back. A lease idle for three refreshes is given back
// and forgotten. One goroutine per Repository, whatever the number of keys.
func (q *quota) run() {
	defer q.r.wg.Done()
	t := time.NewTicker(q.refresh)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-q.r.stop:
			q.renew(0, true)
			return
		case now := <-t.C:
			q.renew(now.Sub(last), false)
			last = now
		}
	}
}

// renew asks Redis for each lease's share, in proportion to the demand it
// saw over elapsed (or gives every share back, when closing).
func (q *quota) renew(elapsed time.Duration, closing bool) {
	type item struct {
		l    *lease
		want int64
		c    *call
	}
	var items []item
	sent := time.Now()
	q.mu.Lock()
	for k, l := range q.lease {
		select {
		case <-l.ready:
		default:
			continue // its first grant is on its way
		}
		want := int64(0)
		if asked := l.asked.Swap(0); asked > 0 && !closing {
			l.idle = 0
			// the demand as permits per q.per, with room to double
			f := 2 * float64(asked) * float64(q.per) / float64(max(elapsed, time.Microsecond))
			want = int64(math.Min(math.Ceil(f), float64(q.capacity)))
		} else if l.idle++; !closing && l.idle < 3 {
			want = 1 // idle: a foot in the door
		}
		if want == 0 {
			delete(q.lease, k) // a later call takes a new lease
		}
		items = append(items, item{l, want, q.r.b.submit(shareScript, nil, []string{q.key(k)}, q.args(l.id, want))})
	}
	q.mu.Unlock()
	for _, it := range items {
		<-it.c.done
		if it.want == 0 {
			q.apply(it.l, int64(0), nil, sent) // given back, or left to expire
		} else {
			q.apply(it.l, it.c.res, it.c.err, sent)
		}
	}
}

// forget drops key's lease (Reset): its limiter is closed, and the next
// call takes a new lease.
func (q *quota) forget(key string) {
	q.mu.Lock()
	l := q.lease[key]
	delete(q.lease, key)
	q.mu.Unlock()
	if l != nil {
		<-l.ready
		q.apply(l, int64(0), nil, time.Now())
	}
}
