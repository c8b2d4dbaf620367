#!/usr/bin/env bash
# Checks that importing the library pulls in only what the library needs:
# a fresh module that imports github.com/redlock-go/redlock (this checkout,
# through a replace) must not have the CLI's dependencies (miniredis,
# gopher-lua), the adapters' (Prometheus, OpenTelemetry) or the drivers'
# (rueidis, redigo) in its module graph. go list -m all is the graph a
# user's go.mod and go.sum get.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
cat > go.mod <<MOD
module example.com/leancheck

go $(cd "$root" && $GO list -m -f '{{.GoVersion}}')

require github.com/redlock-go/redlock v0.0.0-00010101000000-000000000000

replace github.com/redlock-go/redlock => $root
MOD
cat > main.go <<'SRC'
package main

import "github.com/redlock-go/redlock"

func main() { _, _ = redlock.New(nil) }
SRC
GOFLAGS=-mod=mod $GO mod tidy >/dev/null
graph=$($GO list -m all)
echo "$graph" | sed 's/^/  /'
if bad=$(echo "$graph" | grep -E 'miniredis|gopher-lua|prometheus|opentelemetry|redsync|bsm/redislock|modernc|jackc|rueidis|redigo'); then
  echo "lean-module: importing the library pulls in: $bad" >&2
  exit 1
fi
echo "lean-module: ok"
