# Every module in the repository: the library at the root plus nested
# modules (resource adapters with database drivers, chaos harness, peer
# benchmarks, Prometheus collector) whose dependencies stay out of the
# library's go.mod.
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: demo test lint bench redis databases model

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

# Benchmarks in short form, as CI runs them; drop -benchtime for real figures.
bench: redis
	go test -run '^$$' -bench . -benchmem -benchtime 100x .

# The token and fencing protocol, model-checked with Spin over every
# interleaving for small bounds (model/README.md); about a minute.
model:
	@./scripts/install-spin
	@./model/run

redis:
	@./scripts/install-redis

# PostgreSQL and MariaDB for the SQL adapter's tests.
databases:
	@./scripts/start-databases
