# Every module in the repository: the library at the root plus nested
# modules (resource adapters with database drivers, chaos harness, peer
# benchmarks, Prometheus collector) whose dependencies stay out of the
# library's go.mod.
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: demo test lint bench redis servers databases

# The first command a newcomer runs: a paused lock holder's stale write,
# accepted without fencing and rejected with it, on a redis-server that
# fencelock demo starts (and stops) itself.
demo: redis
	go -C cmd/fencelock run . demo

# The test command the README gives and .ci/run calls: go test -race in
# every module, the server-facing packages once per server (Redis 7.0 from
# Debian, Redis 8.x and Valkey 9 built by scripts/install-servers, or those
# FENCELOCK_SERVERS names), then one summary table; see scripts/test-matrix.
test: redis databases
	@./scripts/test-matrix

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	@set -e; for m in $(MODULES); do \
		echo "== vet + staticcheck $$m"; \
		(cd $$m && go vet ./... && go run $(STATICCHECK) ./...); \
	done

# Benchmarks in short form, as CI runs them; drop -benchtime for real figures.
bench: redis
	go test -run '^$$' -bench . -benchmem -benchtime 100x .

redis:
	@./scripts/install-redis

# Redis 8.x and Valkey 9 built from Debian's source packages, cached in
# $$HOME/.cache/fencelock; make test runs this itself unless
# FENCELOCK_SERVERS is set.
servers:
	@./scripts/install-servers

# PostgreSQL and MariaDB for the SQL adapter's tests.
databases:
	@./scripts/start-databases
