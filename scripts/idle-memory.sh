#!/usr/bin/env bash
# Measures what idle connections cost: N clients (default 5000) each send
# one GET and then wait, against redis-server directly and against a proxy
# in front of another redis-server; prints each process's resident memory
# per client (scripts/idleclients). VALUE=BYTES has each client SET and
# GET a JSON document of that size first (the proxy compresses it). REF
# builds the proxy from a git revision instead of the working tree.
#
#   bash scripts/idle-memory.sh            # 5000 clients
#   N=300 VALUE=500000 bash scripts/idle-memory.sh
#   N=10000 REF=HEAD~1 bash scripts/idle-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-5000}
REF=${REF:-}
VALUE=${VALUE:-0}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$REF" ]; then git worktree remove --force "$work/src" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "$REF" ]; then
  git worktree add -q --detach "$work/src" "$REF"
  (cd "$work/src" && go build -o "$work/squeeze" ./cmd/squeeze)
else
  go build -o "$work/squeeze" ./cmd/squeeze
fi
go build -o "$work/idleclients" ./scripts/idleclients
ulimit -n $((N + 1000)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
waitport() { for _ in $(seq 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "port $1 did not answer" >&2; exit 1; }
start_redis() { redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --maxclients $((N + 100)) --loglevel warning >/dev/null 2>&1 & pids+=($!); waitport "$1"; }

RD=$(freeport); start_redis "$RD"; RD_PID=${pids[-1]}
RU=$(freeport); start_redis "$RU"
PP=$(freeport)
"$work/squeeze" proxy --listen "127.0.0.1:$PP" --upstream "redis://127.0.0.1:$RU" --log-level warn 2>>"$work/proxy.log" &
pids+=($!); PP_PID=${pids[-1]}; waitport "$PP"

echo "redis-server $(redis-server --version | awk '{print $3}' | tr -d v=), $N clients, proxy from ${REF:-the working tree}"
printf 'redis-server directly: '; "$work/idleclients" -addr "127.0.0.1:$RD" -pid "$RD_PID" -clients "$N" -value "$VALUE"
printf 'squeeze proxy:         '; "$work/idleclients" -addr "127.0.0.1:$PP" -pid "$PP_PID" -clients "$N" -value "$VALUE"
