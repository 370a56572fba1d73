#!/usr/bin/env bash
# Installs what squeeze's demo and tests need on a fresh Debian machine:
# redis-server and redis-tools (redis-cli, redis-benchmark), and iproute2 (ip,
# tc) for "squeeze bench docs" over a shaped link. Go modules come
# through "go mod download". Safe to run again; does nothing that is done.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v tc >/dev/null 2>&1 || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then bash "$(dirname "$0")/apt-install.sh" "${need[@]}"; fi
# redis-server from Debian starts a system service on 6379; squeeze's tests
# and demo start their own servers on free ports and do not need it.
go mod download
