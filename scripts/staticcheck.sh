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

# TEMPORARY, while the root package's API is redesigned (issue 25): in the
# root module, findings in the root package's non-test files (./*.go, not
# ./*_test.go) are printed but do not fail the check. Every other finding,
# the root package's test files and internal/ included, fails. Set this to 0
# once the redesign has landed and its findings are fixed, then delete it and
# tolerated() below.
TOLERATE_ROOT_PACKAGE_FILES=1

if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN=$bin GOFLAGS=-mod=mod $GO install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"

# tolerated reports whether a finding of the root module (a line of
# staticcheck's output, its path relative to the root) is in a non-test file
# of the root package.
tolerated() {
  [ "$TOLERATE_ROOT_PACKAGE_FILES" = 1 ] && [[ $1 =~ ^[^/]+\.go:[0-9]+:[0-9]+:\  ]] && [[ ! $1 =~ ^[^/:]+_test\.go: ]]
}

failed=0
for m in "${modules[@]}"; do
  echo "== staticcheck $STATICCHECK_VERSION $m"
  status=0
  out=$(cd "$m" && "$bin/staticcheck" ./... 2>&1) || status=$?
  [ -n "$out" ] || { [ "$status" = 0 ] || failed=1; continue; }
  while IFS= read -r line; do
    if [ "$m" = . ] && tolerated "$line"; then
      echo "tolerated (root package, until the redesign): $line"
    else
      echo "$line"
      failed=1
    fi
  done <<< "$out"
done
exit $failed
