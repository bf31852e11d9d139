#!/usr/bin/env bash
# Releases every published module of the repository at one version (docs/releasing.md).
#
#   scripts/release.sh vX.Y.Z            dry run: checks (scripts/modcheck.sh included), then prints
#                                        every step it would take
#   scripts/release.sh vX.Y.Z --apply    takes the local steps (a tag, a commit, tags); pushes nothing
#
# Order: 1. tag the root module vX.Y.Z at HEAD; 2. one commit in which every nested module requires
# the repository's modules at vX.Y.Z (and lockotel.Version says X.Y.Z); 3. tag each published
# nested module DIR/vX.Y.Z at that commit; 4. print the push commands, root tag first. Published
# means every module but the examples, the benchmarks, the test lab under internal/ and test
# modules such as otel/test (their go.mod is bumped too, but they get no tag). Nested modules are
# found by scripts/modules.sh, so a new one is released without editing this script.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

usage() {
  echo "usage: scripts/release.sh vX.Y.Z [--apply]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
version=$1
apply=false
case "${2:-}" in
  --apply) apply=true ;;
  "") ;;
  *) usage ;;
esac
if ! [[ "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
  echo "release: $version is not a release version vX.Y.Z" >&2
  exit 2
fi
if [ "${BASH_REMATCH[1]}" -ge 2 ]; then
  echo "release: $version needs /v${BASH_REMATCH[1]} module paths; this script releases v0 and v1 only" >&2
  exit 2
fi
plain=${version#v}

# run CMD...: runs it with --apply, prints it otherwise.
run() {
  if $apply; then
    echo "+ $*"
    "$@"
  else
    printf '  '
    printf '%q ' "$@"
    echo
  fi
}

published() {
  case "/$1/" in */internal/* | /examples/* | /bench/* | */test/*) return 1 ;; esac
}

# Checks, in both modes.
problems=()
[ -z "$(git status --porcelain)" ] || problems+=("the working tree has changes: commit or stash them")
grep -q "^## \[$plain\]" CHANGELOG.md || problems+=("CHANGELOG.md has no '## [$plain]' section (rename [Unreleased])")
mapfile -t dirs < <(./scripts/modules.sh)
nested=()
tags=("$version")
for d in "${dirs[@]}"; do
  [ "$d" = . ] && continue
  nested+=("$d")
  published "$d" && tags+=("$d/$version")
done
for t in "${tags[@]}"; do
  if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then problems+=("tag $t exists"); fi
done
if [ ${#problems[@]} -gt 0 ]; then
  printf 'release: %s\n' "${problems[@]}" >&2
  $apply && exit 1
  echo "(dry run: continuing to show the steps)" >&2
fi

root_path=$(GOWORK=off $GO list -m)

echo "== release $version of ${#tags[@]} modules: ${tags[*]}"
echo "== 0. check (also in a dry run): every nested module builds against the others without replace directives"
./scripts/modcheck.sh

echo "== 1. tag the root module at HEAD ($(git rev-parse --short HEAD))"
run git tag -a "$version" -m "lockkit $version"

echo "== 2. nested modules require the repository's modules at $version"
run $GO run ./scripts/modproxy -bump "$version" "${dirs[@]}"
for d in "${nested[@]}"; do
  run env -C "$d" GOWORK=off "$GO" mod tidy
done
# The instrumentation reports its version as the OpenTelemetry scope version.
run sed -i "s/^\(\tVersion = \)\"[^\"]*\"/\1\"$plain\"/" otel/lockotel/lockotel.go
run git commit -qam "release $version: nested modules require lockkit $version"

echo "== 3. tag each published nested module at that commit"
for t in "${tags[@]:1}"; do
  run git tag -a "$t" -m "lockkit $t"
done

echo "== 4. push (not done by this script): the root tag first, then the others"
echo "  git push origin HEAD"
echo "  git push origin $version"
echo "  git push origin ${tags[*]:1}"
echo "  then check as a user would, outside the repository:"
echo "    GOPROXY=https://proxy.golang.org go list -m $root_path@$version"
for t in "${tags[@]:1}"; do
  echo "    GOPROXY=https://proxy.golang.org go list -m $root_path/${t%/"$version"}@$version"
done
