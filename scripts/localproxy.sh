#!/usr/bin/env bash
# Publishes the published modules of this checkout (working tree, uncommitted changes included)
# into a directory laid out as a Go module proxy, all at one new pseudo-version, for a module of
# yours to require before lockkit's modules are published. README.md ("From a checkout") shows
# its use.
#
#   scripts/localproxy.sh [DIR]    DIR defaults to ~/.cache/lockkit-proxy; it prints the version
#                                  and the environment the go command needs to use the proxy
#
# Run it again after pulling: each run adds a newer version beside the earlier ones, and
# `go get github.com/lockkit/lockkit@VERSION` (or @latest with the printed environment) moves to it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lockkit-proxy}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Every module goes in (each module's zip must leave out the nested ones); the message names the
# ones a user imports: not the examples, the benchmarks, the test lab under internal/ or a test
# module such as otel/test (as in scripts/modcheck.sh).
mapfile -t dirs < <(./scripts/modules.sh)
listing=$(GOWORK=off $GO run ./scripts/modproxy -proxy "$dir" "${dirs[@]}")
version=$(head -n1 <<<"$listing")
cat <<MSG
lockkit's modules published at $version in $dir:
$(tail -n +2 <<<"$listing" | while read -r d path; do
  case "/$d/" in */internal/* | /examples/* | /bench/* | */test/*) ;; *) echo "  $path" ;; esac
done)

Use them from your module with:
  export GOPROXY=file://$dir,\$(go env GOPROXY) GONOSUMDB=github.com/lockkit/lockkit
  go get github.com/lockkit/lockkit@$version   # and each other lockkit module you import, at the same version
MSG
