package apisim

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Quota is a generic quota server: Limit requests per fixed window
// (aligned to the Unix epoch, so windows agree across restarts) for each
// API key, the key read from a request header (requests without it share
// the key ""). Every response carries X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (the window's end in epoch
// seconds, as GitHub and many others write it); a refusal is 429 with
// Retry-After in whole seconds until the window ends, rounded up.
//
// Stats.ByKey counts per API key.
type Quota struct {
	recorder
	limit  int64
	length time.Duration
	header string
	mu     sync.Mutex
	keys   map[string]*window // window.start is the epoch-aligned start
}

// NewQuota returns a Quota server of limit requests per window of length for each
// value of the header keyHeader (e.g. "X-API-Key"). It panics on a
// non-positive limit or window.
func NewQuota(limit int, length time.Duration, keyHeader string) *Quota {
	mustWindow("NewQuota", limit, length)
	return &Quota{limit: int64(limit), length: length, header: keyHeader, keys: make(map[string]*window)}
}

// ServeHTTP admits or refuses the request for its key.
func (q *Quota) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.enter()
	defer q.leave()
	key := r.Header.Get(q.header)
	now := time.Now()
	start := now.Truncate(q.length)
	end := start.Add(q.length)
	q.mu.Lock()
	win := q.keys[key]
	if win == nil {
		win = new(window)
		q.keys[key] = win
	}
	if !win.start.Equal(start) {
		win.start, win.used = start, 0
	}
	admit := win.used < q.limit
	if admit {
		win.used++
	}
	remaining := q.limit - win.used
	q.mu.Unlock()

	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(q.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
	if !admit {
		q.refuse(key, now)
		wait := end.Sub(now)
		h.Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	q.admit(key)
	w.WriteHeader(http.StatusOK)
}
