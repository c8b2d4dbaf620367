#!/usr/bin/env bash
# Builds and vets every module with the oldest Go release the modules
# declare (the go line of the root go.mod; every module declares the same),
# so that a go line that claims too old a release fails CI. The go command
# downloads that toolchain from the module proxy (GOTOOLCHAIN).
#
# Usage: scripts/oldest-go.sh [module dir...]   (default: every module)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
oldest=go$($GO list -m -f '{{.GoVersion}}')
if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)
fi
for m in "${modules[@]}"; do
  want=go$(cd "$m" && $GO list -m -f '{{.GoVersion}}')
  if [ "$want" != "$oldest" ]; then
    echo "oldest-go: $m declares $want, the root module $oldest: keep the go lines equal" >&2
    exit 1
  fi
  echo "== $oldest $m"
  (cd "$m" && GOTOOLCHAIN=$oldest $GO build -o /dev/null ./... && GOTOOLCHAIN=$oldest $GO vet ./...)
done
