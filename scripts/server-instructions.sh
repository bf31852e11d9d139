#!/usr/bin/env bash
# Redis server instructions per uncontended lock + unlock, counted by valgrind's callgrind: a figure
# that does not move with the machine's load (the same binary and inputs give the same count within
# a fraction of a percent), for comparing scripts before and after a change on a busy host.
#
#   scripts/server-instructions.sh                 # lockkit, raw floor, the two-script floors
#   scripts/server-instructions.sh lockkit raw     # some of them
#
# Each variant of core's BenchmarkScriptServerCPU (16 goroutines, each on its own key) runs twice,
# N1 and N2 operations, against a redis-server started under callgrind (through a wrapper first on
# PATH, so internal/redistest starts it as usual); instructions per operation = the difference of
# the two totals ÷ the difference of the operations, so startup and script loading cancel out.
# The SHA-1 work is left out of the totals: how many goroutines' first calls meet NOSCRIPT at once
# and fall back to EVAL, each hashing the script's source, is a race at startup that moved the
# figure by up to ±1,000 instructions per operation from run to run (the raw figure is printed
# beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
N1=${N1:-2512}
N2=${N2:-10512}
impls=("$@")
[ ${#impls[@]} -gt 0 ] || impls=(lockkit raw two-empty-scripts two-scripts-commands-only)
if ! command -v valgrind >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null
fi
./scripts/deps.sh
server=$(command -v redis-server)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/redis-server" <<WRAP
#!/usr/bin/env bash
exec valgrind --tool=callgrind --callgrind-out-file="\$LOCKKIT_CG_DIR/cg.%p" "$server" "\$@"
WRAP
chmod +x "$work/redis-server"
(cd core && go test -c -o "$work/core.test" . >/dev/null)

# total IMPL N: the instructions a redis-server ran for N operations (startup included), and those
# of its SHA-1 work.
total() {
  local dir="$work/$1-$2" try
  for try in 1 2 3; do # under valgrind a loaded host can overrun redistest's start timeout
    rm -rf "$dir" && mkdir -p "$dir"
    if (cd core && LOCKKIT_CG_DIR="$dir" PATH="$work:$PATH" "$work/core.test" -test.run '^$' \
      -test.bench "BenchmarkScriptServerCPU/impl=$1\$/goroutines=16\$" -test.benchtime "${2}x" >"$dir/log" 2>&1); then
      local raw sha
      raw=$(awk '/^(summary|totals):/ {print $2; exit}' "$dir"/cg.*)
      sha=$(callgrind_annotate --threshold=100 "$dir"/cg.* |
        awk '$0 ~ /SHA1|sha1hex/ && $0 !~ /PROGRAM TOTALS/ && $1 ~ /^[0-9,]+$/ {gsub(",", "", $1); s += $1} END {printf "%d", s}')
      echo "$raw $sha"
      return
    fi
  done
  echo "server-instructions: $1 failed 3 times; last log:" >&2
  cat "$dir/log" >&2
  exit 1
}

# ops N: the operations the benchmark runs for -benchtime Nx (16 goroutines, N/16+1 each).
ops() { echo $(( ($1 / 16 + 1) * 16 )); }

printf '%-28s %14s %14s\n' variant 'instructions/op' 'raw'
for impl in "${impls[@]}"; do
  read -r a asha <<<"$(total "$impl" "$N1")"
  read -r b bsha <<<"$(total "$impl" "$N2")"
  d=$(( $(ops "$N2") - $(ops "$N1") ))
  printf '%-28s %14d %14d\n' "$impl" $(( (b - bsha - a + asha) / d )) $(( (b - a) / d ))
done
