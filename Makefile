# The two commands for a fresh machine:
#   make demo   runs the flash-sale demo on five local Redis nodes
#   make test   runs every check CI runs
GO ?= go

# Every Go module of the repository: the library and the modules beside it
# (CLI, adapters, SQL lease store, comparative benchmarks, examples), each with its own go.mod.
MODULES := . $(patsubst %/go.mod,%,$(wildcard */go.mod */*/go.mod))
# The modules users build, which get release tags (docs/releasing.md).
RELEASED := . cmd/redlock redlockprom redlockotel redlocksql driver/rueidis driver/redigo

.PHONY: demo test deps vet lint cross lean oldest newest mindeps model soak

deps:
	@./scripts/install-redis.sh
	@./scripts/install-postgres.sh
	@./scripts/install-netns.sh

# The CLI is a module of its own (cmd/redlock/go.mod).
demo: deps
	cd cmd/redlock && $(GO) run . demo

vet:
	@for m in $(MODULES); do echo "== go vet $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

# staticcheck (version pinned in the script, fetched from the module proxy) on every module.
lint:
	@GO=$(GO) ./scripts/staticcheck.sh $(MODULES)

# Type-check every module, tests included, for darwin/arm64 and
# windows/amd64 (and for linux/arm64 those with a file for one
# architecture), from source with scripts/crosscheck: code that compiles on
# Linux alone fails here (scripts/cross.sh says why not go vet).
cross:
	@GO=$(GO) ./scripts/cross.sh $(MODULES)

# Importing the library must not pull in the CLI's or the adapters' dependencies.
lean:
	@GO=$(GO) ./scripts/lean-module.sh

# Vet the released modules with the oldest Go release they declare (all
# modules must declare the same); skipped while the toolchain is of that
# release's line (go1.26.8 against go 1.26.0: patch releases add no API).
oldest:
	@GO=$(GO) ./scripts/oldest-go.sh $(RELEASED)

# With the newest Go release line the modules support (NEWEST_GO, a patch
# release of Go 1.27 that the module proxy serves): vet and build the
# library and the CLI, run the root module's tests that need no Redis, and
# type-check every module for the other platforms (make cross's check).
NEWEST_GO ?= go1.27.4
newest:
	@GO=$(GO) NEWEST_GO=$(NEWEST_GO) ./scripts/newest-go.sh $(MODULES)

# Every module requires, and builds with, the oldest go-redis the library
# supports (the floor in scripts/min-deps.sh, docs/dependencies.md), so
# that the tests run against it and no change raises it unnoticed.
mindeps:
	@GO=$(GO) ./scripts/min-deps.sh $(MODULES)

# internal/model's tests, without -race, which would slow the model checker's searches tenfold:
# the exhaustive ones (internal/model/exhaustive_test.go), the random ones in full, and the
# unified model's (TestUnifiedMutants, issue 45), every one from a fixed seed, so that a run
# cannot flake: the random searches from MODEL_SEED, the unified model from its measured replay
# seeds (docs/safety.md, "The unified model"); and the model's other tests (its twins of the
# scripts on a real node). make test runs the package only here (scripts/test-lanes.sh says
# why); the root package's differential tests call the model under -race.
# Explore other schedules with REDLOCK_MODEL_SEED=N make model.
MODEL_SEED ?= 1
model:
	@seed=$${REDLOCK_MODEL_SEED:-$(MODEL_SEED)}; \
	echo "== go test ./internal/model (without -race), seed $$seed (replay: REDLOCK_MODEL_SEED=$$seed make model)"; \
	REDLOCK_MODEL_SEED=$$seed $(GO) test -vet=all -count=1 ./internal/model

# In lanes that run at once (scripts/test-lanes.sh says which and why):
# mindeps lint lean oldest at the lowest CPU priority, newest (with Go
# 1.27, and the cross-check) beside them, model after the
# drivers' and the robustness suite's tests, and every
# module's go test -race -vet=all (internal/model's and scripts/crosscheck's
# without -race), which is make vet's check on the race
# build the tests compile anyway (a separate go vet compiled every
# dependency once more, minutes of a fresh CI machine), once that build
# of the root module's tests' dependencies is compiled. deps installed
# PostgreSQL: the redlocksql tests must not skip for want of it.
test: deps
	@GO=$(GO) MAKE=$(MAKE) ./scripts/test-lanes.sh $(MODULES)

# The robustness suite's randomized runs for a long budget (tests/robust,
# docs/fault-testing.md, "Robustness tests"): SOAK_BUDGET of runs drawn from
# a fresh seed (SOAK_SEED replays one), every history saved in SOAK_DIR.
# Needs root (network namespaces). make test runs the same for 30 s.
SOAK_BUDGET ?= 30m
SOAK_SEED ?= 0
SOAK_DIR ?= /tmp/redlock-soak
soak:
	@echo "== soak: randomized robustness runs for $(SOAK_BUDGET), histories in $(SOAK_DIR)"
	@mkdir -p $(SOAK_DIR)
	@cd tests/robust && $(GO) test -race -count=1 -v -run 'TestRandomized$$' -timeout 0 . \
		-args -robust.budget=$(SOAK_BUDGET) -robust.seed=$(SOAK_SEED) -robust.save=$(SOAK_DIR) -robust.report=$(SOAK_DIR)/rows.md
