#!/usr/bin/env bash
# Builds a newer Redis or Valkey than Debian 12 packages, for running the
# tests against it as well (scripts/test-redis8.sh, scripts/test-valkey9.sh):
#
#   redis8   Redis 8.0.2, from the upstream tarball Debian 13 (trixie) builds
#            its package from (trixie's binary package needs trixie's C
#            library);
#   valkey9  Valkey 9.1.2, from the upstream tarball Debian unstable builds
#            from: the first Valkey with DELIFEQ, and with SET ... IFEQ
#            (Valkey 8.1), which the proxy serves exactly;
#   redis86  Redis 8.6.3, from the upstream tarball Debian experimental
#            builds from: Redis 8.4's DIGEST, DELEX, MSETEX and SET ...
#            IFEQ/IFNE/IFDEQ/IFDNE, which the proxy serves exactly.
#
# Each tarball is checked against its SHA-256. A build (about two minutes on
# two cores, TLS on, bundled jemalloc) is kept in a cache directory: a second
# run only prints the server's path.
#
# Prints the path of the server on its last line. Exits 3, with the reason,
# when the source cannot be fetched (no mirror reachable, or the archive has
# moved on from that version); any other failure exits 1.
set -euo pipefail
# What the build needs; "build-server.sh deps" installs only this.
need=()
command -v make >/dev/null 2>&1 || need+=(make)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v flock >/dev/null 2>&1 || need+=(util-linux)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
if [ ${#need[@]} -gt 0 ]; then bash "$(dirname "$0")/apt-install.sh" "${need[@]}"; fi
case "${1:-}" in
deps)
  exit 0
  ;;
redis8)
  name=redis version=8.0.2 pool=pool/main/r/redis
  sha256=caf3c0069f06fc84c5153bd2a348b204c578de80490c73857bee01d9b5d7401f
  ;;
valkey9)
  name=valkey version=9.1.2 pool=pool/main/v/valkey
  sha256=8e8557da7426a51b4e0fb514a65ef6241dc7c85cb408243af389070abf379cec
  ;;
redis86)
  name=redis version=8.6.3 pool=pool/main/r/redis
  sha256=58d0d1eb49a1ea6c2179659707fec171b1e2e2b8d5157ed2ec59d1d66ad5a654
  ;;
*)
  echo "usage: build-server.sh redis8|valkey9|redis86|deps" >&2
  exit 1
  ;;
esac
me="build-server $1"
cache=${SQUEEZE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/squeeze}
dir=$cache/$name-$version
server=$dir/src/$name-server
if [ -x "$server" ]; then
  echo "$server"
  exit 0
fi
# One build at a time per server: a second run (.ci/run starts the builds
# early, in the background) waits for the first, then finds its result.
mkdir -p "$cache"
exec 9>"$cache/.$name-$version.lock"
flock 9
if [ -x "$server" ]; then
  echo "$server"
  exit 0
fi
# The source lives in the Debian archive the machine already uses: take
# its mirror from apt's own list of sources.
find_mirror() {
  apt-get indextargets --format '$(REPO_URI) $(CODENAME)' 2>/dev/null |
    awk '$2 ~ /^(bookworm|trixie)(-updates|-backports)?$/ && $1 !~ /security/ {print $1; exit}'
}
mirror=$(find_mirror)
if [ -z "$mirror" ]; then # indextargets lists only the sources apt has read
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq || true
  mirror=$(find_mirror)
fi
if [ -z "$mirror" ]; then
  echo "$me: no Debian mirror among apt's sources to fetch the $name $version source from" >&2
  exit 3
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/$name-$version.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tarball=$tmp/${name}_$version.orig.tar.gz
if ! curl -fsS --retry 3 -m 300 -o "$tarball" "${mirror%/}/$pool/${name}_$version.orig.tar.gz"; then
  echo "$me: could not fetch ${name}_$version.orig.tar.gz from ${mirror%/}/$pool/" >&2
  exit 3
fi
echo "$sha256  $tarball" | sha256sum -c --quiet - >&2
mkdir "$tmp/$name-$version" # the top folder's name differs between tarballs
tar -C "$tmp/$name-$version" --strip-components=1 -xzf "$tarball"
echo "$me: building $name $version (TLS on, bundled jemalloc) in $dir" >&2
log=$tmp/build.log
if ! make -C "$tmp/$name-$version" -j"$(nproc)" BUILD_TLS=yes USE_SYSTEMD=no >"$log" 2>&1; then
  tail -40 "$log" >&2
  echo "$me: the build failed" >&2
  exit 1
fi
rm -rf "$dir"
mv "$tmp/$name-$version" "$dir"
"$server" --version >&2
echo "$server"
