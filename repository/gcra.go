package repository

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/limiters"
)

// GCRA is a Repository of token buckets kept as compactly as a Go map
// allows: each key's whole state is one timestamp (limiters.GCRAState) in a
// sharded map, next to its key — 8 bytes when the rate's emission interval
// is a whole number of nanoseconds, 16 otherwise. It makes exactly the
// decisions that NewMemory with a limiters.NewGCRA factory makes, in about
// a third of the memory per key, and is the repository to choose for
// millions of per-client token buckets.
//
// A key is forgotten as soon as its bucket is full again (a full bucket is
// the zero state, so forgetting it loses nothing); entries are examined for
// that lazily, two at a time, whenever a new key is added. WithMaxKeys
// bounds the keys exactly: the bound is split evenly across the shards, and
// a new key in a full shard takes the place of the key of that shard closest
// to full among a few it samples. If that key is not full, WithOverflow
// decides: EvictStale (the default) evicts it (it starts over full; counted
// in Stats.Evicted), RefuseNew refuses the new key with ErrTooManyKeys.
//
// Acquire waits by reservation: it takes its permits at the time they will
// be due and sleeps until then, so callers are served in the order they
// arrived and TryAcquire cannot overtake them; a caller whose context ends
// first gives its permits back. There is no per-key queue, so WithQueueLimit
// has no counterpart here, and there is nothing to Release.
type GCRA struct {
	t      gcraTable
	mu     sync.Mutex    // serializes SetRate; guards rate and burst
	rate   limiters.Rate // the keys' rate and burst, for SetRate
	burst  int
	closed atomic.Bool
	done   chan struct{}
}

var (
	_ Repository            = (*GCRA)(nil)
	_ Admin                 = (*GCRA)(nil)
	_ limiters.PermitHolder = (*GCRA)(nil)
)

// gcraTable is a table of GCRA states. Its one implementation, gcraMap, is
// generic in how a state is kept (see cell), so that whole intervals cost 8
// bytes a key without every call asking which kind of map it has.
type gcraTable interface {
	// tryAcquire decides on key's bucket; n == 0 peeks and never creates
	// the key.
	tryAcquire(key string, n int) (limiters.Decision, error)
	// reserve takes n permits at the time they are due and returns how
	// long until then; a caller that then waits is registered in the
	// returned waiters, and must call leave.
	reserve(key string, n int, maxWait time.Duration) (time.Duration, *waiters, error)
	// leave ends a wait registered by reserve, giving the n permits back
	// if cancel is set and key has not been reset meanwhile.
	leave(key string, w *waiters, n int, cancel bool)
	// reset forgets key and wakes its waiters.
	reset(key string)
	// setRate converts every key to the new rate and burst.
	setRate(c *rerate)
	stats() Stats
}

// waiters are the Acquire calls asleep on one key's reservations. Reset
// closes reset to fail them with limiters.ErrClosed.
type waiters struct {
	n     int
	reset chan struct{}
}

// gcraShards is the number of shards when keys are unbounded.
const gcraShards = 64

// NewGCRA returns a GCRA repository whose keys each get a token bucket of
// rate r and burst. It panics as limiters.NewGCRA does on a non-positive
// rate or burst. It takes WithMaxKeys and WithOverflow.
func NewGCRA(r limiters.Rate, burst int, opts ...GCRAOption) *GCRA {
	p := limiters.NewGCRAParams(r, burst)
	c := newConfig(opts)
	n := gcraShards
	perCap := 0
	if c.maxKeys > 0 {
		n = min(max(c.maxKeys/16, 1), gcraShards)
		perCap = c.maxKeys / n
	}
	g := &GCRA{rate: r, burst: burst, done: make(chan struct{})}
	if p.Whole() {
		g.t = newGCRAMap[packed](p, n, perCap, c.overflow)
	} else {
		g.t = newGCRAMap[exact](p, n, perCap, c.overflow)
	}
	return g
}

func (g *GCRA) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if g.closed.Load() {
		return limiters.ErrClosed
	}
	return nil
}

// TryAcquire takes n permits from key's bucket now or not at all. It fails
// with ErrTooManyKeys for a new key that WithOverflow(RefuseNew) turns away.
func (g *GCRA) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	checkN(n)
	if err := g.check(ctx); err != nil {
		return limiters.Decision{}, err
	}
	return g.t.tryAcquire(key, n)
}

// Peek reports key's bucket as TryAcquire(ctx, key, 0) would, and spends
// nothing; a key the repository does not hold is a full bucket, and stays
// unheld.
func (g *GCRA) Peek(ctx context.Context, key string) (limiters.Decision, error) {
	return g.TryAcquire(ctx, key, 0)
}

// Acquire waits, in arrival order, until n permits of key's bucket are
// granted. It fails at once with ErrExceedsLimit when n is more than the
// burst, and with a *limiters.RejectedError when its turn would come after
// ctx's deadline; Close and Reset of the key fail it with
// limiters.ErrClosed.
func (g *GCRA) Acquire(ctx context.Context, key string, n int) error {
	checkN(n)
	if err := g.check(ctx); err != nil {
		return err
	}
	maxWait := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(dl), 0)
	}
	wait, w, err := g.t.reserve(key, n, maxWait)
	if err != nil || w == nil {
		return err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		g.t.leave(key, w, n, false)
		return nil
	case <-ctx.Done():
		g.t.leave(key, w, n, true)
		return ctx.Err()
	case <-w.reset:
		return limiters.ErrClosed
	case <-g.done:
		return limiters.ErrClosed
	}
}

// Reset forgets key's bucket: its next call finds it full. Acquire calls
// waiting on the key fail with limiters.ErrClosed. Resetting a key the
// repository does not hold does nothing.
func (g *GCRA) Reset(ctx context.Context, key string) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	g.t.reset(key)
	return nil
}

// SetRate gives every key, held or new, a token bucket of rate r and
// burst, keeping each key's state: the permits a key has used carry over,
// counted at the new rate and capped by the new burst (a key that was full
// stays full; one that was empty stays empty). Reservations already made by
// Acquire keep their times, and the bucket is empty when the last of them
// is due. A state is kept to the nanosecond: when r's emission interval is
// not a whole number of nanoseconds, a key's next refill may come up to
// 1 ns later than a limiters.GCRA's would. An invalid rate or burst is an
// error, and changes nothing.
func (g *GCRA) SetRate(r limiters.Rate, burst int) error {
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Rate: r, Limit: burst}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("repository: SetRate: %w", err)
	}
	if g.closed.Load() {
		return limiters.ErrClosed
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.t.setRate(newRerate(g.rate, g.burst, r, burst))
	g.rate, g.burst = r, burst
	return nil
}

// Release does nothing: token buckets hold no permits.
func (g *GCRA) Release(context.Context, string, int) error { return nil }

// HoldsPermits reports false: a token bucket's permits are spent when
// granted, so callers (the Transport, the server) need not keep them until a
// Release.
func (g *GCRA) HoldsPermits() bool { return false }

// Len is the number of keys held.
func (g *GCRA) Len() int { return g.t.stats().Keys }

// Stats reports the number of keys held (as Len does) and what the
// WithMaxKeys bound has cost: keys evicted while their bucket was not full
// again, and new keys refused.
func (g *GCRA) Stats() Stats { return g.t.stats() }

// Close fails every waiting Acquire with limiters.ErrClosed and makes later
// calls fail with it. It is idempotent.
func (g *GCRA) Close() error {
	if !g.closed.Swap(true) {
		close(g.done)
	}
	return nil
}
