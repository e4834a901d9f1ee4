//lint:file-ignore SA4006 the snippet is the README's own, which skips error checks for brevity

package throttleprom_test

// The README's Metrics snippet, verbatim, inside a function that gives it
// its free variables, so that the compiler checks it (this module has the
// Prometheus client; the root module's TestDocSnippets checks that the
// snippet is here). It is compiled, never run.

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/metrics/throttleprom"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

func readmeMetrics(repo repository.Repository, client *redis.Client, spec limiters.Spec, limiter limiters.Limiter) {
	m, err := throttleprom.New(prometheus.DefaultRegisterer)
	rl := server.New(repo, server.WithObserver(m.ServerObserver()))                   // throttle_server_decisions_total{result,policy,rule}
	tr := throttle.NewTransport(nil, throttle.WithObserver(m.TransportObserver()))    // throttle_transport_{requests_total,wait_seconds,paused_partitions,pauses_total}
	rr, err := redisrepo.New(client, spec, redisrepo.WithObserver(m.RedisObserver())) // throttle_redis_{errors_total,breaker_state}
	err = m.WatchLimiter("outbound", limiter)                                         // throttle_limiter_{queued,available}
	err = m.WatchTransport("github", tr)                                              // throttle_transport_{queued,in_flight}, from tr.Stats()
	_, _, _ = rl, rr, err
}

var _ = readmeMetrics
