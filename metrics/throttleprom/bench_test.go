package throttleprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/metrics/throttleprom"
	"github.com/throttlekit/throttle/server"
)

// The observers run on every decision: once a label combination has been
// seen they must not allocate.
func TestObserversDoNotAllocate(t *testing.T) {
	m, err := throttleprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv, tr := m.ServerObserver(), m.TransportObserver()
	sev := server.Event{Kind: server.EventAllowed, Plan: "free", Endpoint: "POST /api/ask", Key: "k"}
	tev := throttle.Event{Kind: throttle.EventAcquired, Key: "api.example.com:443", Wait: time.Millisecond}
	srv(sev)
	tr(tev)
	if n := testing.AllocsPerRun(1000, func() { srv(sev) }); n != 0 {
		t.Errorf("ServerObserver: %v allocs per event", n)
	}
	if n := testing.AllocsPerRun(1000, func() { tr(tev) }); n != 0 {
		t.Errorf("TransportObserver: %v allocs per event", n)
	}
}

func BenchmarkServerObserver(b *testing.B) {
	m, _ := throttleprom.New(prometheus.NewRegistry())
	obs := m.ServerObserver()
	ev := server.Event{Kind: server.EventAllowed, Plan: "free", Endpoint: "POST /api/ask", Key: "k"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			obs(ev)
		}
	})
}
