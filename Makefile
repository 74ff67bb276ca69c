# pkie: two commands do all the set-up on a fresh machine.
#   make demo   build pkie and run its main job offline (MitM caught)
#   make test   vet, every test (race detector on), short fuzz runs
#   make bench  the Go benchmarks, then a 3-minute soak under attack
GO        ?= go
FUZZTIME  ?= 5s
BIN       := bin/pkie

.PHONY: all build demo test vet unit fuzz bench fmt clean

all: build

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/pkie

demo: build
	./$(BIN) demo

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

unit:
	$(GO) test -race -timeout 30m ./...

fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz-smoke.sh

test: vet unit fuzz

# The soak runs last, as a program rather than a Go benchmark: it is a few
# minutes of mixed good and hostile traffic, reported as success rate and p99.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	./$(BIN) bench soak --duration 3m

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
