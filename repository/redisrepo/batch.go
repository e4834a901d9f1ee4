package redisrepo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/throttlekit/throttle/limiters"
)

// batcher sends the calls that arrive while a round trip is in flight
// together (at most cfg.batch of them), as one EVALSHA that decides them all
// (one per hash tag on a Cluster), pipelined with the lease calls.
// One goroutine per Repository runs the round trips; a call costs a channel,
// not a goroutine. An idle batcher sends a call at once: batching adds no
// latency beyond the round trip already in flight.
type batcher struct {
	r       *Repository
	direct  bool // the client ends round trips at their deadline: an idle batcher lets a caller send its own call
	cluster bool // keys of one command must share a hash tag
	mu      sync.Mutex
	pending []*call
	busy    bool // a round trip is in flight, or the sender has been kicked
	closed  bool
	kick    chan struct{}
	done    chan struct{}
	ticks   ticks // the Done channels of round trips' contexts (see bound)
}

type call struct {
	script *redis.Script
	fast   *fast // sent alone, the call may take this script instead
	keys   []string
	args   []any
	res    any
	err    error
	done   chan struct{}
}

func newBatcher(r *Repository, direct bool) *batcher {
	_, single := r.rc.(*redis.Client)
	b := &batcher{r: r, direct: direct, cluster: !single, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go b.run()
	return b
}

// alone sends a call on the caller's goroutine when nothing is in flight
// (the common case at low concurrency, saving a hand-off to the sender),
// bounded by ctx's deadline and the round-trip timeout, which the client
// enforces on its socket (see deadlineClient). A cancellation of ctx without a
// deadline is noticed when the round trip ends, at most the timeout later.
// It returns nil when a round trip is in flight: the call must queue.
func (b *batcher) alone(ctx context.Context, script *redis.Script, fast *fast, keys []string, args []any) (res any, err error, ok bool) {
	b.mu.Lock()
	if b.busy || b.closed {
		b.mu.Unlock()
		return nil, nil, false
	}
	b.busy = true
	b.mu.Unlock()
	c := call{script: script, fast: fast, keys: keys, args: args} // nobody waits on done
	b.exec1(ctx, &c)
	b.mu.Lock()
	if len(b.pending) > 0 && !b.closed {
		b.kick <- struct{}{} // busy stays set: the sender takes over
	} else {
		b.busy = false
	}
	b.mu.Unlock()
	return c.res, c.err, true
}

// do runs script (or fast, if not nil, when the call goes alone) with keys
// and args and waits for its result, at most until ctx's deadline or the
// round-trip timeout, whichever comes first, whatever the client's
// settings: a late answer is a failure (ErrUnavailable, "timeout").
// A call abandoned by its ctx may still run: a rate limit may then count
// it, and a concurrency lease it took expires (nobody renews it).
func (b *batcher) do(ctx context.Context, script *redis.Script, fast *fast, keys []string, args []any) (any, error) {
	if b.direct {
		if res, err, ok := b.alone(ctx, script, fast, keys, args); ok {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return res, err
		}
	}
	c := b.submit(script, fast, keys, args)
	t := time.NewTimer(b.r.cfg.timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, unavailable(errNoReply, b.r.cfg.timeout)
	}
}

// submit queues a call for the next round trip; its done channel closes
// when its result is in.
func (b *batcher) submit(script *redis.Script, fast *fast, keys []string, args []any) *call {
	c := &call{script: script, fast: fast, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		c.err = limiters.ErrClosed
		close(c.done)
		return c
	}
	b.pending = append(b.pending, c)
	if !b.busy {
		// The only kick outstanding: busy stays set until the sender has
		// drained pending, so this send never blocks.
		b.busy = true
		b.kick <- struct{}{}
	}
	b.mu.Unlock()
	return c
}

func (b *batcher) run() {
	defer close(b.done)
	for range b.kick {
		for {
			b.mu.Lock()
			k := min(len(b.pending), b.r.cfg.batch)
			batch := b.pending[:k:k]
			b.pending = b.pending[k:]
			if k == 0 {
				b.busy = false
				b.mu.Unlock()
				break
			}
			b.mu.Unlock()
			b.exec(context.Background(), batch)
		}
	}
}

// close fails the calls not yet sent with ErrClosed and waits for the
// round trip in flight.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	rest := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, c := range rest {
		c.err = limiters.ErrClosed
		close(c.done)
	}
	b.mu.Lock()
	close(b.kick) // kicks are sent under mu and never once closed is set
	b.mu.Unlock()
	<-b.done
	b.ticks.close()
}

// ours reports whether err is a reply of our scripts (a foreign value),
// which says nothing about Redis's health.
func ours(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "THROTTLE ")
}

// group is calls sent as one command: a single call as it is, or calls of
// the repository's script merged into one call of it (see luaMain).
type group struct {
	calls  []*call
	script *redis.Script
	keys   []string
	args   []any
}

// groups merges batch's calls of the repository's script into one call of
// it (or of its fast script, for the tries and peeks it serves), or on a
// Cluster one per hash tag, so that every key of a command lies in one
// slot; the other calls (lease mode's) stay as they are.
func (b *batcher) groups(batch []*call) []*group {
	r := b.r
	if len(batch) == 1 {
		return []*group{alone(batch[0])}
	}
	var out []*group
	type kind struct {
		tag  string
		fast bool
	}
	byKind := map[kind]*group{}
	for _, c := range batch {
		if c.script != r.script {
			out = append(out, alone(c))
			continue
		}
		k := kind{fast: c.fast != nil}
		if b.cluster {
			k.tag = hashTag(c.keys[0])
		}
		g := byKind[k]
		if g == nil {
			g = &group{script: r.script}
			byKind[k] = g
			out = append(out, g)
		}
		g.calls = append(g.calls, c)
	}
	nl := len(r.limits)
	for i, g := range out {
		switch {
		case len(g.calls) == 1:
			out[i] = alone(g.calls[0])
		case g.calls[0].fast != nil:
			g.script = r.fast.script
			g.keys, g.args = r.fast.batch(g.calls)
		default:
			g.args = append(make([]any, 0, 2+6*nl+len(g.calls)*(6+6*nl)), "*", nl)
			g.args = append(g.args, g.calls[0].args[6:6+6*nl]...)
			for _, c := range g.calls {
				g.keys = append(g.keys, c.keys...)
				extra := c.args[6+6*nl:]
				g.args = append(g.args, c.args[:5]...)
				g.args = append(g.args, len(extra))
				g.args = append(g.args, extra...)
			}
		}
	}
	return out
}

// alone is the group of c sent on its own, through its fast script if it
// has one.
func alone(c *call) *group {
	if c.fast != nil {
		return &group{calls: []*call{c}, script: c.fast.script, keys: c.keys, args: c.args}
	}
	return &group{calls: []*call{c}, script: c.script, keys: c.keys, args: c.args}
}

// hashTag is the part of key that Redis Cluster hashes: the content of its
// first {…} when not empty, else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// bound is parent bounded by the round-trip timeout: parent itself when
// its deadline comes first.
func (b *batcher) bound(parent context.Context, begin time.Time) (context.Context, context.CancelFunc) {
	dl, ok := parent.Deadline()
	if ok && dl.Sub(begin) <= b.r.cfg.timeout {
		return parent, func() {}
	}
	if b.direct {
		if tk := b.ticks.at(begin, b.r.cfg.timeout); tk != nil {
			return &tripCtx{Context: parent, dl: begin.Add(b.r.cfg.timeout), tick: tk}, func() {}
		}
	}
	return context.WithTimeout(parent, b.r.cfg.timeout)
}

// tripCtx is a round trip's context when the timeout's deadline comes
// before its caller's: the caller's, with the timeout's deadline. The
// client bounds its socket's reads and writes by Deadline (see
// deadlineClient); what it waits for on Done (a connection of a full pool,
// a retry's back-off) ends when the tick the round trip began in has
// ended a timeout ago — at most a tick (a sixteenth of the timeout) past
// the deadline — and hears of the caller's cancellation only then, as the
// socket does when the round trip ends. context.WithTimeout would arm and
// stop a timer, and register with a cancellable caller's context, for
// every round trip: about 0.5 µs of CPU, most of what a lone call cost the
// client beyond redis_rate's (BenchmarkRedis, g=1).
type tripCtx struct {
	context.Context
	dl   time.Time
	tick *tick
}

func (c *tripCtx) Deadline() (time.Time, bool) { return c.dl, true }
func (c *tripCtx) Done() <-chan struct{}       { return c.tick.done }

func (c *tripCtx) Err() error {
	select {
	case <-c.tick.done:
		if err := c.Context.Err(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// ticks hands out the Done channels of round trips' contexts: one per tick
// of time, closed by one timer. Close stops them.
type ticks struct {
	mu     sync.Mutex
	cur    *tick
	live   []*tick // not yet closed
	closed bool
}

type tick struct {
	end  time.Time // round trips begun before end take this tick
	done chan struct{}
	t    *time.Timer
	once sync.Once
}

func (tk *tick) close() { tk.once.Do(func() { close(tk.done) }) }

// at is the tick of a round trip begun at begin, bounded by timeout; nil
// once closed.
func (ts *ticks) at(begin time.Time, timeout time.Duration) *tick {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return nil
	}
	if tk := ts.cur; tk != nil && begin.Before(tk.end) {
		return tk
	}
	tk := &tick{end: begin.Add(max(timeout/16, time.Millisecond)), done: make(chan struct{})}
	tk.t = time.AfterFunc(time.Until(tk.end)+timeout, func() {
		tk.close()
		ts.mu.Lock()
		if i := slices.Index(ts.live, tk); i >= 0 {
			ts.live = slices.Delete(ts.live, i, i+1)
		}
		ts.mu.Unlock()
	})
	ts.cur = tk
	ts.live = append(ts.live, tk)
	return tk
}

// close stops the ticks' timers and closes their channels.
func (ts *ticks) close() {
	ts.mu.Lock()
	live := ts.live
	ts.closed, ts.live, ts.cur = true, nil, nil
	ts.mu.Unlock()
	for _, tk := range live {
		tk.t.Stop()
		tk.close()
	}
}

// exec1 sends one call, bounded by parent and the round-trip timeout,
// through the circuit breaker: what exec does for a batch of one, without
// building a group for it.
func (b *batcher) exec1(parent context.Context, c *call) {
	r := b.r
	begin := time.Now()
	ctx, cancel := b.bound(parent, begin)
	defer cancel()
	_, err := r.cb.Execute(func() (struct{}, error) {
		script := c.script
		if c.fast != nil {
			script = c.fast.script
		}
		c.res, c.err = script.EvalSha(ctx, r.rc, c.keys, c.args...).Result()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
			c.res, c.err = script.Run(ctx, r.rc, c.keys, c.args...).Result()
		}
		if c.err != nil && !ours(c.err) {
			return struct{}{}, c.err
		}
		return struct{}{}, nil
	})
	b.finish(c, err, begin)
}

// exec sends batch in one round trip, bounded by parent and the round-trip
// timeout, through the circuit breaker.
func (b *batcher) exec(parent context.Context, batch []*call) {
	if len(batch) == 1 {
		b.exec1(parent, batch[0])
		return
	}
	r := b.r
	begin := time.Now()
	ctx, cancel := b.bound(parent, begin)
	defer cancel()
	_, err := r.cb.Execute(func() (struct{}, error) {
		groups := b.groups(batch)
		cmds := make([]*redis.Cmd, len(groups))
		if len(groups) == 1 {
			g := groups[0]
			cmds[0] = g.script.EvalSha(ctx, r.rc, g.keys, g.args...)
		} else {
			pipe := r.rc.Pipeline()
			for i, g := range groups {
				cmds[i] = g.script.EvalSha(ctx, pipe, g.keys, g.args...)
			}
			pipe.Exec(ctx) // each command carries its own error
		}
		var failed error
		for i, g := range groups {
			res, err := cmds[i].Result()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				res, err = g.script.Run(ctx, r.rc, g.keys, g.args...).Result()
			}
			if err != nil && !ours(err) {
				failed = err
			}
			if len(g.calls) == 1 {
				g.calls[0].res, g.calls[0].err = res, err
				continue
			}
			replies, ok := res.([]any)
			if err == nil && (!ok || len(replies) != len(g.calls)) {
				err = fmt.Errorf("redisrepo: bad batch reply %T", res)
			}
			for j, c := range g.calls {
				if err != nil {
					c.err = err
					continue
				}
				if msg, ok := replies[j].(string); ok { // the call's error
					c.err = errors.New(msg)
					if !ours(c.err) {
						failed = c.err
					}
					continue
				}
				c.res = replies[j]
			}
		}
		return struct{}{}, failed
	})
	for _, c := range batch {
		b.finish(c, err, begin)
	}
}

// finish gives c its error as callers see it, err being the breaker's
// verdict on the round trip begun at begin, and wakes its caller.
func (b *batcher) finish(c *call, err error, begin time.Time) {
	switch {
	case err != nil && (errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)):
		c.res, c.err = nil, unavailable(err, 0)
	case c.err != nil && !ours(c.err):
		c.res, c.err = nil, unavailable(b.r.dials.cause(c.err, begin), b.r.cfg.timeout)
	}
	if c.done != nil {
		close(c.done)
	}
}
