#!/usr/bin/env bash
# Installs iproute2 (the ip command) when it is missing: tests/robust runs
# its nodes and clients in network namespaces (ip netns) and needs root.
# unshare (time namespaces) comes with util-linux, which Debian always has.
set -euo pipefail
if command -v ip >/dev/null && command -v unshare >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing iproute2 and util-linux with apt-get" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq iproute2 util-linux >/dev/null
