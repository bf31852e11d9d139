#!/usr/bin/env bash
# Runs a command in every Go module of the repository, with the workspace off so that each module
# builds with its own go.mod, as its users build it. Runs them all and fails at the end if any
# failed, naming them.
#   scripts/modules.sh                       lists the module directories
#   scripts/modules.sh CMD...                runs CMD in each module, one after another (the root
#                                            first), its output as it comes
#   scripts/modules.sh -j N CMD...           runs CMD in up to N modules at once, the slowest to
#                                            test first (internal/chaos, then the root); a module's
#                                            output is printed whole when it ends, after a line
#                                            with its exit status and its time
# Every module's line "== DIR: ... in N s" says how long it took; the exit status is 1 if CMD
# failed in any module (they are named last), 0 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
mods=$(git ls-files --cached --others --exclude-standard -- 'go.mod' '*/go.mod' | xargs -n1 dirname | sort)
jobs=1
if [ "${1:-}" = -j ]; then
  if ! [[ "${2:-}" =~ ^[1-9][0-9]*$ ]]; then
    echo "modules.sh: -j wants a number of modules at once (1 or more), got '${2:-}'" >&2
    exit 2
  fi
  jobs=$2
  shift 2
fi
if [ $# -eq 0 ]; then
  echo "$mods"
  exit 0
fi

failed=()

if [ "$jobs" -eq 1 ]; then
  for m in $mods; do
    echo "== $m: $*" >&2
    start=$SECONDS
    (cd "$m" && GOWORK=off "$@")
    rc=$?
    echo "== $m: exit $rc in $((SECONDS - start)) s" >&2
    [ $rc -eq 0 ] || failed+=("$m")
  done
else
  # The longest to test first, so that the short ones fill the time beside them: the randomized
  # checker and the fault scenarios (internal/chaos), then the root module (core's tests run one
  # after another), then the others in the listing's order.
  first="internal/chaos ."
  order=$(for m in $first; do grep -qxF "$m" <<<"$mods" && echo "$m"; done
    grep -vxF -f <(tr ' ' '\n' <<<"$first") <<<"$mods")
  out=$(mktemp -d "${TMPDIR:-/tmp}/lockkit-modules.XXXXXX")
  trap 'rm -rf "$out"' EXIT
  declare -A modOf startOf
  running=0
  # reap waits for one module to end and prints its status line and output.
  reap() {
    local pid rc m
    wait -n -p pid
    rc=$?
    m=${modOf[$pid]}
    echo "== $m: exit $rc in $((SECONDS - ${startOf[$m]})) s: $*"
    cat "$out/${m//\//_}.log"
    [ $rc -eq 0 ] || failed+=("$m")
    running=$((running - 1))
  }
  for m in $order; do
    [ $running -lt "$jobs" ] || reap "$@"
    echo "== $m: started: $*" >&2
    (cd "$m" && GOWORK=off exec "$@") >"$out/${m//\//_}.log" 2>&1 &
    modOf[$!]=$m
    startOf[$m]=$SECONDS
    running=$((running + 1))
  done
  while [ $running -gt 0 ]; do reap "$@"; done
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED in: ${failed[*]}" >&2
  exit 1
fi
