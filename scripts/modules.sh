#!/usr/bin/env bash
# Runs a command in every Go module of the repository (the root first, then each nested module), with
# the workspace off so that each module builds with its own go.mod, as its users build it. Runs
# them all and fails at the end if any failed, naming them.
#   scripts/modules.sh                 lists the module directories
#   scripts/modules.sh go test ./...   runs the command in each
set -uo pipefail
cd "$(dirname "$0")/.."
mods=$(git ls-files --cached --others --exclude-standard -- 'go.mod' '*/go.mod' | xargs -n1 dirname | sort)
if [ $# -eq 0 ]; then
  echo "$mods"
  exit 0
fi
failed=()
for m in $mods; do
  echo "== $m: $*" >&2
  (cd "$m" && GOWORK=off "$@") || failed+=("$m")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED in: ${failed[*]}" >&2
  exit 1
fi
