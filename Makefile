# Every module in the repository: the library at the root plus nested
# modules (resource adapters with database drivers, chaos harness, peer
# benchmarks, Prometheus collector) whose dependencies stay out of the
# library's go.mod.
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The oldest Go every go.mod promises (their `go 1.25` lines): lint builds
# and vets each module with it too, from the module proxy's toolchain.
GO_MIN := go1.25.5

.PHONY: demo test lint bench redis faketime servers databases model s3

# The first command a newcomer runs: a paused lock holder's stale write,
# accepted without fencing and rejected with it, on a redis-server that
# fencelock demo starts (and stops) itself.
demo: redis
	go -C cmd/fencelock run . demo

# The test command the README gives and .ci/run calls: go test -race in
# every module, the server-facing packages once per server (Redis 7.0 from
# Debian, Redis 8.x and Valkey 9 built by scripts/install-servers, or those
# FENCELOCK_SERVERS names), then one summary table; see scripts/test-matrix.
test: redis faketime databases s3
	@./scripts/test-matrix

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	@./scripts/gen-valkeyconn --check
	@./scripts/check-layers
	@set -e; for m in $(MODULES); do \
		echo "== vet + staticcheck $$m"; \
		(cd $$m && go vet ./... && go run $(STATICCHECK) ./...); \
		echo "== vet with $(GO_MIN) $$m"; \
		(cd $$m && GOTOOLCHAIN=$(GO_MIN) go vet ./...); \
	done

# Benchmarks in short form, as CI runs them (about a minute): the root
# package's, and the peer comparison's parallel table, server cost per
# redis.call, handoff against waiters and held leases, each once and short.
# Real figures: drop -benchtime, and run `cd bench && go run . -all`
# (bench/README.md).
bench: redis
	go test -run '^$$' -bench . -benchmem -benchtime 100x ./tests
	cd bench && go run . -quick -scenarios 2,5,7,8,9

# The token and fencing protocol, model-checked with Spin over every
# interleaving for small bounds (model/README.md); about a minute.
model:
	@./scripts/install-spin
	@./model/run

redis:
	@./scripts/install-redis

# libfaketime (Debian's faketime package), under which the clock-jump
# tests (internal/redistest Options.FakeTime, chaos clock-*) run redis-server.
faketime:
	@./scripts/install-faketime

# Redis 8.x and Valkey 9 built from Debian's source packages, cached in
# $$HOME/.cache/fencelock; make test runs this itself unless
# FENCELOCK_SERVERS is set.
servers:
	@./scripts/install-servers

# SeaweedFS's weed, the S3 server of the S3 tests (fence/s3fence, fencelock
# put and doctor --resource, chaos), built from its Go module and cached in
# $$HOME/.cache/fencelock: 4 to 5 minutes once, then nothing.
s3:
	@./scripts/install-s3

# PostgreSQL and MariaDB for the SQL adapter's tests.
databases:
	@./scripts/start-databases

.PHONY: mutants fuzz

# The curated mutant suite (mutants/README.md): each mutant, a deliberate
# bug, applied alone to a scratch copy of the tree, must fail the tests it
# names. MUTANTS=regexp runs those whose name matches; MUTANTFLAGS adds
# flags (CI: -j 2 -trust-clean, see mutants/README.md). The native-command
# mutants need the Redis 8 and Valkey 9 builds of scripts/install-servers.
mutants: redis databases s3
	@if [ -x scripts/install-servers ]; then ./scripts/install-servers; fi
	cd mutants && go run . -run '$(MUTANTS)' $(MUTANTFLAGS)

# Every fuzz target in every module, each for FUZZTIME (CI: 10s each), its
# committed corpus (testdata/fuzz) first. Targets are found by name, so a
# new one is fuzzed without a change here.
#
# Go before 1.27 can fail a target with a bare "context deadline exceeded"
# when a duration -fuzztime ends while a worker is mid-input, no crasher
# written (go.dev/issue/75804; CI hit it on FuzzTokenOrder with Go 1.26.8).
# So on an older go the fuzzer runs on FUZZ_TOOLCHAIN, the first release
# with the fix that the module proxy serves here (the go command fetches it,
# about 76 MB once); the modules themselves still build with Go 1.25.
FUZZTIME ?= 10s
FUZZ_TOOLCHAIN ?= go1.27.3
fuzz: redis databases
	@set -e; v=$$(go env GOVERSION); \
	if printf '%s\n' "$$v" go1.27 | sort -V -C; then \
		echo "== fuzz: $$v has go.dev/issue/75804; fuzzing with GOTOOLCHAIN=$(FUZZ_TOOLCHAIN)"; \
		export GOTOOLCHAIN=$(FUZZ_TOOLCHAIN); \
	fi; \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== fuzz $$t in $$(dirname $$f) for $(FUZZTIME) with $$(go env GOVERSION)"; \
			(cd $$(dirname $$f) && go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) .); \
		done; \
	done

.PHONY: release-binaries release-check api-report

# The CLI for linux and darwin on amd64 and arm64 in dist/, with
# SHA256SUMS: run at a release tag, VERSION=vX.Y.Z naming the files
# (scripts/release-binaries; releasing itself is scripts/release, docs/operations.md,
# "Installation and versioning").
release-binaries:
	@VERSION=$(VERSION) ./scripts/release-binaries dist

# What CI checks of a release: the binaries build, and build the same bytes
# twice; then the API difference against the previous release tag, printed
# for CHANGELOG's "Moving" list (informational, never a failure).
release-check:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; ./scripts/release-binaries --check "$$d"
	@./scripts/api-report

api-report:
	@./scripts/api-report
