#!/usr/bin/env bash
# Runs staticcheck, at the version pinned below, on every package of every
# module given (default: every module), with its default checks, with
# -race (below says why) and again without it where files differ. The tool is
# built from the module proxy by `go install …@version` into a temporary
# directory, so a fresh machine with empty caches gets it with no install
# step; later runs reuse the build cache.
#
# Usage: scripts/staticcheck.sh [module dir...]
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# 2026.2.2, the first release line built for Go 1.26 (its go.mod says 1.26.0).
STATICCHECK_VERSION=v0.8.2

if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# A fetch from the module proxy can fail for a moment (a CI run beside
# three busy loops once got "TLS handshake timeout"): three tries.
for try in 1 2 3; do
  GOBIN=$bin GOFLAGS=-mod=mod $GO install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" && break
  if [ "$try" = 3 ]; then
    echo "staticcheck $STATICCHECK_VERSION: go install failed 3 times" >&2
    exit 1
  fi
  echo "== go install of staticcheck failed (try $try of 3): again in 5 s" >&2
  sleep 5
done

# lint runs staticcheck in module dir $1 on the packages after it, with
# the build flags in $GOFLAGS; it prints what it finds and sets failed.
lint() {
  local m=$1 status=0 out
  shift
  out=$(cd "$m" && "$bin/staticcheck" "$@" 2>&1) || status=$?
  [ -n "$out" ] || { [ "$status" = 0 ] || failed=1; return 0; }
  echo "$out"
  failed=1
}

# The packages of the module in dir $1 with a file built only without
# -race (a //go:build line with !race).
norace() {
  (cd "$1" && $GO list -e -f '{{.Dir}}' ./... | while read -r d; do
    if grep -lqs '^//go:build .*!race' "$d"/*.go; then
      echo "./$(realpath --relative-to=. "$d")"
    fi
  done)
}

# staticcheck type-checks from the export data of every dependency, which
# go list -export compiles. It runs with -race, as make test's go test
# does, so that a fresh machine compiles each dependency once for both
# (without it, this lint compiled every module's dependency tree a second
# time); the few packages with files built only without -race are linted
# again without it.
failed=0
for m in "${modules[@]}"; do
  echo "== staticcheck $STATICCHECK_VERSION $m (with -race)"
  GOFLAGS=-race lint "$m" ./...
  mapfile -t pkgs < <(norace "$m")
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "== staticcheck $STATICCHECK_VERSION $m, without -race: ${pkgs[*]}"
    lint "$m" "${pkgs[@]}"
  fi
done
exit $failed
