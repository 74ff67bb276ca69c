# pkie: two commands do all the set-up on a fresh machine.
#   make deps   (as root, Debian/Ubuntu) the system packages make test needs
#   make demo   build pkie and run its main job offline (MitM caught)
#   make test   vet, every test (race detector on), short fuzz runs
#   make bench  the Go benchmarks, then a 3-minute soak under attack
GO        ?= go
FUZZTIME  ?= 5s
BIN       := bin/pkie

.PHONY: all build deps demo test vet unit example fuzz bench fmt clean verifiers verifiers-test

all: build verifiers

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/pkie

# The verification back ends that are not Go (docs/measurement/verification.md): small
# helper programs pkie runs over a JSON-lines protocol.
OPENSSL_CFLAGS ?= $(shell pkg-config --cflags libssl libcrypto jansson 2>/dev/null)
OPENSSL_LIBS   ?= $(shell pkg-config --libs libssl libcrypto jansson 2>/dev/null || echo -lssl -lcrypto -ljansson)

verifiers: bin/pkie-verify-openssl bin/pkie-verify-webpki

bin/pkie-verify-openssl: $(wildcard verifiers/openssl/*.c verifiers/openssl/*.h)
	@mkdir -p bin
	$(CC) -O2 -Wall -Wextra -Werror -std=c11 $(OPENSSL_CFLAGS) -o $@ verifiers/openssl/*.c $(OPENSSL_LIBS)

bin/pkie-verify-webpki: $(wildcard verifiers/webpki/Cargo.* verifiers/webpki/build.rs verifiers/webpki/src/*.rs)
	@mkdir -p bin
	cargo build --quiet --release --locked --manifest-path verifiers/webpki/Cargo.toml --target-dir verifiers/webpki/target
	cp verifiers/webpki/target/release/pkie-verify-webpki $@

# The helpers' own tests: each runs its program over pipes on fixtures.
verifiers-test: verifiers
	cargo test --quiet --locked --manifest-path verifiers/webpki/Cargo.toml --target-dir verifiers/webpki/target
	./verifiers/openssl/check.sh

demo: build
	./$(BIN) demo

# The system packages make test needs (Debian names, as .ci/run installs
# them); refuses, saying what to run, without root or apt-get.
deps:
	./scripts/deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	cd docs/example && $(GO) vet ./...
	@cd docs/example && $(GO) mod tidy -diff || { echo "docs/example's go.mod/go.sum are not tidy: run go mod tidy there"; exit 1; }

# Tests that compare back ends need the helpers: they fail, not skip, here.
unit: verifiers
	PKIE_REQUIRE_VERIFIERS=1 PKIE_VERIFIER_DIR=$(CURDIR)/bin $(GO) test -race -timeout 30m ./...

# docs/example is a module of its own (an enhancement written outside pkie,
# hosted by a cloud binary of its own): go test ./... at the root does not
# reach it.
example:
	cd docs/example && $(GO) test -race ./...

fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz-smoke.sh

test: vet verifiers-test unit example fuzz

# The soak runs last, as a program rather than a Go benchmark: it is a few
# minutes of mixed good and hostile traffic, reported as success rate and p99.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	./$(BIN) bench soak --duration 3m

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin verifiers/webpki/target
