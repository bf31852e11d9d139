# lockkit — every command a developer or CI needs. README.md and .ci/run use these targets.
GO              ?= go
STATICCHECK     ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT    ?= 30m
BENCH_COUNT     ?= 1
BENCH_TIME      ?= 2s
GOBIN           ?= $(shell $(GO) env GOPATH)/bin

.PHONY: test lint bench bench-compare chaos demo deps fmt

## test: install redis-server if missing, then run the whole suite with the race detector.
test: deps
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## deps: install redis-server, redis-cli and postgresql with apt-get when they are missing.
deps:
	@./scripts/deps.sh

## lint: gofmt, go vet and staticcheck (installed at a pinned version).
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) install $(STATICCHECK)
	$(GOBIN)/staticcheck ./...

## bench: core benchmarks against a loopback redis-server (lockkit vs the raw SET NX floor).
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) -timeout 60m ./core/ ./otel/ ./middleware/... 

## bench-compare: lockkit vs the raw floor, redsync and bsm/redislock, side by side (separate
## module under bench/, so lockkit's users never inherit those libraries); writes docs/benchmarks.md.
bench-compare: deps
	cd bench && $(GO) run ./cmd/compare -rounds 3 -out ../docs/benchmarks.md

## chaos: the full fault-injection suite (`make test` runs a bounded version); prints the table
## that docs/reliability.md publishes.
chaos: deps
	LOCKKIT_CHAOS=full $(GO) test -race -count=1 -timeout 30m -run Chaos -v ./internal/chaos/

## demo: the guided tour, with an embedded Redis (no setup).
demo:
	$(GO) run ./examples/demo

fmt:
	gofmt -w $$(git ls-files '*.go')
