#!/usr/bin/env bash
# Vets every module for the other operating systems (darwin/arm64,
# windows/amd64) and the other architecture (linux/arm64), so that code
# (tests included) which only compiles on Linux or on amd64 is caught on a
# Linux amd64 CI machine; linux/amd64 itself is make vet's. go vet
# type-checks every package with its tests and checks assembly
# declarations; nothing is run. One pair per operating system and one
# other architecture is what catches a build-tagged file: the four other
# pairs compiled the same files and cost a fresh CI machine minutes.
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
targets="linux/arm64 darwin/arm64 windows/amd64"
fail=0
for m in "${modules[@]}"; do
  for t in $targets; do
    echo "== $t $m"
    if ! (cd "$m" && GOOS=${t%/*} GOARCH=${t#*/} CGO_ENABLED=0 $GO vet ./...); then
      fail=1
    fi
  done
done
exit $fail
