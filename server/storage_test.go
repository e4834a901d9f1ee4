package server_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// specRepo is a storage of the shape WithStorage wants, as a Redis one
// would be: one repository per set of specs, counting its calls.
type specRepo struct {
	*repository.Memory
	specs           []limiters.Spec
	tries, releases atomic.Int64
}

func (s *specRepo) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	s.tries.Add(1)
	return s.Memory.TryAcquire(ctx, key, n)
}

func (s *specRepo) Release(ctx context.Context, key string, n int) error {
	s.releases.Add(1)
	return s.Memory.Release(ctx, key, n)
}

// specStorage is a WithStorage function that records what it made.
type specStorage struct {
	mu   sync.Mutex
	made []*specRepo
}

func (st *specStorage) make(specs []limiters.Spec) (repository.Repository, error) {
	r := &specRepo{specs: specs, Memory: repository.NewMemory(func(string) limiters.Limiter {
		ls := make([]limiters.Limiter, len(specs))
		for i, s := range specs {
			ls[i], _ = s.New()
		}
		return limiters.Chain(ls...)
	})}
	st.mu.Lock()
	st.made = append(st.made, r)
	st.mu.Unlock()
	return r, nil
}

func TestPolicyStorage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conc := limiters.Spec{Algorithm: limiters.AlgConcurrency, Limit: 2}
		caps := []limiters.Spec{fixed(10, time.Hour)}
		st := &specStorage{}
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {
			Endpoints: map[string]server.Rule{
				"/ask":   {Limits: []limiters.Spec{fixed(3, time.Hour), conc}, CostCaps: caps},
				"/items": {Limits: []limiters.Spec{fixed(2, time.Hour)}},
			},
		}}}, server.WithStorage(st.make))
		// Called once per set of limits, in sorted order, with its specs.
		require.Len(t, st.made, 3)
		ask, askCaps, items := st.made[0], st.made[1], st.made[2]
		assert.Equal(t, []limiters.Spec{fixed(3, time.Hour), conc}, ask.specs)
		assert.Equal(t, caps, askCaps.specs)
		assert.Equal(t, []limiters.Spec{fixed(2, time.Hour)}, items.specs)

		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		a := "192.0.2.1:1"
		assert.Equal(t, 3, admitted(h, 4, "GET", "/ask", a))
		assert.Equal(t, 2, admitted(h, 3, "GET", "/items", a))
		// Every limit of a rule in one call per request.
		assert.EqualValues(t, 4, ask.tries.Load())
		assert.EqualValues(t, 3, askCaps.tries.Load(), "the refused request never reached the caps")
		assert.EqualValues(t, 3, items.tries.Load())
		// Only the limits that hold permits (the concurrency limit of /ask)
		// are given back, once per admitted request.
		assert.EqualValues(t, 3, ask.releases.Load())
		assert.Zero(t, askCaps.releases.Load())
		assert.Zero(t, items.releases.Load())

		p.Close()
		for _, r := range st.made {
			_, err := r.Memory.TryAcquire(context.Background(), "k", 1)
			assert.ErrorIs(t, err, limiters.ErrClosed, "the policy closes what the storage made")
		}
	})
}

// permitRepo says whether it holds permits.
type permitRepo struct {
	specRepo
	holds bool
}

func (p *permitRepo) HoldsPermits() bool { return p.holds }

func TestMiddlewareReleasesOnlyWhatIsHeld(t *testing.T) {
	for _, holds := range []bool{false, true} {
		repo := &permitRepo{holds: holds, specRepo: specRepo{Memory: windowRepo(5)}}
		h := server.New(repo).Middleware(ok)
		assert.Equal(t, 5, admitted(h, 6, "GET", "/", "192.0.2.1:1"))
		if holds {
			assert.EqualValues(t, 5, repo.releases.Load())
		} else {
			assert.Zero(t, repo.releases.Load())
		}
		repo.Close()
	}
	// A repository that does not say is released (harmless for a rate
	// limiter; vital for a semaphore).
	repo := &specRepo{Memory: windowRepo(5)}
	defer repo.Close()
	assert.Equal(t, 1, admitted(server.New(repo).Middleware(ok), 1, "GET", "/", "192.0.2.1:1"))
	assert.EqualValues(t, 1, repo.releases.Load())
}

func TestChargeCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {
			Default: &server.Rule{
				Limits:   []limiters.Spec{fixed(100, time.Hour)},
				CostCaps: []limiters.Spec{fixed(100, time.Hour)},
			},
		}}}, server.WithChargeAfter(), server.WithCapCost(func(keyextract.Request) int { return 1 }))
		// Each request is charged 1 when admitted (an estimate), and the
		// rest (say, tokens) once its handler has run.
		var got []limiters.Decision
		h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := server.ChargeCost(r.Context(), 60)
			require.NoError(t, err)
			got = append(got, d)
		}))
		a := "192.0.2.1:1"
		require.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
		require.Len(t, got, 1)
		assert.True(t, got[0].Allowed)
		assert.Equal(t, 39, got[0].Remaining)
		// 38 left after the next admission: its charge of 60 takes those 38
		// and says so.
		require.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
		require.Len(t, got, 2)
		assert.False(t, got[1].Allowed)
		assert.Equal(t, 0, got[1].Remaining)
		// The caps are spent: the caller is refused until they refill...
		w := do(h, "GET", "/", a)
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Len(t, got, 2)
		// ...while another caller is not.
		assert.Equal(t, http.StatusOK, do(h, "GET", "/", "192.0.2.2:1").Code)
		time.Sleep(time.Hour)
		assert.Equal(t, http.StatusOK, do(h, "GET", "/", a).Code)
	})
}

func TestChargeCostNeedsCostCaps(t *testing.T) {
	rules := map[string]server.Rule{
		"/caps":   {CostCaps: []limiters.Spec{fixed(100, time.Hour)}},
		"/nocaps": {Limits: []limiters.Spec{fixed(100, time.Hour)}},
	}
	_, err := server.ChargeCost(context.Background(), 1)
	assert.ErrorIs(t, err, server.ErrNoCostCaps)
	for _, after := range []bool{false, true} {
		var opts []server.PolicyOption
		if after {
			opts = append(opts, server.WithChargeAfter())
		}
		p := mustPolicy(t, server.PolicyConfig{Plans: map[string]server.Plan{"p": {Endpoints: rules}}}, opts...)
		var errs []error
		h := server.New(nil, server.WithPolicy(p)).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := server.ChargeCost(r.Context(), 1)
			errs = append(errs, err)
		}))
		do(h, "GET", "/caps", "192.0.2.1:1")
		do(h, "GET", "/nocaps", "192.0.2.1:1")
		require.Len(t, errs, 2)
		assert.Equal(t, after, errs[0] == nil, "with caps, WithChargeAfter %v: %v", after, errs[0])
		assert.True(t, errors.Is(errs[1], server.ErrNoCostCaps))
	}
}
