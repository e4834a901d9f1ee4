package apisim

import (
	"net/http"
	"net/http/httptest"
	"time"
)

// Reorder wraps a simulator so that its answers come back in a different
// order than it decided them: the wrapped handler decides at once (in
// arrival order), and its response is held for a random delay in [0, Max]
// before it is written, so a "remaining 3" can reach the client after a
// "remaining 2". Delays are drawn from a generator seeded with Seed, in the
// order requests arrive. It counts nothing itself: ask the wrapped handler.
type Reorder struct {
	Handler http.Handler
	Max     time.Duration
	Seed    uint64

	delays delays
}

// ServeHTTP lets the wrapped handler decide, waits, then writes its answer.
func (o *Reorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	o.Handler.ServeHTTP(rec, r)
	if Sleep(r.Context(), o.delays.draw(o.Seed, o.Max)) != nil {
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}
