#!/usr/bin/env bash
# Installs redis-server and redis-cli (Debian/Ubuntu package names) when they are missing.
# The test suite starts its own servers on free loopback ports; nothing needs to be running.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server/redis-cli not found: installing them with apt-get" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
# The package may start a system service on 6379; the tests never use it.
command -v redis-server >/dev/null && command -v redis-cli >/dev/null
