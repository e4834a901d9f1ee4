# throttle — the commands the README names.
GO         ?= go
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME   ?= 10s

.PHONY: test bench fuzz lint demo

# vet + the race-enabled, shuffled test suite of the library, then the
# benchmark module's own vet and (non-benchmark) tests.
test:
	$(GO) vet ./...
	$(GO) test -race -shuffle=on -count=1 ./...
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

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

demo:
	$(GO) run ./cmd/throttle-demo
