# throttle — the commands the README names.
GO         ?= go
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME   ?= 10s

# The nested modules: the Prometheus collectors, the OpenTelemetry
# instruments, the service that serves them, and the gRPC interceptors
# (each with a replace of the library for local development; the
# library's module requires none of Prometheus, OpenTelemetry, gRPC).
MODULES    = metrics/throttleprom metrics/throttleotel cmd/ratelimitd grpcthrottle

.PHONY: test bench fuzz lint demo demo-fleet service redis-server proxies toxiproxy

# The Redis fault suite (repository/redisrepo's TestToxiproxy) runs a real
# Toxiproxy between the library and redis-server, built from its Go module
# (tests only; not a dependency of any module here).
TOXIPROXY_VERSION = v2.5.0
TOXIPROXY         = $(CURDIR)/bin/toxiproxy-server

# vet + the race-enabled, shuffled test suite of the library (the Redis
# suites included: they start their own redis-server processes and may not
# skip), then the benchmark module's own vet and (non-benchmark) tests.
test: redis-server proxies toxiproxy
	$(GO) vet ./...
	@if $(GO) list -deps . ./limiters ./server ./headers ./keyextract ./repository | grep -q 'redis/go-redis'; then \
		echo "go-redis is imported by a package that must not import it"; exit 1; fi
	@if $(GO) list -deps ./... | grep -q 'prometheus'; then \
		echo "the library's module must not import Prometheus (metrics/throttleprom does)"; exit 1; fi
	@if grep -q 'google.golang.org/grpc' go.mod; then \
		echo "the library's module must not require gRPC (grpcthrottle does)"; exit 1; fi
	@if $(GO) list -deps $$($(GO) list ./... | grep -v -e /internal/testutil/ -e /cmd/) | grep -q 'internal/testutil'; then \
		echo "a library package imports internal/testutil (test-only helpers)"; exit 1; fi
	THROTTLE_TOXIPROXY=$(TOXIPROXY) THROTTLE_REQUIRE_REDIS=1 $(GO) test -race -shuffle=on -count=1 ./...
	@set -e; for m in $(MODULES); do \
		(cd $$m && $(GO) vet ./... && THROTTLE_REQUIRE_REDIS=1 $(GO) test -race -shuffle=on -count=1 ./...); \
	done
	cd bench && $(GO) vet ./... && THROTTLE_TOXIPROXY=$(TOXIPROXY) THROTTLE_REQUIRE_PROXIES=1 $(GO) test -count=1 ./...

# Ours and our peers side by side; compare with benchstat (see bench/README.md).
bench:
	cd bench && $(GO) test -run='^$$' -bench=. -benchmem -count=6 -benchtime=200ms . | tee results.txt

# A short run of every fuzz target in the module.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)"
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...); done

demo:
	$(GO) run ./cmd/throttle-demo

# Four worker processes behind one API key, each Transport alone, then
# sharing a FeedbackStore on Redis (the demo starts its own redis-server).
demo-fleet: redis-server
	$(GO) run ./cmd/throttle-fleet-demo

# The rate-limit service on 127.0.0.1:8090, in memory, with the built-in
# example policy (cmd/ratelimitd/example-policy.yaml); pass flags with
# ARGS="--policy my.yaml --redis-url redis://localhost:6379".
service:
	$(GO) -C cmd/ratelimitd build -o $(CURDIR)/bin/ratelimitd .
	./bin/ratelimitd $(ARGS)

# The Redis suites need redis-server and redis-cli (Debian's redis-server
# package has both); install them when absent (CI runs as root).
redis-server:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq redis-server; }

# The bench module's interop tests run the Transport against a real nginx
# (limit_req; Debian's nginx-light), a real HAProxy (a stick table's
# request rate) and real rate limiters from npm (express-rate-limit,
# @fastify/rate-limit, koa-ratelimit, @nestjs/throttler, rate-limiter-flexible:
# bench/realservers, installed with
# npm ci from its lock file; Node.js and npm from Debian when the machine
# has no node) and from Debian's Python (Flask-Limiter: its package
# python3-flask-limiter, for /usr/bin/python3). Installing them may start the distributions' own servers:
# the tests start their own on free loopback ports and never touch those.
proxies:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || \
		{ apt-get update -qq && apt-get install -y -qq nginx-light; }
	@command -v haproxy >/dev/null 2>&1 || test -x /usr/sbin/haproxy || \
		{ apt-get update -qq && apt-get install -y -qq haproxy; }
	@{ command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1; } && command -v npm >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq nodejs npm; }
	@test bench/realservers/node_modules/.package-lock.json -nt bench/realservers/package-lock.json || \
		(cd bench/realservers && npm ci --no-audit --no-fund --loglevel=error)
	@/usr/bin/python3 -c 'import flask_limiter' 2>/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq python3-flask-limiter; }

# toxiproxy-server, built once into bin/ from its Go module at a pinned
# version (the tests build it themselves when THROTTLE_TOXIPROXY is unset).
toxiproxy:
	@test -x $(TOXIPROXY) || { mkdir -p $(CURDIR)/bin/.toxiproxy && \
		GOBIN=$(CURDIR)/bin/.toxiproxy GOFLAGS= $(GO) install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION) && \
		mv $(CURDIR)/bin/.toxiproxy/server $(TOXIPROXY) && rmdir $(CURDIR)/bin/.toxiproxy; }
