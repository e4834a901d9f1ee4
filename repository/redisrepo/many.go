package redisrepo

import (
	"context"
	"fmt"
	"strings"

	"github.com/throttlekit/throttle/limiters"
)

// Call is one decision of TryAcquireMany: N permits of Key, as
// TryAcquire(ctx, Key, N) takes them (N == 0 is a peek).
type Call struct {
	Key string
	N   int
}

// TryAcquireMany decides calls as that many TryAcquire calls made one after
// the other would, in one round trip per WithBatch calls: the batch script
// decides them in order with one TIME, so calls on the same key see each
// other's grants (on a Cluster, one script call per hash tag, pipelined:
// one round trip per node). It does not wait for, or join, the round trip
// of other callers in flight. Decisions and errors are TryAcquire's, the
// fail mode included, index for index. In lease mode each call is decided
// locally, as TryAcquire decides it. It returns within WithTimeout per
// round trip, or at ctx's deadline if sooner, whatever the client's
// settings (see the package documentation). After Close every call fails with
// limiters.ErrClosed. A negative N panics, as TryAcquire does.
func (r *Repository) TryAcquireMany(ctx context.Context, calls []Call) ([]limiters.Decision, []error) {
	ds := make([]limiters.Decision, len(calls))
	errs := make([]error, len(calls))
	for _, c := range calls {
		checkN(c.N)
	}
	if r.q != nil {
		for i, c := range calls {
			ds[i], errs[i] = r.q.tryAcquire(ctx, c.Key, c.N)
		}
		return ds, errs
	}
	for lo := 0; lo < len(calls); lo += r.cfg.batch {
		hi := min(lo+r.cfg.batch, len(calls))
		r.tryMany(ctx, calls[lo:hi], ds[lo:hi], errs[lo:hi])
	}
	return ds, errs
}

// tryMany decides calls in one round trip, into ds and errs.
func (r *Repository) tryMany(ctx context.Context, calls []Call, ds []limiters.Decision, errs []error) {
	err := ctx.Err()
	select {
	case <-r.stop:
		err = limiters.ErrClosed
	default:
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return
	}
	batch := make([]*call, len(calls))
	ids := make([]string, len(calls))
	for i, c := range calls {
		op, n := "try", peekBeyond(c.N, r.maxN)
		if n == 0 {
			op = "peek"
		} else if r.conc {
			ids[i] = r.newID()
		}
		f, keys, args := r.request(c.Key, op, n, -1, ids[i], nil)
		batch[i] = &call{script: r.script, fast: f, keys: keys, args: args}
	}
	r.b.exec(ctx, batch)
	for i, c := range calls {
		ds[i], errs[i] = r.decided(ctx, c.Key, peekBeyond(c.N, r.maxN), ids[i], batch[i])
		if c.N > r.maxN { // as TryAcquire refuses it: no wait helps
			ds[i].Allowed, ds[i].RetryAfter = false, 0
		}
	}
}

// peekBeyond is the permits a call of n takes: none (a peek) when n is
// beyond the limit, which is then refused.
func peekBeyond(n, limit int) int {
	if n > limit {
		return 0
	}
	return n
}

// decided is the Decision of a TryAcquire of n permits of key from its
// call's reply (taken under lease id, if not empty).
func (r *Repository) decided(ctx context.Context, key string, n int, id string, bc *call) (limiters.Decision, error) {
	if ours(bc.err) {
		return limiters.Decision{}, fmt.Errorf("%w %s", ErrForeignValue, strings.TrimPrefix(bc.err.Error(), "THROTTLE foreign value at key "))
	}
	if bc.err != nil {
		return r.failTry(ctx, key, n, bc.err)
	}
	d, err := decision(bc.res)
	if err != nil {
		return d, err
	}
	if d.Allowed && id != "" {
		r.hold(key, id, n)
	}
	return d, nil
}
