package main

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
)

var loadN = flag.Int("load", 0, "TestLoad: checks per run (0: a short smoke run of 2000)")

// TestLoad measures the service on loopback over one keep-alive connection:
// single checks one after another (latency per check: p50, p99), then the
// same count in batches of 100. With -load N it logs checks/s and the
// percentiles for bench/README.md; by default it is a short run that only
// requires every check to be answered.
//
//	go test -run TestLoad -load 50000 -v .
func TestLoad(t *testing.T) {
	n := *loadN
	if n == 0 {
		n = 2000
	}
	const loadPolicy = `plans: {p: {default: {limits: [{algorithm: gcra, rate: 1000000/s, limit: 1000000}]}}}`
	file := writePolicy(t, loadPolicy)
	s := redistest.Start(t)
	backends := map[string][]string{
		"memory": {"--policy", file},
		"redis":  {"--policy", file, "--redis-url", "redis://" + s.Addr},
	}
	for _, name := range []string{"memory", "redis"} {
		args := backends[name]
		t.Run(name, func(t *testing.T) {
			p := launch(t, args...)
			tr := &http.Transport{MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			post := func(path string, body []byte) {
				resp, err := hc.Post(p.url+path, "application/json", bytes.NewReader(body))
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode)
			}
			single := []byte(`{"key":"k1","cost":1}`)
			for range 200 { // warm up
				post("/v1/check", single)
			}
			lat := make([]time.Duration, n)
			start := time.Now()
			for i := range n {
				t0 := time.Now()
				post("/v1/check", single)
				lat[i] = time.Since(t0)
			}
			singleRate := float64(n) / time.Since(start).Seconds()
			slices.Sort(lat)

			const size = 100
			items := make([]string, size)
			for i := range items {
				items[i] = `{"key":"k` + strconv.Itoa(i) + `"}`
			}
			batch := []byte(`{"checks":[` + strings.Join(items, ",") + `]}`)
			blat := make([]time.Duration, 0, n/size)
			start = time.Now()
			for range n / size {
				t0 := time.Now()
				post("/v1/check/batch", batch)
				blat = append(blat, time.Since(t0))
			}
			batchRate := float64(n/size*size) / time.Since(start).Seconds()
			slices.Sort(blat)
			t.Logf("%s single: %d checks, %.0f checks/s, p50 %v, p99 %v", name, n, singleRate, lat[n/2], lat[n*99/100])
			t.Logf("%s batch of %d: %d checks, %.0f checks/s (%.1fx single), p50 %v, p99 %v per batch",
				name, size, n/size*size, batchRate, batchRate/singleRate, blat[len(blat)/2], blat[len(blat)*99/100])
			require.Equal(t, 0, p.stop(t))
		})
	}
}
