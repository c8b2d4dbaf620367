#!/usr/bin/env bash
# Builds and vets every module for each supported GOOS/GOARCH pair, so that
# code (tests included) which only compiles on Linux is caught on a Linux CI
# machine. Nothing is run: go build and go vet only.
#
# Usage: scripts/cross.sh [module dir...]   (default: every module)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)
fi
targets="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
fail=0
for m in "${modules[@]}"; do
  for t in $targets; do
    echo "== $t $m"
    if ! (cd "$m" && GOOS=${t%/*} GOARCH=${t#*/} CGO_ENABLED=0 $GO build -o /dev/null ./... && GOOS=${t%/*} GOARCH=${t#*/} CGO_ENABLED=0 $GO vet ./...); then
      fail=1
    fi
  done
done
exit $fail
