#!/usr/bin/env bash
# Builds Redis 8 from the source that Debian 13 (trixie) ships, for running
# the tests against Redis 8 as well (scripts/test-redis8.sh). Debian 12, the
# machines' system, packages Redis 7.0 only, and trixie's binary package
# needs trixie's C library, so the server is built here from the same
# upstream tarball Debian builds it from, checked against its SHA-256.
# The build (about two minutes on two cores) is kept in a cache directory:
# a second run only prints the server's path.
#
# Prints the path of redis-server on its last line. Exits 3, with the
# reason, when the source cannot be fetched (no mirror reachable); any other
# failure exits 1.
set -euo pipefail
version=8.0.2
sha256=caf3c0069f06fc84c5153bd2a348b204c578de80490c73857bee01d9b5d7401f
cache=${SQUEEZE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/squeeze}
dir=$cache/redis-$version
server=$dir/src/redis-server
if [ -x "$server" ]; then
  echo "$server"
  exit 0
fi
need=()
command -v make >/dev/null 2>&1 || need+=(make)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v curl >/dev/null 2>&1 || need+=(curl)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
if [ ${#need[@]} -gt 0 ]; then bash "$(dirname "$0")/apt-install.sh" "${need[@]}"; fi

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
  echo "setup-redis8: no Debian mirror among apt's sources to fetch the Redis $version source from" >&2
  exit 3
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/redis-$version.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tarball=$tmp/redis_$version.orig.tar.gz
if ! curl -fsS --retry 3 -m 300 -o "$tarball" "${mirror%/}/pool/main/r/redis/redis_$version.orig.tar.gz"; then
  echo "setup-redis8: could not fetch redis_$version.orig.tar.gz from ${mirror%/}/pool/main/r/redis/" >&2
  exit 3
fi
echo "$sha256  $tarball" | sha256sum -c --quiet - >&2
tar -C "$tmp" -xzf "$tarball"
echo "setup-redis8: building Redis $version (TLS on, bundled jemalloc) in $dir" >&2
log=$tmp/build.log
if ! make -C "$tmp/redis-$version" -j"$(nproc)" BUILD_TLS=yes USE_SYSTEMD=no >"$log" 2>&1; then
  tail -40 "$log" >&2
  echo "setup-redis8: the build failed" >&2
  exit 1
fi
rm -rf "$dir"
mv "$tmp/redis-$version" "$dir"
"$server" --version >&2
echo "$server"
