#!/usr/bin/env bash
# Runs staticcheck, at the version pinned below, on every package of every
# module given (default: every module), with its default checks. The tool is
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
GOBIN=$bin GOFLAGS=-mod=mod $GO install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"

failed=0
for m in "${modules[@]}"; do
  echo "== staticcheck $STATICCHECK_VERSION $m"
  status=0
  out=$(cd "$m" && "$bin/staticcheck" ./... 2>&1) || status=$?
  [ -n "$out" ] || { [ "$status" = 0 ] || failed=1; continue; }
  echo "$out"
  failed=1
done
exit $failed
