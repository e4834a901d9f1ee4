package repository

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// floodRounds is the hostile scenario of issue 14: a key limited to 5 an
// hour asks 25 times, and between its requests a client that can mint keys
// sends one request each with 20 new keys, a second later, against a bound
// of 16 keys. The key must not be admitted more than 5 times. It returns how
// often the key was admitted and how many new keys were refused.
func floodRounds(t *testing.T, repo Repository) (admitted, refused int) {
	t.Helper()
	ctx := context.Background()
	for round := range 25 {
		d, err := repo.TryAcquire(ctx, "victim", 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
		time.Sleep(time.Second)
		for i := range 20 {
			_, err := repo.TryAcquire(ctx, fmt.Sprintf("minted-%d-%d", round, i), 1)
			if errors.Is(err, ErrTooManyKeys) {
				refused++
				continue
			}
			require.NoError(t, err)
		}
	}
	return admitted, refused
}

const (
	floodBound   = 16
	floodInserts = 25 * 20
)

func TestBoundFloodCannotResetAKey(t *testing.T) {
	repos := map[string]func(...GCRAOption) Repository{
		"Memory": func(opts ...GCRAOption) Repository {
			o := make([]Option, len(opts))
			for i := range opts {
				o[i] = opts[i]
			}
			return NewMemory(tokenBucket(limiters.PerHour(5), 5), o...)
		},
		"GCRA": func(opts ...GCRAOption) Repository { return NewGCRA(limiters.PerHour(5), 5, opts...) },
	}
	stats := func(r Repository) Stats { return r.(interface{ Stats() Stats }).Stats() }
	for name, newRepo := range repos {
		t.Run(name+"/RefuseNew", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo(WithMaxKeys(floodBound), WithOverflow(RefuseNew))
				defer r.Close()
				admitted, refused := floodRounds(t, r)
				assert.Equal(t, 5, admitted, "the key keeps its limit")
				// The victim and 15 minted keys fill the bound; every
				// later minted key is refused.
				assert.Equal(t, floodInserts-(floodBound-1), refused)
				assert.Equal(t, Stats{Keys: floodBound, Refused: int64(refused)}, stats(r))
			})
		})
		t.Run(name+"/EvictStale", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRepo(WithMaxKeys(floodBound))
				defer r.Close()
				admitted, refused := floodRounds(t, r)
				assert.Zero(t, refused, "new keys are served")
				assert.Equal(t, 5, admitted, "keys used less than the victim go first")
				s := stats(r)
				assert.Equal(t, floodBound, s.Keys)
				// Every minted key past the bound evicted a minted key
				// that was not full again: each is counted.
				assert.EqualValues(t, floodInserts-(floodBound-1), s.Evicted)
				assert.Zero(t, s.Refused)
			})
		})
	}
}

// TestRefuseNewStillForgetsFullKeys: refusing new keys applies only when no
// key is full again; a full key makes room, and is not counted.
func TestRefuseNewStillForgetsFullKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(tokenBucket(limiters.PerHour(5), 5), WithMaxKeys(2), WithOverflow(RefuseNew))
		defer m.Close()
		ctx := context.Background()
		for _, k := range []string{"a", "b"} {
			_, err := m.TryAcquire(ctx, k, 1)
			require.NoError(t, err)
		}
		_, err := m.TryAcquire(ctx, "c", 1)
		require.ErrorIs(t, err, ErrTooManyKeys)
		assert.Nil(t, m.Get("c"))
		assert.True(t, m.has("a") && m.has("b"), "no state lost")

		// A permit comes back every 12 minutes: then a is full again, and
		// makes room; b, which has used one more, is not.
		_, err = m.TryAcquire(ctx, "b", 1)
		require.NoError(t, err)
		time.Sleep(12 * time.Minute)
		d, err := m.TryAcquire(ctx, "c", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.False(t, m.has("a"))
		assert.Equal(t, Stats{Keys: 2, Refused: 2}, m.Stats(), "c twice (TryAcquire and Get); nothing evicted")
	})
}
