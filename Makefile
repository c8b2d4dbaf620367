# The two commands for a fresh machine:
#   make demo   runs the flash-sale demo on five local Redis nodes
#   make test   runs every check CI runs
GO ?= go

# Every Go module of the repository: the library and the modules beside it
# (adapters, comparative benchmarks), each with its own go.mod.
MODULES := . $(patsubst %/go.mod,%,$(wildcard */go.mod */*/go.mod))

.PHONY: demo test deps vet

deps:
	@./scripts/install-redis.sh

demo: deps
	$(GO) run ./cmd/redlock demo

vet:
	@for m in $(MODULES); do echo "== go vet $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

test: deps vet
	@for m in $(MODULES); do echo "== go test -race $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 15m ./...) || exit 1; done
