package throttleprom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/metrics/throttleprom"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/server"
)

// Server decisions counted by result: a limit of 2 per hour, 3 requests.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := throttleprom.New(reg)
	if err != nil {
		panic(err)
	}
	repo := repository.NewMemory(func(string) limiters.Limiter { return limiters.NewFixedWindow(2, time.Hour) })
	defer repo.Close()
	rl := server.New(repo, server.WithObserver(m.ServerObserver()))
	h := rl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "throttle_server_decisions_total" {
			continue
		}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if l.GetName() == "result" {
					fmt.Println(l.GetValue(), s.Counter.GetValue())
				}
			}
		}
	}
	// Output:
	// allowed 2
	// near_limit 1
	// rejected 1
}
