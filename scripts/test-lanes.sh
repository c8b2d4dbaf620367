#!/usr/bin/env bash
# What make test runs after deps and vet: the static checks and every
# module's tests with -race, in three lanes at once.
#
# The tests spend most of their time waiting on real Redis nodes (TTLs,
# node timeouts, faults held for seconds): run one after another they kept
# a 2-core machine about a quarter busy for a quarter of an hour, while the
# static checks (staticcheck, go vet for other platforms and with the
# oldest Go) are compile work that kept it busy. So:
#
#   static  make lint lean cross oldest model, at the lowest CPU priority
#           (nice 19): it takes what the tests leave, and the tests' timing
#           sees no more load than their own;
#   long    the root module's fault suite (./tests/fault), then tests/robust
#           and driver/redigo, the modules whose tests run longest;
#   rest    the root module's other packages, then every other module.
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

# The modules of the long lane after the root's fault suite; every other
# module given goes to the rest lane.
long_modules=(tests/robust driver/redigo)

step() { echo "== [$((SECONDS - start)) s] $*"; }

gotest() { # module dir, then packages
  local m=$1
  shift
  step "go test -race $m $*"
  (cd "$m" && REDLOCK_REQUIRE_POSTGRES=1 $GO test -race -count=1 -timeout 15m "$@")
}

lane_static() {
  step "make lint lean cross oldest model (nice 19)"
  nice -n 19 "$MAKE" --no-print-directory lint lean cross oldest model
}

lane_long() {
  gotest . ./tests/fault
  for m in "${long_modules[@]}"; do
    gotest "$m" ./...
  done
}

lane_rest() {
  local pkgs
  pkgs=$($GO list ./... | grep -v '/tests/fault$')
  # shellcheck disable=SC2086 # one word per package
  gotest . $pkgs
  for m in "$@"; do
    [ "$m" = . ] && continue
    [[ " ${long_modules[*]} " == *" $m "* ]] && continue
    gotest "$m" ./...
  done
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A lane_of
for lane in static long rest; do
  (set -e; "lane_$lane" "$@") >"$logs/$lane" 2>&1 &
  lane_of[$!]=$lane
  step "lane $lane started (pid $!)"
done

failed=0
while [ ${#lane_of[@]} -gt 0 ]; do
  status=0
  wait -n -p pid "${!lane_of[@]}" || status=$?
  lane=${lane_of[$pid]}
  unset "lane_of[$pid]"
  echo
  echo "######## lane $lane: $([ $status = 0 ] && echo passed || echo "FAILED (exit $status)") at $((SECONDS - start)) s"
  cat "$logs/$lane"
  [ $status = 0 ] || failed=1
done
exit $failed
