# Every module in the repository: the library at the root plus nested
# modules (resource adapters with database drivers, chaos harness, peer
# benchmarks, Prometheus collector) whose dependencies stay out of the
# library's go.mod.
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: demo test lint bench redis databases

# The first command a newcomer runs: a paused lock holder's stale write,
# accepted without fencing and rejected with it, on a redis-server that
# fencelock demo starts (and stops) itself.
demo: redis
	go run ./cmd/fencelock demo

# The test command the README gives and .ci/run calls.
test: redis databases
	@set -e; for m in $(MODULES); do \
		echo "== go test -race $$m"; \
		(cd $$m && go test -race -count=1 ./...); \
	done

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	@set -e; for m in $(MODULES); do \
		echo "== vet + staticcheck $$m"; \
		(cd $$m && go vet ./... && go run $(STATICCHECK) ./...); \
	done

# Benchmarks in short form, as CI runs them (about a minute): the root
# package's, and the peer comparison's parallel table, server cost per
# redis.call, handoff against waiters and held leases, each once and short.
# Real figures: drop -benchtime, and run `cd bench && go run . -all`
# (bench/README.md).
bench: redis
	go test -run '^$$' -bench . -benchmem -benchtime 100x .
	cd bench && go run . -quick -scenarios 2,5,8,9

redis:
	@./scripts/install-redis

# PostgreSQL and MariaDB for the SQL adapter's tests.
databases:
	@./scripts/start-databases
