#!/usr/bin/env bash
# Builds, vets and tests with the newest Go release line the modules
# support (docs/install.md: the two latest Go releases), so that a release
# of that line that breaks the code, or a vet check it adds, fails CI
# before a user finds it. make oldest covers the other end, the go line;
# make test's other lanes build and test on CI's own Go. With that
# release:
#
#   - go vet and go build of the library (the root module) and of the CLI
#     (cmd/redlock), which between them compile every dependency the
#     library and its command line have, and link the CLI;
#   - go test of the root module's packages whose test binaries import
#     neither internal/redisproc nor internal/redistest (the test-server
#     launchers): the unit tests of the quorum, the breaker, the keep-alive
#     scheduler and the other internal packages, without -race (the race
#     build of the standard library and every dependency took 181 s of a
#     640 s run of this lane with empty caches, and the other lanes run
#     every test with -race);
#   - scripts/cross.sh on every module given: each module, tests included,
#     type-checked from source against this release's standard library for
#     darwin/arm64 and windows/amd64 (and linux/arm64 where code is per
#     architecture). make test runs its cross-check here, once, rather
#     than once per Go release.
#
# The adapters' modules (redlockprom, redlockotel, redlocksql, the
# drivers) are type-checked, not compiled, with this release: their vet
# and build took 94 s of a 242 s run with empty caches (redlocksql's SQL
# drivers 61 s), which make test's 20 minutes do not have.
#
# The go command downloads the toolchain from the module proxy
# (GOTOOLCHAIN=$NEWEST_GO, golang.org/toolchain). NEWEST_GO names a patch
# release, the newest the proxy served when it was last raised (go list -m
# -versions golang.org/toolchain lists them). The compiles run at nice 19,
# beside make test's static lane, so that the test lanes keep their share
# of the CPU; the unit tests run at the priority the script was started
# with, as some of them time a scheduler.
#
# Usage: scripts/newest-go.sh [module dir...]   (default: every module)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
NEWEST_GO=${NEWEST_GO:-go1.27.4}
export GOTOOLCHAIN=$NEWEST_GO
if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)
fi
start=$SECONDS
step() { echo "== [$((SECONDS - start)) s] $*"; }

step "$NEWEST_GO: $($GO version)"
for m in . cmd/redlock; do
  step "$NEWEST_GO go vet, go build $m"
  (cd "$m" && nice -n 19 $GO vet ./... && nice -n 19 $GO build -o /dev/null ./...)
done

# shellcheck disable=SC2016 # a template for go list
pkgs=$($GO list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
  awk '$1 ~ /\.test$/ { for (i = 2; i <= NF; i++) if ($i ~ /\/internal\/(redisproc|redistest)$/) next
       sub(/\.test$/, "", $1); print $1 }')
step "$NEWEST_GO go test (compile, nice 19)" $pkgs
# shellcheck disable=SC2086 # one word per package
nice -n 19 $GO test -count=1 -run '^$' $pkgs >/dev/null
step "$NEWEST_GO go test" $pkgs
# shellcheck disable=SC2086
$GO test -count=1 $pkgs

step "$NEWEST_GO cross-check (nice 19)"
GO=$GO nice -n 19 ./scripts/cross.sh "${modules[@]}"
