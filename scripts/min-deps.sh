#!/usr/bin/env bash
# Checks that the modules are built and tested with the oldest release of
# each floored dependency that the library supports, so that no change
# raises what users must upgrade to without meaning to.
#
# Go's minimum version selection builds a module with the versions its
# go.mod requires unless a dependency requires newer, and every user whose
# module requires an older release is moved up to the library's. So:
#
#   - every module that requires a floored dependency must require exactly
#     its floor (below): go get -u or a go mod tidy after adding a
#     dependency that requires newer would raise the require line, and the
#     tests would then prove only the newer release;
#   - the version minimum version selection picks over the whole module
#     graph (go list -m all, on a copy of the go.mod that it may update)
#     must be the one the go.mod requires: when a dependency requires newer,
#     the go command refuses to build ("updates to go.mod needed"), and
#     go mod tidy would raise the require line; this says which and why.
#
# Since make test's lanes build and test every module with what go.mod
# requires, these two checks make the lanes a test at the floor. Raising a
# floor is a decision: change it here, in docs/dependencies.md (which says
# what API or behaviour sets it) and in every go.mod at once.
#
# Usage: scripts/min-deps.sh [module dir...]   (default: every module)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

# The floors, and what sets each (docs/dependencies.md).
declare -A floor=(
  # The library builds from v9.14.0 (Pipeliner.BatchProcess); the go-redis
  # driver's tests pass from v9.16.0 (docs/dependencies.md).
  [github.com/redis/go-redis/v9]=v9.16.0
)
# Modules allowed to require a floored dependency above its floor, and why
# ("module-dir dependency" -> reason): a module that builds against another
# library that requires newer, and that users never import.
declare -A above=(
  ["bench github.com/redis/go-redis/v9"]="redsync v4.18.1, which the benchmarks compare against, requires v9.23.0"
)

if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sed 's|^\./||' | sort)
fi

# required prints the version of module $2 that the go.mod of module dir $1
# requires, or nothing (go mod edit -json would need a JSON parser).
required() {
  awk -v p="$2" '$1 == "require" && $2 == p { print $3 } $1 == p && $2 ~ /^v/ { print $2 }' "$1/go.mod"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# selected prints the version of module $2 that minimum version selection
# picks for module dir $1, on a copy of its go.mod and go.sum.
selected() {
  cp "$1/go.mod" "$tmp/go.mod"
  cp "$1/go.sum" "$tmp/go.sum" 2>/dev/null || : >"$tmp/go.sum"
  (cd "$1" && $GO list -m -modfile="$tmp/go.mod" -mod=mod all) | awk -v p="$2" '$1 == p { print $2 }'
}

failed=0
fail() {
  echo "min-deps: $*" >&2
  failed=1
}
for m in "${modules[@]}"; do
  m=${m#./}
  for dep in "${!floor[@]}"; do
    want=${floor[$dep]}
    have=$(required "$m" "$dep")
    [ -n "$have" ] || continue
    why=${above["$m $dep"]:-}
    if [ "$have" != "$want" ] && [ -z "$why" ]; then
      fail "$m requires $dep $have; the floor is $want (docs/dependencies.md). Require the floor" \
        "(cd $m && go get $dep@$want && go mod tidy), or, if the code needs a newer release, raise" \
        "the floor in scripts/min-deps.sh, docs/dependencies.md and every go.mod together"
      continue
    fi
    built=$(selected "$m" "$dep")
    if [ "$built" != "$have" ]; then
      fail "$m requires $dep $have, but a dependency requires $built, which the build would" \
        "select (go mod tidy raises the require line): see which with" \
        "(cd $m && go mod graph | grep ' $dep@$built')"
      continue
    fi
    if [ -n "$why" ]; then
      echo "== $m: $dep $have, above the floor $want: $why"
    else
      echo "== $m: $dep $have, the floor"
    fi
  done
done
exit $failed
