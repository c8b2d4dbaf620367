#!/usr/bin/env bash
# Vets the modules given with the oldest Go release the modules declare
# (the go line of the root go.mod), so that a go line that claims too old a
# release fails CI: go vet compiles every dependency with that toolchain
# and type-checks every package, tests included, against its standard
# library. The go command downloads that toolchain from the module proxy
# (GOTOOLCHAIN). Every module of the repository must declare the same go
# line; make oldest passes the modules users build (the Makefile's
# RELEASED), since a go line is a promise to them.
#
# When the toolchain running this script is of the same release line as
# that go line (go1.26.8 against go 1.26.0), the check is skipped: patch
# releases add no API and no language change, so the older patch release
# would type-check exactly what make vet just did, at the cost of a
# toolchain download and a compile of every dependency on a fresh machine.
# It runs again by itself once CI's Go is a newer release line than the
# go line.
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
while read -r mod; do
  m=$(dirname "$mod")
  want=go$(cd "$m" && $GO list -m -f '{{.GoVersion}}')
  if [ "$want" != "$oldest" ]; then
    echo "oldest-go: $m declares $want, the root module $oldest: keep the go lines equal" >&2
    exit 1
  fi
done < <(find . -name go.mod -not -path '*/testdata/*' | sort)
# release line: go1.26.8 -> go1.26, go1.26.0 -> go1.26, go1.27rc1 -> go1.27.
line() { [[ $1 =~ ^(go[0-9]+\.[0-9]+) ]] && echo "${BASH_REMATCH[1]}"; }
current=$($GO env GOVERSION)
if [ "$(line "$current")" = "$(line "$oldest")" ]; then
  echo "== oldest: $current is of the go line's release line ($oldest): nothing an older patch release could catch; skipped"
  exit 0
fi
for m in "${modules[@]}"; do
  echo "== $oldest $m"
  (cd "$m" && GOTOOLCHAIN=$oldest $GO vet ./...)
done
