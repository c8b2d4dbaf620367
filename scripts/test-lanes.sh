#!/usr/bin/env bash
# What make test runs after deps: the static checks and every module's
# tests with -race and every vet check (-vet=all: make vet's, on the race
# build the tests compile anyway), in lanes that run at once.
#
# The tests spend most of their time waiting on real Redis nodes (TTLs,
# node timeouts, faults held for seconds): run one after another they kept
# a 2-core machine about a quarter busy for a quarter of an hour, while the
# static checks (staticcheck, the other platforms' type-check, go vet with
# the oldest Go) are compile work that kept it busy. So:
#
#   static  make mindeps lint lean oldest, at the lowest CPU priority
#           (nice 19) from start to end: it takes what the tests leave,
#           and the tests see no more load than their own;
#   newest  make newest: with Go 1.27, the library and the CLI vetted and
#           built, the root module's Redis-free unit tests, and make
#           cross's type-check of every module for the other platforms
#           (so static does not run cross), its compiles at nice 19;
#   fault   the root module's fault suite (./tests/fault), then
#           cmd/redlock;
#   drivers the drivers' modules (their fault-suite subsets), then
#           tests/robust, then make model (internal/model's tests, its
#           searches in full, without -race: below);
#   rest    the root module's other packages but internal/model, then
#           every other module but those of the fault and drivers lanes.
#
# Before fault, drivers and rest start, prime compiles once the race
# build of every package the root module's tests import: the three lanes
# need the standard library's, go-redis's and the library's, and the go
# commands of lanes started together each compiled all of them (the build
# cache shares finished work, not work in flight).
#
# The tests of two packages run without -race, as the race detector slows
# them about tenfold and each test's work runs on one goroutine: internal/model
# (make model: the model checker's searches; the root package's
# differential tests still call the model under -race) and the
# scripts/crosscheck tool (type-checking the standard library from
# source).
#
# fault, drivers and rest were two lanes, fault holding the drivers and
# tests/robust and rest the model: on a fresh machine fault ended at
# 1,258 s, over make test's 20 minutes, while the machine waited on its
# nodes most of that time (docs/testing.md, "The lanes").
#
# cmd/redlock and tests/robust ran in a fourth lane once fault and rest had
# ended, alone, because a robustness control had missed its violation
# under the other lanes' load; on a fresh machine that lane was the
# critical path (fault ended at 943 s, the last lane at 1,291 s). The
# controls now show their violation beside three busy loops on two cores
# (docs/fault-testing.md), so they run beside the other lanes.
#
# Each lane stops at its first failure; the others run on. A lane's output
# is printed whole when it ends, each step headed by the seconds since the
# start. The exit status is 1 if any lane failed.
#
# Usage: scripts/test-lanes.sh module-dir...   (make test passes $(MODULES))
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
start=$SECONDS

fault_modules=(cmd/redlock)
driver_modules=(driver/redigo driver/rueidis tests/robust)
norace_modules=(scripts/crosscheck)

step() { echo "== [$((SECONDS - start)) s] $*"; }

gotest() { # module dir, then packages
  local m=$1 race=-race
  shift
  [[ " ${norace_modules[*]} " == *" $m "* ]] && race=
  step "go test $race -vet=all $m $*"
  # shellcheck disable=SC2086 # no word when without -race
  (cd "$m" && REDLOCK_REQUIRE_POSTGRES=1 $GO test $race -vet=all -count=1 -timeout 15m "$@")
}

prime() {
  step "prime: go list -export -race of the root module's tests' dependencies"
  $GO list -e -export -deps -test -race ./... >/dev/null
}

lane_static() {
  local t
  for t in mindeps lint lean oldest; do
    step "make $t (nice 19)"
    nice -n 19 "$MAKE" --no-print-directory "$t"
  done
}

lane_newest() {
  step "make newest"
  "$MAKE" --no-print-directory newest
}

lane_fault() {
  gotest . ./tests/fault
  for m in "${fault_modules[@]}"; do
    gotest "$m" ./...
  done
}

lane_drivers() {
  for m in "${driver_modules[@]}"; do
    gotest "$m" ./...
  done
  step "make model"
  "$MAKE" --no-print-directory model
}

lane_rest() {
  local pkgs
  pkgs=$($GO list ./... | grep -v '/tests/fault$\|/internal/model$')
  # shellcheck disable=SC2086 # one word per package
  gotest . $pkgs
  for m in "$@"; do
    [ "$m" = . ] && continue
    [[ " ${fault_modules[*]} ${driver_modules[*]} " == *" $m "* ]] && continue
    gotest "$m" ./...
  done
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A lane_of
failed=0

launch() { # lane name, then the modules
  local lane=$1
  shift
  (set -e; "lane_$lane" "$@") >"$logs/$lane" 2>&1 &
  lane_of[$!]=$lane
  step "lane $lane started (pid $!)"
}

# reap waits for the lane that ends next, prints its output and notes a
# failure; it returns the lane's name in $reaped.
reap() {
  local status=0 pid
  wait -n -p pid "${!lane_of[@]}" || status=$?
  reaped=${lane_of[$pid]}
  unset "lane_of[$pid]"
  echo
  echo "######## lane $reaped: $([ $status = 0 ] && echo passed || echo "FAILED (exit $status)") at $((SECONDS - start)) s"
  cat "$logs/$reaped"
  [ $status = 0 ] || failed=1
}

launch static "$@"
launch newest "$@"
prime || step "prime failed: each lane compiles what it needs"
launch fault "$@"
launch drivers "$@"
launch rest "$@"
while [ ${#lane_of[@]} -gt 0 ]; do
  reap
done
exit $failed
