package throttle

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// secondWindow refuses past limit requests a wall-clock second with 429
// and Retry-After-Ms, the time to the next second to the millisecond, and
// says nothing else: what a gRPC server that refuses with RetryInfo says
// once grpcthrottle has told it as HTTP.
type secondWindow struct {
	limit int

	mu                sync.Mutex
	second            int64
	n                 int
	admitted, refused int
}

func (s *secondWindow) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := now.Unix(); sec != s.second {
		s.second, s.n = sec, 0
	}
	if s.n < s.limit {
		s.n++
		s.admitted++
		return
	}
	s.refused++
	wait := time.Unix(s.second+1, 0).Sub(now)
	w.Header().Set("Retry-After-Ms", strconv.FormatInt((wait+time.Millisecond-1).Milliseconds(), 10))
	w.WriteHeader(http.StatusTooManyRequests)
}

// TestFineWaitWindow: against secondWindow at 5 a second, 10 goroutines
// and 60 successes, at every tenth of a second of start phase: at most 6
// refusals — the first wave's 5, which meet a limit nobody told, and the
// one that finds the window's length (teach measures the pace over the
// window between the ends of two waits) — and no slower than a window
// over the ideal.
func TestFineWaitWindow(t *testing.T) {
	for phase := time.Duration(0); phase < time.Second; phase += 100 * time.Millisecond {
		t.Run(phase.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(phase) // the bubble starts on a whole second
				s := &secondWindow{limit: 5}
				tr := NewTransport(&apisim.Transport{Handler: s, Latency: time.Millisecond, Jitter: 100 * time.Microsecond, Seed: 1})
				defer tr.Close()
				elapsed := drive(t, tr, 10, 60)
				t.Logf("%d ok, %d refused, %v", s.admitted, s.refused, elapsed)
				if s.refused > 6 {
					t.Errorf("%d refused, want at most 6", s.refused)
				}
				// 60 take 12 windows, the first entered phase into its second.
				if most := 12*time.Second - phase; elapsed > most {
					t.Errorf("took %v, want at most %v", elapsed, most)
				}
			})
		})
	}
}
