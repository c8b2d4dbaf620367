#!/usr/bin/env bash
# Builds and vets every module given with the newest Go release line the
# modules support (docs/install.md: the two latest Go releases), and runs
# with it the tests of the root module's packages that need no Redis
# server, so that a release of that line that breaks the code, or a vet
# check it adds, fails CI before a user finds it. make oldest covers the
# other end, the go line; the tests under make test run on CI's own Go.
#
# The go command downloads the toolchain from the module proxy
# (GOTOOLCHAIN=$NEWEST_GO, golang.org/toolchain). NEWEST_GO names a patch
# release, the newest the proxy served when it was last raised (go list -m
# -versions golang.org/toolchain lists them).
#
# The tests are those of the root module's packages whose test binaries
# import neither internal/redisproc nor internal/redistest (the test-server
# launchers): the unit tests of the quorum, the breaker, the keep-alive
# scheduler and the other internal packages, with -race. They run at the
# priority the script was started with; the compiles before them take
# what is left (nice 19), as make test's static lane does.
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
for m in "${modules[@]}"; do
  step "$NEWEST_GO go vet, go build $m"
  (cd "$m" && nice -n 19 $GO vet ./... && nice -n 19 $GO build -o /dev/null ./...)
done

# shellcheck disable=SC2016 # a template for go list
pkgs=$($GO list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
  awk '$1 ~ /\.test$/ { for (i = 2; i <= NF; i++) if ($i ~ /\/internal\/(redisproc|redistest)$/) next
       sub(/\.test$/, "", $1); print $1 }')
step "$NEWEST_GO go test -race (compile, nice 19)" $pkgs
# shellcheck disable=SC2086 # one word per package
nice -n 19 $GO test -race -count=1 -run '^$' $pkgs >/dev/null
step "$NEWEST_GO go test -race" $pkgs
# shellcheck disable=SC2086
$GO test -race -count=1 $pkgs
