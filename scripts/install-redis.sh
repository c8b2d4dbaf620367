#!/usr/bin/env bash
# Installs redis-server, redis-sentinel and redis-cli from Debian's packages
# when any of them is missing. Tests and the demo start their own servers on
# free loopback ports; nothing is started here.
set -euo pipefail
if command -v redis-server >/dev/null && command -v redis-sentinel >/dev/null && command -v redis-cli >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing redis-server, redis-sentinel and redis-tools with apt-get" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server redis-sentinel redis-tools >/dev/null
