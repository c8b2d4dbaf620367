#!/usr/bin/env bash
# Vets every module for the other operating systems (darwin/arm64,
# windows/amd64), so that code (tests included) which only compiles on
# Linux is caught on a Linux amd64 CI machine; linux/amd64 itself is make
# vet's. go vet type-checks every package with its tests and checks
# assembly declarations; nothing is run.
#
# A module with a file for one architecture (a _amd64.go or _arm64.s name,
# or a //go:build line naming an architecture) is vetted for linux/arm64
# too, which catches code that only compiles on amd64. Today that is
# tests/robust (procclock). The other modules compile the same files for
# every architecture of an OS, and the pairs this check ran for them before
# cost a fresh CI machine minutes (the standard library and SQLite compiled
# again for each) and never caught anything.
#
# Likewise a module is vetted for the other operating systems only when
# code of its own can compile on Linux alone: a package (tests included)
# with a file for one OS (a _linux.go or _unix.go name, or a //go:build
# line naming an OS) or importing syscall, golang.org/x/sys/... or
# os/signal (SysProcAttr, signals, rlimits). A module of portable Go that
# imports only portable packages (the drivers, the adapters, the
# Kubernetes manifests' test) compiles wherever its dependencies do, which
# their own CI checks; vetting it twice more compiled their dependency
# trees (OpenTelemetry, Prometheus, rueidis, the Kubernetes API) for each
# OS on a fresh machine and could catch nothing.
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
oses="$($GO tool dist list | cut -d/ -f1 | sort -u | paste -sd'|')|unix"

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

# osSpecific reports whether code of the module in dir $1 may compile on
# Linux alone: a file for one OS, or an import of a system package.
osSpecific() {
  local d f
  if (cd "$1" && $GO list -e -f '{{join .Imports "\n"}}
{{join .TestImports "\n"}}
{{join .XTestImports "\n"}}' ./...) | grep -Eqx 'syscall|os/signal|golang\.org/x/sys/.*'; then
    return 0
  fi
  for d in $(cd "$1" && $GO list -e -f '{{.Dir}}' ./...); do
    for f in "$d"/*.go; do
      [ -e "$f" ] || continue
      if [[ $(basename "$f") =~ _($oses)(_test)?\.go$ ]] ||
        grep -Eq "^//go:build .*\b($oses)\b" "$f"; then
        return 0
      fi
    done
  done
  return 1
}

fail=0
for m in "${modules[@]}"; do
  if ! osSpecific "$m"; then
    echo "== $m: portable Go only, not vetted for other systems"
    continue
  fi
  targets="darwin/arm64 windows/amd64"
  if archSpecific "$m"; then
    targets="linux/arm64 $targets"
  fi
  for t in $targets; do
    echo "== $t $m"
    if ! (cd "$m" && GOOS=${t%/*} GOARCH=${t#*/} CGO_ENABLED=0 $GO vet ./...); then
      fail=1
    fi
  done
done
exit $fail
