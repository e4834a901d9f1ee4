package server

import (
	"context"
	"errors"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// ErrNoCostCaps is returned by ChargeCost for a context that is not that of
// a request admitted under a Policy rule with cost caps (and WithChargeAfter).
var ErrNoCostCaps = errors.New("server: no cost caps for this request")

// chargeKey is the context key of a request's *charge.
type chargeKey struct{}

// charge is what ChargeCost needs of an admitted request: its rule's cost
// caps and its caller.
type charge struct {
	repo repository.Repository
	key  string
}

// ChargeCost charges cost more units to the cost caps of the Policy rule
// that admitted a request (under a Policy made WithChargeAfter), for a cost
// known only once the handler has run:
// the tokens an LLM completion used, the bytes a download sent. ctx is the
// request's context, as the handler got it (or one derived from it); its
// cancellation does not stop the charge.
//
// A limiter cannot go into debt: when the caps have less than cost left,
// ChargeCost takes all that is left, so that the caller's next requests are
// refused until the caps refill, and the Decision it returns is not
// Allowed. Otherwise the Decision is the caps' after the charge. A cost of
// zero or less charges nothing and reports the caps' state.
//
// It fails with ErrNoCostCaps when ctx is not that of a request admitted by
// a rule with CostCaps under a Policy made WithChargeAfter, and with the
// repository's error.
func ChargeCost(ctx context.Context, cost int) (limiters.Decision, error) {
	c, _ := ctx.Value(chargeKey{}).(*charge)
	if c == nil {
		return limiters.Decision{}, ErrNoCostCaps
	}
	ctx = context.WithoutCancel(ctx)
	cost = max(cost, 0)
	d, err := tryAcquire(ctx, c.repo, c.key, cost)
	if err != nil || d.Allowed {
		return d, err
	}
	// Not all of it fits: take what is left.
	if rest := min(d.Remaining, cost); rest > 0 {
		if d, err = c.repo.TryAcquire(ctx, c.key, rest); err != nil {
			return d, err
		}
		d.Allowed = false
	}
	return d, nil
}
