#!/usr/bin/env bash
# Builds the release binaries of squeeze: static (CGO_ENABLED=0), stripped,
# named after their version and target, with archives and checksums.
#
#   bash scripts/release.sh v0.2.0                    # all six targets into dist/
#   bash scripts/release.sh v0.2.0 linux/amd64        # some targets only
#   DIST=/tmp/out bash scripts/release.sh v0.2.0      # another directory
#
# For each target OS/ARCH it writes
#   squeeze_VERSION_OS_ARCH[.exe]          the binary
#   squeeze_VERSION_OS_ARCH.tar.gz         (.zip for windows) a directory of
#                                          the same name: the binary as
#                                          squeeze[.exe], README.md, CHANGELOG.md
# and SHA256SUMS over all of them: cd dist && sha256sum -c SHA256SUMS.
# "squeeze version" in these binaries names VERSION and the commit.
#
# Runs on Linux (GNU tar and touch; zip for the Windows archives). The
# checkout must have no uncommitted changes (the binary could not be
# rebuilt from its commit); ALLOW_DIRTY=1 builds anyway, and the binaries
# then say "modified" after the commit.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/release.sh VERSION [OS/ARCH ...]   (VERSION like v1.2.3 or v1.2.3-rc.1)"
version=${1:?$usage}
shift
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION $version is not v MAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  echo "$usage" >&2
  exit 2
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64)
for t in "${targets[@]}"; do
  case $t in
    linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64 | windows/amd64 | windows/arm64) ;;
    *) echo "release: target $t: want one of linux, darwin, windows / amd64, arm64" >&2; exit 2 ;;
  esac
done

commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  if [ "${ALLOW_DIRTY:-}" != 1 ]; then
    echo "release: the checkout has uncommitted changes; commit them, or ALLOW_DIRTY=1 for a build marked modified" >&2
    exit 1
  fi
  echo "release: warning: uncommitted changes, the binaries say \"modified\"" >&2
  commit+="+modified"
fi
if ! grep -Eq "^## \[?$version\]?([^0-9A-Za-z.-]|$)" CHANGELOG.md; then
  echo "release: warning: CHANGELOG.md has no section \"## $version\"" >&2
fi

dist=${DIST:-dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
# Archives hold the commit's time, not the build's: the same commit gives
# the same bytes.
epoch=$(git log -1 --format=%ct)
export CGO_ENABLED=0
start=$SECONDS
files=()
for t in "${targets[@]}"; do
  os=${t%/*} arch=${t#*/}
  name=squeeze_${version}_${os}_${arch}
  exe=
  [ "$os" = windows ] && exe=.exe
  echo "release: $t -> $name$exe" >&2
  GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X main.Version=$version -X main.Commit=$commit" \
    -o "$dist/$name$exe" ./cmd/squeeze
  stage=$(mktemp -d)
  mkdir "$stage/$name"
  cp "$dist/$name$exe" "$stage/$name/squeeze$exe"
  cp README.md CHANGELOG.md "$stage/$name/"
  touch -d "@$epoch" "$stage/$name" "$stage/$name"/*
  rm -f "$dist/$name.tar.gz" "$dist/$name.zip"
  if [ "$os" = windows ]; then
    (cd "$stage" && find "$name" | LC_ALL=C sort | TZ=UTC zip -qX "$dist/$name.zip" -@)
    files+=("$name$exe" "$name.zip")
  else
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"
    files+=("$name$exe" "$name.tar.gz")
  fi
  rm -rf "$stage"
done
(cd "$dist" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release: $version (commit ${commit:0:12}) in $dist, $((SECONDS - start)) s; check: cd $dist && sha256sum -c SHA256SUMS" >&2
