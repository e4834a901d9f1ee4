package server

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// memoryStore is a Policy's default storage: one repository.Memory for the
// whole policy, so that MaxKeys bounds all its limiters together, in which
// each set of limits (a rule's Limits or its CostCaps) is a view with a key
// prefix of its own.
type memoryStore struct {
	mem   *repository.Memory
	specs map[string][]limiters.Spec // by view prefix; written only while the policy is built
}

func newMemoryStore(maxKeys int, idle time.Duration) *memoryStore {
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	m := &memoryStore{specs: make(map[string][]limiters.Spec)}
	m.mem = repository.NewMemory(m.newLimiter, repository.WithMaxKeys(maxKeys), repository.WithIdleTimeout(idle))
	return m
}

// add is the storage function: a view for specs.
func (m *memoryStore) add(specs []limiters.Spec) (repository.Repository, error) {
	prefix := strconv.Itoa(len(m.specs)) + "|"
	m.specs[prefix] = specs
	return view{mem: m.mem, prefix: prefix}, nil
}

// newLimiter is the repository's factory. Keys come only from views, as
// the view's prefix and the caller's key.
func (m *memoryStore) newLimiter(key string) limiters.Limiter {
	i := strings.IndexByte(key, '|')
	specs := m.specs[key[:i+1]]
	ls := make([]limiters.Limiter, len(specs))
	for j, s := range specs {
		// NewPolicy built each spec once: building it again succeeds.
		ls[j], _ = build(s)
	}
	if len(ls) == 1 {
		return ls[0]
	}
	return limiters.Chain(ls...)
}

// view is one set of limits in a memoryStore.
type view struct {
	mem    *repository.Memory
	prefix string
}

func (v view) TryAcquire(ctx context.Context, key string, n int) (limiters.Decision, error) {
	return v.mem.TryAcquire(ctx, v.prefix+key, n)
}

func (v view) Acquire(ctx context.Context, key string, n int) error {
	return v.mem.Acquire(ctx, v.prefix+key, n)
}

func (v view) Release(ctx context.Context, key string, n int) error {
	return v.mem.Release(ctx, v.prefix+key, n)
}

// Close does nothing: the Policy closes the shared repository.
func (view) Close() error { return nil }
