#!/usr/bin/env bash
# Type-checks every module, tests included, for the other operating
# systems (darwin/arm64, windows/amd64), so that code which only compiles
# on Linux is caught on a Linux amd64 CI machine. scripts/crosscheck does
# it from source, compiling nothing; it says what that gives up against
# go vet for each target, which cost a fresh CI machine over ten minutes
# of CPU here (the standard library and every dependency compiled again
# for each target) against under three (164 CPU-seconds measured for
# every module, the tool's own build included, when it loaded each module
# on its own; it loads them together now).
#
# A module with a file for one architecture (a _amd64.go or _arm64.s name,
# or a //go:build line naming an architecture) is checked for linux/arm64
# too, which catches code that only compiles on amd64. Today that is
# tests/robust (procclock).
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
archs=$($GO tool dist list | cut -d/ -f2 | sort -u | paste -sd'|')

# archSpecific reports whether the packages of the module in dir $1 have a
# file for one architecture.
archSpecific() {
  local d f
  for d in $(cd "$1" && $GO list -e -f '{{.Dir}}' ./...); do
    for f in "$d"/*.go "$d"/*.s; do
      [ -e "$f" ] || continue
      if [[ $(basename "$f") =~ _($archs)(_test)?\.(go|s)$ ]] ||
        grep -Eq "^//go:build .*\\b($archs)\\b" "$f"; then
        return 0
      fi
    done
  done
  return 1
}

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd scripts/crosscheck && $GO build -o "$bin/crosscheck" .)

# One load of every module for the other systems, which shares the
# standard library's and the common dependencies' type-check among them
# (scripts/crosscheck says what a workspace changes), then the modules
# with code per architecture for linux/arm64.
fail=0
echo "== darwin/arm64 windows/amd64: ${modules[*]}"
"$bin/crosscheck" -target=darwin/arm64 -target=windows/amd64 "${modules[@]}" || fail=1
arch=()
for m in "${modules[@]}"; do
  if archSpecific "$m"; then
    arch+=("$m")
  fi
done
if [ ${#arch[@]} -gt 0 ]; then
  echo "== linux/arm64: ${arch[*]}"
  "$bin/crosscheck" -target=linux/arm64 "${arch[@]}" || fail=1
fi
exit $fail
