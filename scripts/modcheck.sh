#!/usr/bin/env bash
# Builds every module of the repository as its users get it, without the replace directives that
# serve development here, and checks what a user of core inherits. `make lint` runs it.
#
#   scripts/modcheck.sh                   the check
#   scripts/modcheck.sh graph [PKG...]    the check, then the module graph (go list -m all) of a
#                                         scratch consumer importing only PKG, for each PKG (by
#                                         default core, and every package of each published module)
#
# How: scripts/modproxy publishes every module of the working tree (uncommitted changes included)
# at one new pseudo-version into a temporary file-based module proxy, each go.mod requiring the
# repository's other modules at that version, as a release's go.mod files do (docs/releasing.md).
# Then, for every nested module, a copy whose go.mod has that version and no replace directive for
# the repository's modules is built and vetted (below) with GOWORK=off, resolving
# lockkit's modules from that proxy only. A published module must not require an unpublished one
# (examples, bench, internal/..., test modules), and the example programs must not import an
# internal package. Finally a scratch module that imports only core must list nothing but
# lockkit, go-redis and the modules a module importing only go-redis lists.
#
# lockkit's modules come from that proxy only, third-party modules from the module cache, then
# from $GOPROXY (the Go module proxy): nothing else is reached. The run's lockkit versions are
# extracted into the module cache, where third-party modules already are, so that the build
# cache of earlier builds serves this one (a fresh module cache would mean compiling grpc, otel
# and the test lab's libraries again), and are deleted from it at the end. "Builds" means every
# non-main package compiles and every package, main and test ones included, passes go vet (which
# type-checks them): linking each example binary would check nothing more about modules, and
# costs more than the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
mode=${1:-check}
[ $# -gt 0 ] && shift

root=$(pwd)
cache=$($GO env GOMODCACHE)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockkit-modcheck.XXXXXX")
version=
cleanup() {
  if [ -n "$version" ]; then
    if [ -d "$cache/github.com/lockkit" ]; then
      find "$cache/github.com/lockkit" -type d -name "*@$version" -prune -exec chmod -R u+w {} + -exec rm -rf {} +
    fi
    if [ -d "$cache/cache/download/github.com/lockkit" ]; then
      find "$cache/cache/download/github.com/lockkit" -path "*/@v/$version.*" -delete
      find "$cache/cache/download/github.com/lockkit" -path "*/@v/list" -exec sed -i "/^${version//./\\.}\$/d" {} +
    fi
    for d in "$cache/github.com/lockkit" "$cache/cache/download/github.com/lockkit"; do
      if [ -d "$d" ]; then find "$d" -depth \( -empty -o -name list -size 0 \) -delete; fi
    done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

upstream=$($GO env GOPROXY)
redis_version=$(GOWORK=off $GO list -m -f '{{.Version}}' github.com/redis/go-redis/v9)
mapfile -t dirs < <(./scripts/modules.sh)
GOWORK=off $GO build -o "$tmp/modproxy" ./scripts/modproxy
listing=$("$tmp/modproxy" -proxy "$tmp/proxy" -copies "$tmp/src" "${dirs[@]}")
version=$(head -n1 <<<"$listing")
echo "modcheck: the working tree's modules published at $version"

export GOWORK=off GOPROXY="file://$tmp/proxy,$upstream"
export GONOPROXY= GOPRIVATE= GONOSUMDB=github.com/lockkit/lockkit
export GOFLAGS="$($GO env GOFLAGS) -mod=mod"

# published DIR: whether the module in DIR is for users (not the examples, the benchmarks, the
# test lab under internal/ or a test module such as otel/test).
published() {
  case "/$1/" in */internal/* | /examples/* | /bench/* | */test/*) return 1 ;; esac
}
unpublished_paths=$(tail -n +2 <<<"$listing" | while read -r d path; do
  published "$d" || echo "$path"
done)

failed=()
for d in "${dirs[@]}"; do
  [ "$d" = . ] && continue
  echo "== $d: go build, go vet ./... (no replace directive; lockkit at $version)" >&2
  (
    cd "$tmp/src/$d"
    mapfile -t pkgs < <($GO list -e -f '{{if and (ne .Name "main") .GoFiles}}{{.ImportPath}}{{end}}' ./...)
    if [ ${#pkgs[@]} -gt 0 ]; then $GO build "${pkgs[@]}"; fi
    $GO vet ./...
    if published "$d"; then
      bad=$($GO list -m -f '{{.Path}}' all | grep -Fx "$unpublished_paths" || true)
      if [ -n "$bad" ]; then
        echo "$d is for users but requires modules that are not:" $bad >&2
        exit 1
      fi
    fi
  ) || failed+=("$d")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "modcheck: failed in: ${failed[*]}" >&2
  exit 1
fi

# The example programs import only what their readers can import: no internal package (their
# tests may use the test lab, which starts real Redis servers).
if [ -d "$tmp/src/examples" ]; then
  bad=$(cd "$tmp/src/examples" && $GO list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... |
    grep -E ' github\.com/lockkit/lockkit(/[^ ]*)?/internal/' || true)
  if [ -n "$bad" ]; then
    printf 'modcheck: example programs import internal packages:\n%s\n' "$bad" >&2
    exit 1
  fi
fi

# consumer DIR PKG...: a scratch module importing only PKG..., tidied; prints go list -m all
# without the consumer itself. Its go.sum starts as the given module's, to spare checksum lookups.
consumer() {
  local dir=$1 sum=$2
  shift 2
  mkdir -p "$dir"
  {
    echo "package main"
    echo
    for p in "$@"; do echo "import _ \"$p\""; done
    echo
    echo "func main() {}"
  } >"$dir/main.go"
  printf 'module example.com/consumer\n\ngo 1.26.0\n' >"$dir/go.mod"
  cp "$sum" "$dir/go.sum"
  (
    cd "$dir"
    # Require only the modules that provide PKG...: the innermost module path holding each.
    for p in "$@"; do
      mod=
      while read -r _ path; do
        if [[ "$p" == "$path" || "$p" == "$path"/* ]] && [ ${#path} -gt ${#mod} ]; then mod=$path; fi
      done < <(tail -n +2 <<<"$listing")
      $GO mod edit -require="$mod@$version"
    done
    $GO mod tidy >/dev/null
    $GO build -o /dev/null .
    $GO list -m all | tail -n +2
  )
}

core_graph=$(consumer "$tmp/consumer-core" "$root/go.sum" github.com/lockkit/lockkit/core)
redis_graph=$(
  mkdir -p "$tmp/consumer-redis" && cd "$tmp/consumer-redis" &&
    printf 'package main\n\nimport _ "github.com/redis/go-redis/v9"\n\nfunc main() {}\n' >main.go &&
    printf 'module example.com/consumer\n\ngo 1.26.0\n\nrequire github.com/redis/go-redis/v9 %s\n' "$redis_version" >go.mod &&
    cp "$root/go.sum" . && $GO mod tidy >/dev/null && $GO list -m all | tail -n +2
)
extra=$(comm -23 <(awk '{print $1}' <<<"$core_graph" | grep -vx github.com/lockkit/lockkit | sort) \
  <(awk '{print $1}' <<<"$redis_graph" | sort))
if [ -n "$extra" ]; then
  printf 'modcheck: a module importing only core lists modules that go-redis does not bring:\n%s\n' "$extra" >&2
  printf 'its graph:\n%s\n' "$core_graph" >&2
  exit 1
fi
echo "modcheck: ok: ${#dirs[@]} modules; a module importing only core lists $(wc -l <<<"$core_graph") modules (lockkit, go-redis $redis_version and its $(($(wc -l <<<"$redis_graph") - 1)))"

[ "$mode" = graph ] || exit 0
if [ $# -eq 0 ]; then
  set -- github.com/lockkit/lockkit/core
  while read -r d path; do
    published "$d" || continue
    mapfile -t pkgs < <(cd "$tmp/src/$d" && $GO list -f '{{if ne .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep -v /internal/)
    set -- "$@" "${pkgs[*]}"
  done < <(tail -n +2 <<<"$listing" | grep -v '^\. ')
fi
n=0
for pkgs in "$@"; do
  n=$((n + 1))
  d=$(awk '{print $1}' <<<"$pkgs")
  sum=$root/go.sum
  while read -r dir path; do
    [[ "$d" == "$path" || "$d" == "$path"/* ]] && [ -f "$tmp/src/$dir/go.sum" ] && sum="$tmp/src/$dir/go.sum"
  done < <(tail -n +2 <<<"$listing")
  # shellcheck disable=SC2086 # one argument may hold several packages
  graph=$(consumer "$tmp/graph-$n" "$sum" $pkgs)
  echo
  echo "== a module importing only $pkgs: $(wc -l <<<"$graph") modules"
  echo "$graph"
done
