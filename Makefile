# sfemu build entry points. `make test` is what CI runs (.ci/run).
GO       ?= go
BIN      := bin
DATA_DIR ?= var/sfemu
# Packages with goroutines or shared state get a second pass under -race, built
# with -tags invariants so the internal/invariants checks run on every operation.
# That pass runs -short: the tests with a -short mode (emulator E55, E76,
# rowcodec's round-trip property) keep every path at a smaller size (fewer
# documents, one seed, fewer iterations), and the plain pass runs them at full
# size. cmd/sfemu's binary tests run in both passes (the sfemu binary they
# drive is a plain build; the race pass checks their harness).
RACE_PKGS := ./minicdc/... ./normalize/... ./emulator/... ./fakeupstream/... ./upstream/... ./reorder/... ./schemafence/... ./adapter/... ./verify/... ./cmd/... ./e2e/... ./sim/...
FUZZTIME ?= 10s
# A hang guard per test binary, not a speed bound: under -race on a loaded
# 2-core machine the adapter and sim packages pass go test's default 10 min
# while still progressing.
TEST_TIMEOUT ?= 30m
# Seeds of a simulator campaign (make sim); make test runs 1,000 (specs/sim.md SIM8).
SEEDS ?= 10000
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.6
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1

.PHONY: all build run test test-short fmt-check vet bench fuzz proto clean realcluster-selftest sim

all: build

build:
	$(GO) build -o $(BIN)/sfemu ./cmd/sfemu

run: build
	mkdir -p $(DATA_DIR)
	$(BIN)/sfemu run --data-dir $(DATA_DIR)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# go test ./... includes the simulator's 1,000 seeds (sim.TestSimSeeds, SIM8).
test: fmt-check vet
	bash .ci/ensure-chromium.sh
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -short -race -tags invariants $(RACE_PKGS)
	$(MAKE) realcluster-selftest

# The opt-in real-cluster suites (they skip unless SFEMU_TIDB_PD and
# SFEMU_TIDB_DSN name a TiDB cluster) run here against the embedded upstream
# seen only from outside: its PD/TiKV gRPC servers and its MySQL front, the
# same clients a real cluster gets.
realcluster-selftest:
	GO=$(GO) bash .ci/realcluster-selftest.sh

# A long simulator campaign: progress and a summary (specs/sim.md SIM9).
sim:
	$(GO) run ./sim/cmd/simcampaign -seeds $(SEEDS)

bench:
	bash .ci/bench.sh

fuzz:
	FUZZTIME=$(FUZZTIME) bash .ci/fuzz.sh

proto:
	GOBIN=$(CURDIR)/$(BIN) $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/$(BIN) $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH=$(CURDIR)/$(BIN):$$PATH protoc -I emulator/api/v1 \
		--go_out=emulator/api/v1 --go_opt=paths=source_relative \
		--go-grpc_out=emulator/api/v1 --go-grpc_opt=paths=source_relative \
		emulator/api/v1/*.proto

clean:
	rm -rf $(BIN) var
