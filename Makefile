# lockkit — every command a developer or CI needs. README.md and .ci/run use these targets.
GO              ?= go
STATICCHECK     ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# A test binary of `make test` that runs longer is stopped with every goroutine's stack (the slowest,
# core and internal/chaos, take about 3 minutes on 2 cores): a hang fails the run, not CI's clock.
TEST_TIMEOUT    ?= 12m
BENCH_COUNT     ?= 1
BENCH_TIME      ?= 2s
GOBIN           ?= $(shell $(GO) env GOPATH)/bin
# The newer of the two supported Go releases: lint also builds and vets every module with it.
GO_NEXT         ?= go1.27.3
# Runs a command in each module (the root and every nested go.mod), each with its own go.mod.
EACH_MODULE     := ./scripts/modules.sh
# How many modules `make test` tests at once (each runs its packages in parallel as go test does;
# most of the suite's time is spent waiting on TTLs, timers and servers, not on the CPU). Two:
# internal/chaos and the root still run side by side; a third beside them took a 2-core host to
# load 5-11 and failed timing-bound tests (issue #44).
TEST_JOBS       ?= 2

.PHONY: test lint bench bench-compare server-instructions chaos compat demo cli deps fmt tidy

## test: install redis-server if missing, then run every test of every module with the race detector,
## $(TEST_JOBS) modules at once (each module's output whole when it ends, with its time).
test: deps
	$(EACH_MODULE) -j $(TEST_JOBS) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## deps: install redis-server, redis-cli and postgresql with apt-get when they are missing.
deps:
	@./scripts/deps.sh

## lint: for every module: gofmt, go.mod/go.sum tidy (fails when `go mod tidy` would change them),
## go vet, staticcheck (installed at a pinned version), then a build and vet under $(GO_NEXT)
## (fetched by the go command through the module proxy); go.work lists every module; and
## scripts/modcheck.sh: every nested module builds against the others at HEAD without replace
## directives, published modules require no unpublished one, and a user of core inherits go-redis only.
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(EACH_MODULE) $(GO) mod tidy -diff
	@want="$$($(EACH_MODULE) | sed 's|^|$(CURDIR)/|; s|/\.$$||' | sort)"; \
	  got="$$(GOWORK=$(CURDIR)/go.work $(GO) list -m -f '{{.Dir}}' | sort)"; \
	  if [ "$$want" != "$$got" ]; then \
	    printf 'go.work must use every module and nothing else.\nmodules:\n%s\ngo.work:\n%s\n' "$$want" "$$got"; exit 1; fi
	$(EACH_MODULE) $(GO) vet ./...
	$(GO) install $(STATICCHECK)
	$(EACH_MODULE) $(GOBIN)/staticcheck ./...
	$(EACH_MODULE) env GOTOOLCHAIN=$(GO_NEXT) $(GO) build -o /dev/null ./...
	$(EACH_MODULE) env GOTOOLCHAIN=$(GO_NEXT) $(GO) vet ./...
	GO=$(GO) ./scripts/modcheck.sh

## bench: core benchmarks against a loopback redis-server (lockkit vs the raw SET NX floor).
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) -timeout 60m ./core/ ./middleware/httpmw/
	cd middleware/grpcmw && GOWORK=off $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) -timeout 60m .
	cd otel/test && GOWORK=off $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) -timeout 60m .

## server-instructions: Redis instructions per uncontended lock + unlock (callgrind), for lockkit's
## scripts and the floors; a count that does not move with the machine's load.
server-instructions: deps
	./scripts/server-instructions.sh

## bench-compare: lockkit vs the raw floor, redsync and bsm/redislock, side by side (separate
## module under bench/, so lockkit's users never inherit those libraries); writes docs/benchmarks.md.
bench-compare: deps
	cd bench && $(GO) run ./cmd/compare -rounds 3 -out ../docs/benchmarks.md

## chaos: the full fault-injection suite (`make test` runs a bounded version); prints the table
## that docs/reliability.md publishes.
chaos: deps
	cd internal/chaos && LOCKKIT_CHAOS=full GOWORK=off $(GO) test -race -count=1 -timeout 30m -run Chaos -v .

## compat: the rolling-deploy check (docs/compat.md): a worker built at the baseline (the last
## release tag before HEAD, or 8145591 while there is none; COMPAT_BASE=REV for another) and one built from the
## working tree take every kind of hold on the same names of one redis-server; an oracle checks
## that no two conflicting holds were live at once and that every refusal names a key schema.
## 2-4 minutes on a loaded 2-core host (building both workers included). CI runs it after `make test`.
compat: deps
	GO=$(GO) COMPAT_BASE=$(COMPAT_BASE) ./scripts/compat.sh

## demo: the guided tour, with an embedded Redis (no setup); go.work makes the examples module
## runnable from the root.
demo:
	$(GO) run ./examples/demo

## cli: install the lockkit command from this checkout into $(GOBIN), stamped with the checkout's
## version (a v* tag, if any), commit, commit time and whether the tree had changes (-ldflags -X, so
## that "lockkit version" knows them also where VCS stamping is off: GOFLAGS=-buildvcs=false, or a
## go.work workspace, where go install records no commit).
cli:
	$(GO) install -ldflags "$(CLI_LDFLAGS)" ./cmd/lockkit
	@echo "installed $$($(GO) env GOBIN | grep . || echo $(GOBIN))/lockkit"

CLI_LDFLAGS = -X main.stampVersion=$(shell git describe --tags --match 'v[0-9]*' 2>/dev/null) \
  -X main.stampCommit=$(shell git rev-parse HEAD) -X main.stampTime=$(shell git log -1 --format=%cI) \
  -X main.stampModified=$(shell test -z "$$(git status --porcelain)" && echo false || echo true)

fmt:
	gofmt -w $$(git ls-files '*.go')

## tidy: go mod tidy in every module (what lint checks).
tidy:
	$(EACH_MODULE) $(GO) mod tidy
