# sluice — build, test, benchmark. `make run` is the main job; `make test` runs every test.
GO       ?= go
BIN      ?= bin
FUZZTIME ?= 3s
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Build tags: `ucx` (the UCX peer transport, node/peer/ucx) when libucx is
# installed (Debian: libucx-dev); `make TAGS=` builds without it.
TAGS     ?= $(shell pkg-config --exists ucx 2>/dev/null && echo ucx)
GOTAGS    = $(if $(strip $(TAGS)),-tags "$(TAGS)")

.PHONY: all build plugins test vet unit invariants memory fuzz fuzz-long bench run farm golden generate clean

all: build plugins

build:
	$(GO) build $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/sluice ./cmd/sluice

# Every example trigger plugin is its own binary under $(BIN)/plugins/.
plugins:
	@mkdir -p $(BIN)/plugins
	@if [ -d plugins/examples ]; then $(GO) build -o $(BIN)/plugins/ ./plugins/examples/...; fi

vet:
	$(GO) vet $(GOTAGS) ./...

unit:
	$(GO) test -race $(GOTAGS) -timeout 20m ./...

# The packages with invariant checks (internal/invariants), their property
# and rule tests run again with every check on (without -race: the unit run
# has it, and the checks walk every open event, which -race makes 50x slower).
INVARIANT_PKGS ?= ./builder/ ./storage/ ./node/transport/shm/
invariants:
	$(GO) test -tags invariants -timeout 20m $(INVARIANT_PKGS)

# The tests of large memory use, which the unit run skips under the race
# detector: peak resident memory (VmHWM, of `sluice bench` and of the
# demo's run and replay (node/e2e) at their least budgets too; the
# detector's shadow memory swamps it) and exports of events of 64 MiB and
# more (minutes with it), the last also through a real node and `sluice
# store export` (node/e2e); and the demo's throughput under its memory
# cgroup limit against its throughput without one (node/e2e), a ratio
# the other packages' tests beside it in the unit run skew.
MEMORY_TESTS ?= ./node/transport/tcp/ ./schemas/table/ ./cmd/sluice/
memory:
	$(GO) test $(GOTAGS) -run 'Memory|Huge' -timeout 10m $(MEMORY_TESTS)
	$(GO) test $(GOTAGS) -run 'Huge|MemoryAtMinimum|MemoryLimitThroughput' -timeout 10m ./node/e2e/

# A short run of every fuzz target over its seed corpus and beyond.
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz.sh

# Before a release: the network-facing decoders (TCP stream, UDP/VTP, plugin
# wire layout, peer frames, farm messages) 10 minutes each, the others 2.
fuzz-long:
	FUZZTIME=2m NETFUZZTIME=10m FUZZJOBS=$(or $(FUZZJOBS),1) GO=$(GO) bash scripts/fuzz.sh

test: vet unit invariants memory fuzz

# Every benchmark of the project, one line each with its figure and its
# ratio to the baseline measured in the same run.
bench: build plugins
	GO=$(GO) TAGS="$(TAGS)" bash scripts/bench.sh

run: build plugins
	bash scripts/run-demo.sh

# A farm on loopback: etcd and three sluice run nodes on the LHCb sample,
# push then pull; prints the farm ledger and each node's (LOOP=N passes).
farm: build plugins
	bash scripts/farm-demo.sh

generate:
	bash scripts/generate.sh

clean:
	rm -rf $(BIN)

# Re-run the fixed inputs of testdata/golden/ and compare their outputs.
golden: build plugins
	BIN=$(BIN) bash scripts/golden.sh
