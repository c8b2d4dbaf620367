#!/usr/bin/env bash
# Installs PostgreSQL's server binaries (initdb, postgres) from Debian's
# packages when they are missing. The redlocksql tests start their own
# server on a free loopback port, in a temporary directory, as the user
# "postgres" when run as root; nothing is started here, and the package's
# own cluster is not used.
set -euo pipefail
if command -v initdb >/dev/null && command -v postgres >/dev/null; then
  exit 0
fi
if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing postgresql with apt-get" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
