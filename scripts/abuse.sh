#!/usr/bin/env bash
# The proxy's fault and abuse suite (issue 20): builds squeeze and runs
# "squeeze abuse", which starts redis-server and "squeeze proxy" as
# separate processes, kills and pauses Redis under verifying clients,
# measures the proxy's peak RSS under a non-reading client and a
# decompression bomb with another client's PING latency, and counts what
# mutated connection-state sequences leave behind. It exits non-zero on a
# wrong or lost value or a leak, and on a bound exceeded when one is given.
#
# Usage: bash scripts/abuse.sh [squeeze abuse flags]
#   bash scripts/abuse.sh                          # short form, 20-40 s (CI)
#   LONG=1 bash scripts/abuse.sh                   # long form, 30 s per phase
#   bash scripts/abuse.sh --duration 2m --part faults
#   PROXY_FLAGS="--client-buffer 1MiB --max-memory 512MiB" bash scripts/abuse.sh --ping-p99 50ms
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/squeeze" ./cmd/squeeze
args=()
if [ -n "${LONG:-}" ]; then args+=(--duration "${DURATION:-30s}"); fi
"$bin/squeeze" abuse "${args[@]}" "$@"
