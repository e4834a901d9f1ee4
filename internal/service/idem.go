package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func subtleEqual(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }

// idempotency remembers the answers to requests carrying an
// Idempotency-Key: do runs f once per key within the TTL and gives every
// request with that key f's answer. A key reused with another request (fp
// differs) is answered 422. Answers of 5xx are not remembered: a retry runs
// again.
type idempotency interface {
	do(ctx context.Context, key string, fp [32]byte, f func() (int, []byte)) (int, []byte)
	close() error
}

var (
	errReused    = problem(http.StatusUnprocessableEntity, "this Idempotency-Key was used with a different request")
	errCancelled = problem(http.StatusServiceUnavailable, "the request was cancelled while the first request with its Idempotency-Key was being decided")
)

// memoryIdem keeps answers in memory, at most max of them (the oldest go
// first); they expire after ttl.
type memoryIdem struct {
	ttl time.Duration
	max int

	mu    sync.Mutex
	m     map[string]*idemEntry
	order []*idemEntry // by creation, hence by expiry
}

type idemEntry struct {
	key     string
	fp      [32]byte
	expires time.Time
	done    chan struct{} // closed once status and body are set
	status  int
	body    []byte
}

func newMemoryIdem(ttl time.Duration, max int) *memoryIdem {
	return &memoryIdem{ttl: ttl, max: max, m: map[string]*idemEntry{}}
}

func (m *memoryIdem) do(ctx context.Context, key string, fp [32]byte, f func() (int, []byte)) (int, []byte) {
	now := time.Now()
	m.mu.Lock()
	for len(m.order) > 0 && (len(m.order) >= m.max || now.After(m.order[0].expires)) {
		old := m.order[0]
		m.order[0] = nil
		m.order = m.order[1:]
		if m.m[old.key] == old {
			delete(m.m, old.key)
		}
	}
	if e := m.m[key]; e != nil {
		m.mu.Unlock()
		if e.fp != fp {
			return errReused.Status, jsonBytes(errReused)
		}
		select {
		case <-e.done:
			return e.status, e.body
		case <-ctx.Done():
			return errCancelled.Status, jsonBytes(errCancelled)
		}
	}
	e := &idemEntry{key: key, fp: fp, expires: now.Add(m.ttl), done: make(chan struct{})}
	m.m[key] = e
	m.order = append(m.order, e)
	m.mu.Unlock()

	e.status, e.body = f()
	if e.status >= 500 {
		m.mu.Lock()
		if m.m[key] == e {
			delete(m.m, key)
		}
		m.mu.Unlock()
	}
	close(e.done)
	return e.status, e.body
}

func (*memoryIdem) close() error { return nil }

// redisIdem keeps answers in Redis, shared by every replica: the first
// request takes the key with SET NX (as "pending"), and stores its answer
// when done; a retry meanwhile polls for the answer every 10ms.
type redisIdem struct {
	client redis.UniversalClient
	ttl    time.Duration
}

// idemRecord is a remembered answer in Redis.
type idemRecord struct {
	FP     string          `json:"fp"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

const pending = "pending:"

func (r *redisIdem) do(ctx context.Context, key string, fp [32]byte, f func() (int, []byte)) (int, []byte) {
	sum := sha256.Sum256([]byte(key))
	rk := "ratelimitd:idem:" + hex.EncodeToString(sum[:])
	fps := hex.EncodeToString(fp[:])
	for {
		ok, err := r.client.SetNX(ctx, rk, pending+fps, r.ttl).Result()
		if err != nil {
			p := problem(http.StatusServiceUnavailable, "the idempotency store failed: "+err.Error())
			return p.Status, jsonBytes(p)
		}
		if ok {
			status, body := f()
			bg := context.WithoutCancel(ctx)
			if status >= 500 {
				r.client.Del(bg, rk)
			} else {
				rec, _ := json.Marshal(idemRecord{FP: fps, Status: status, Body: body})
				r.client.Set(bg, rk, rec, r.ttl)
			}
			return status, body
		}
		status, body, again := r.wait(ctx, rk, fps)
		if !again {
			return status, body
		}
	}
}

// wait polls for the answer of the request that holds rk; again reports
// that the key went away (that request failed) and may be taken.
func (r *redisIdem) wait(ctx context.Context, rk, fps string) (status int, body []byte, again bool) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return errCancelled.Status, jsonBytes(errCancelled), false
		case <-t.C:
		}
		v, err := r.client.Get(ctx, rk).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return 0, nil, true
		case err != nil:
			p := problem(http.StatusServiceUnavailable, "the idempotency store failed: "+err.Error())
			return p.Status, jsonBytes(p), false
		case strings.HasPrefix(v, pending):
			if v[len(pending):] != fps {
				return errReused.Status, jsonBytes(errReused), false
			}
			t.Reset(10 * time.Millisecond)
			continue
		}
		var rec idemRecord
		if json.Unmarshal([]byte(v), &rec) != nil {
			p := problem(http.StatusServiceUnavailable, "the idempotency store holds a malformed record")
			return p.Status, jsonBytes(p), false
		}
		if rec.FP != fps {
			return errReused.Status, jsonBytes(errReused), false
		}
		return rec.Status, rec.Body, false
	}
}

func (*redisIdem) close() error { return nil }
