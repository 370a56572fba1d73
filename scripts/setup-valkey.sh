#!/usr/bin/env bash
# Installs valkey-server, for running the tests against Valkey instead of
# Redis (SQUEEZE_REDIS_SERVER=valkey-server, see scripts/test-valkey.sh).
# Debian ships Valkey from trixie on; on bookworm it comes from
# bookworm-backports, which this script adds as an apt source when needed.
# Safe to run again; does nothing that is done.
set -euo pipefail
command -v valkey-server >/dev/null 2>&1 && exit 0
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
target=()
if [ "$codename" = bookworm ]; then
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    "${sudo[@]}" apt-get update -qq # indextargets lists only sources apt has read
    # The backports suite lives in the same archive as bookworm itself:
    # take the machine's own mirror for it.
    uri=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' | awk '$2 == "bookworm" && $1 !~ /security/ {print $1; exit}')
    if [ -z "$uri" ]; then
      echo "setup-valkey: no apt source for bookworm found to add bookworm-backports beside" >&2
      exit 1
    fi
    echo "deb $uri bookworm-backports main" | "${sudo[@]}" tee /etc/apt/sources.list.d/squeeze-bookworm-backports.list >/dev/null
  fi
  target=(-t bookworm-backports)
fi
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${target[@]}" valkey-server >/dev/null
valkey-server --version
