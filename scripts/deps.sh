#!/usr/bin/env bash
# Installs what the test suite starts by itself, when missing (Debian/Ubuntu package names):
#   redis-server, redis-cli  — every test starts its own servers on free loopback ports;
#   postgresql               — the fencing proof starts a private PostgreSQL (initdb + postgres).
# Nothing needs to be running: the tests never use a server you already run.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  need+=(postgresql)
fi
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "installing with apt-get: ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null
