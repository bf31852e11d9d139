#!/usr/bin/env bash
# make compat: the rolling-deploy check. Builds internal/compat's worker twice, at the baseline
# and at the working tree, and runs internal/compat's TestCompat, which starts one redis-server
# and both workers side by side on the same names (every kind of hold) and checks what they
# recorded (docs/compat.md).
#
#   scripts/compat.sh              baseline: the latest release tag before HEAD (git describe --tags
#                                  --abbrev=0 HEAD^: a tagged HEAD is checked against the previous one), or
#                                  8145591 (main as of issue #44) while there is none
#   COMPAT_BASE=REV scripts/compat.sh   any other commit or tag
#   COMPAT_DURATION=2m             the longest the workers run (default 90s; they stop once every
#                                  pair of kinds has met, after 10 s)
#
# The worker does not exist at the baseline: it uses only core's public API, and is copied into
# an extracted copy of the baseline (git archive) as a package of that tree's root module, so that
# it builds against the baseline's core and go.mod. The HEAD worker builds in its own module
# (internal/compat, whose go.mod replaces the root module by the working tree).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
base=${COMPAT_BASE:-}
if [ -z "$base" ]; then
  # The latest tag before this commit: at a release's own tag, the previous release.
  base=$(git describe --tags --abbrev=0 HEAD^ 2>/dev/null || echo 8145591)
fi
if ! rev=$(git rev-parse --verify --quiet "$base^{commit}"); then
  echo "compat: the baseline $base is not in this clone (a shallow clone? fetch the full history)" >&2
  exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockkit-compat.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git archive "$rev" | tar -x -C "$tmp/base"
mkdir "$tmp/base/internal/compatworker"
cp internal/compat/worker/main.go "$tmp/base/internal/compatworker/"
label=$base
short=$(git rev-parse --short "$rev")
[[ $short == "$base"* ]] || label="$base ($short)"
start=$SECONDS
(cd "$tmp/base" && GOWORK=off GOFLAGS=-mod=readonly $GO build -race -o "$tmp/worker-base" ./internal/compatworker)
(cd internal/compat && GOWORK=off $GO build -race -o "$tmp/worker-head" ./worker)
echo "compat: built the workers of $label and of the working tree in $((SECONDS - start)) s"
cd internal/compat
LOCKKIT_COMPAT_BASE="$tmp/worker-base" LOCKKIT_COMPAT_HEAD="$tmp/worker-head" \
  LOCKKIT_COMPAT_BASE_REV="$label" LOCKKIT_COMPAT_DURATION="${COMPAT_DURATION:-90s}" \
  GOWORK=off $GO test -race -count=1 -timeout 5m -run '^TestCompat$' -v .
