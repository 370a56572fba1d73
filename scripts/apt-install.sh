#!/usr/bin/env bash
# Installs the Debian packages named as arguments (through sudo when not
# root). Used by setup.sh and setup-clients.sh for what is missing.
set -euo pipefail
[ $# -gt 0 ] || exit 0
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
