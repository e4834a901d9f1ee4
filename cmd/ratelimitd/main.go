// Command ratelimitd is a rate-limit service: gateways and services ask it
// over HTTP whether a caller may proceed, and it decides by a policy file
// (the format server.LoadPolicy reads), with the limits in memory or in
// Redis (or Redis Cluster), shared by every replica.
//
// Usage:
//
//	ratelimitd [--addr 127.0.0.1:8090] [--policy FILE] [--redis-url URL]
//	           [--fail-mode closed|open|local] [--idempotency-ttl 24h]
//	           [--header-timeout 5s] [--drain-timeout 30s]
//
// Without --policy it decides by example-policy.yaml, built in. Without
// --redis-url the limits live in memory. --redis-url takes redis://host:port/db
// (rediss:// for TLS); a URL with addr= parameters
// (redis://h1:7000?addr=h2:7001) or cluster=true is a Redis Cluster;
// --fail-mode says what a check gets while Redis is unreachable (closed: a
// 503 answer; open: allowed; local: decided by a limiter in memory).
// RATELIMITD_ADMIN_TOKEN, from the environment, is the bearer token of the
// admin endpoints (DELETE /v1/state/{key}, POST /v1/policies/reload),
// which are refused while it is unset.
//
// The API (JSON in snake_case, durations in seconds):
//
//	POST   /v1/check            {"key","cost","endpoint","plan"} → {"allowed","limit","remaining","reset_after","retry_after","final","policy","rule","limits","headers"}
//	POST   /v1/check/batch      {"checks":[...]} → {"results":[...]}
//	GET    /v1/state/{key}      ?endpoint=&plan=: the state, spending nothing
//	DELETE /v1/state/{key}      reset the key (admin)
//	GET    /v1/policies         the policy in force
//	POST   /v1/policies/reload  reload the policy file (admin); SIGHUP does too
//	GET    /healthz, /readyz, /metrics
//
// The cost of a check is the weight charged to each of its rule's limits
// (and, when the limits admit it, to the rule's cost caps: budgets of
// units such as LLM tokens per hour, charged separately). "limit",
// "remaining", "reset_after" and "retry_after" describe one limit, the one
// that binds (the one that refused, else the one with the least left);
// "limits" lists each limit the check met, named after the rule and the
// limit as the RateLimit-Policy field names them. A check whose cost is
// more than a limit ever admits at once is final: "final": true and
// "retry_after": null, since no wait can cure it.
//
// A refused check is HTTP 200 with "allowed": false. SIGTERM (or SIGINT)
// stops accepting connections, lets the checks in flight finish, and exits
// 0.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/service"
	"github.com/throttlekit/throttle/metrics/throttleprom"
	"github.com/throttlekit/throttle/repository/redisrepo"
)

//go:embed example-policy.yaml
var examplePolicy []byte

func main() {
	os.Exit(run(os.Args[1:], os.Getenv("RATELIMITD_ADMIN_TOKEN"), os.Stderr))
}

// run is the service; it returns the exit status.
func run(args []string, token string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ratelimitd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "the address to listen on")
	policy := fs.String("policy", "", "the policy file, YAML or JSON (default: the built-in example-policy.yaml)")
	redisURL := fs.String("redis-url", "", "Redis or Redis Cluster URL (default: limits in memory)")
	failMode := fs.String("fail-mode", "closed", "with Redis unreachable: closed (answer 503), open (allow) or local (decide in memory)")
	idemTTL := fs.Duration("idempotency-ttl", 24*time.Hour, "how long an Idempotency-Key's answer is kept")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long SIGTERM waits for checks in flight")
	headerTimeout := fs.Duration("header-timeout", 5*time.Second, "how long a client may take to send a request's headers (and, ×2, its body)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := throttleprom.New(reg)
	if err != nil {
		log.Error("metrics", "err", err)
		return 1
	}
	cfg := service.Config{
		PolicyFile:     *policy,
		Policy:         examplePolicy,
		AdminToken:     token,
		IdempotencyTTL: *idemTTL,
		Logger:         log,
		Observer:       m.ServerObserver(),
		RedisObserver:  m.RedisObserver(),
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}
	if cfg.FailMode, err = parseFailMode(*failMode); err != nil {
		log.Error("bad --fail-mode", "err", err)
		return 2
	}
	if *redisURL != "" {
		client, err := redisClient(*redisURL)
		if err != nil {
			log.Error("bad --redis-url", "err", err)
			return 2
		}
		defer client.Close()
		cfg.Redis = client
	}
	svc, err := service.New(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer svc.Close()
	if token == "" {
		log.Warn("RATELIMITD_ADMIN_TOKEN is not set: reset and reload over HTTP are refused")
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	srv := &http.Server{
		Handler:           svc.Handler(),
		ReadHeaderTimeout: *headerTimeout,
		ReadTimeout:       2 * *headerTimeout,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	backend := "memory"
	if cfg.Redis != nil {
		backend = "redis"
	}
	log.Info("listening", "addr", ln.Addr().String(), "backend", backend)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	for {
		select {
		case err := <-served:
			log.Error("serving failed", "err", err)
			return 1
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				_ = svc.Reload() // logged, and a bad file keeps the policy in force
				continue
			}
			log.Info("draining", "signal", sig.String())
			ctx, cancel := context.WithTimeout(context.Background(), *drain)
			err := srv.Shutdown(ctx)
			cancel()
			if err != nil {
				log.Error("drain incomplete", "err", err)
				return 1
			}
			log.Info("stopped")
			return 0
		}
	}
}

func parseFailMode(s string) (redisrepo.FailMode, error) {
	switch s {
	case "closed":
		return redisrepo.FailClosed, nil
	case "open":
		return redisrepo.FailOpen, nil
	case "local":
		return redisrepo.FailLocal, nil
	}
	return 0, fmt.Errorf("%q: want closed, open or local", s)
}

// redisClient connects to a Redis URL, or a Redis Cluster's: one with addr=
// parameters or cluster=true.
func redisClient(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if q.Has("addr") || q.Get("cluster") == "true" {
		q.Del("cluster")
		u.RawQuery = q.Encode()
		opt, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, err
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opt), nil
	}
	if q.Has("cluster") {
		return nil, errors.New("cluster= takes true")
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}
