# The two commands for a fresh machine:
#   make demo   runs the flash-sale demo on five local Redis nodes
#   make test   runs every check CI runs
GO ?= go

.PHONY: demo test deps vet

deps:
	@./scripts/install-redis.sh

demo: deps
	$(GO) run ./cmd/redlock demo

vet:
	$(GO) vet ./...

test: deps vet
	$(GO) test -race -count=1 -timeout 15m ./...
