#!/usr/bin/env bash
# Compares two builds of "squeeze proxy" side by side with redis-benchmark:
# each proxy sits in front of its own redis-server, a third redis-server is
# the direct baseline, and every round runs direct, A and B back to back.
# It prints, per round and as medians, each proxy's rate as a ratio of the
# direct rate and its CPU per request (user + system, from /proc), which is
# steadier than rates on a shared machine, and the CPU per request of the
# redis-server behind it.
#
# Usage: bash scripts/ab-proxy.sh OLD_REF [NEW_REF] -- REDIS_BENCHMARK_ARGS...
#   bash scripts/ab-proxy.sh HEAD~1 -- -t set -c 50 -P 16 -n 1000000
#   R=7 bash scripts/ab-proxy.sh main mybranch -- -t get -c 50 -n 200000
# A ref is a git revision (built in a temporary worktree) or the path of a
# squeeze binary; NEW_REF defaults to the working tree. -n is required.
# FLAGS adds proxy flags to both (default: --min-size 1GiB, compression off).
# PRE, when set, is a redis-cli command run on direct, A and B before the
# rounds (PRE="SCRIPT LOAD 'return 1'" for an EVALSHA workload).
# DOC=1 drives scripts/docload instead of redis-benchmark, for generated
# JSON documents (redis-benchmark's values are not JSON, and it cannot send
# one over 128 kB); the arguments are docload's, -requests is required, and
# FLAGS defaults to none (compression on):
#   DOC=1 R=5 bash scripts/ab-proxy.sh HEAD~1 -- -op set -size 1MB -clients 4 -requests 1000
# SHARED=1 puts A and B in front of one redis-server, the direct one (the
# same keys for both; Redis's CPU "behind" each is its CPU during that
# proxy's runs). TWEMPROXY=1 adds twemproxy (nutcracker, bash
# scripts/setup-bench.sh) as a third column T, in front of B's Redis:
#   SHARED=1 TWEMPROXY=1 R=7 PRE="..." bash scripts/ab-proxy.sh HEAD~1 -- -t get -d 1000000 -c 4 -n 3000
set -euo pipefail
cd "$(dirname "$0")/.."
R=${R:-5}
DOC=${DOC:-}
if [ -n "$DOC" ]; then FLAGS=${FLAGS:-}; else FLAGS=${FLAGS:---min-size 1GiB}; fi
[ $# -ge 2 ] || { sed -n '2,26p' "$0"; exit 2; }
TWEM=
if [ -n "${TWEMPROXY:-}" ]; then
  TWEM=$(command -v nutcracker || true)
  [ -z "$TWEM" ] && [ -x /usr/sbin/nutcracker ] && TWEM=/usr/sbin/nutcracker
  [ -n "$TWEM" ] || { echo "TWEMPROXY=1: nutcracker is not installed (bash scripts/setup-bench.sh)" >&2; exit 2; }
fi
A=$1; shift
B=.
if [ "$1" != "--" ]; then B=$1; shift; fi
[ "${1:-}" = "--" ] && shift
if [ -n "$DOC" ]; then
  N=$(printf '%s\n' "$@" | awk 'prev == "-requests" || prev == "--requests" {print; exit} {prev = $0}')
  [ -n "$N" ] || { echo "give docload a request count with -requests" >&2; exit 2; }
else
  N=$(printf '%s\n' "$@" | awk 'prev == "-n" {print; exit} {prev = $0}')
  [ -n "$N" ] || { echo "give redis-benchmark a request count with -n" >&2; exit 2; }
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  git worktree list --porcelain | awk -v w="$work" 'index($2, w) == 1 {print $2}' | xargs -r -n1 git worktree remove --force
  rm -rf "$work"
}
trap cleanup EXIT

build() { # REF OUT
  if [ -f "$1" ] && [ -x "$1" ]; then cp "$1" "$2"; return; fi
  if [ "$1" = . ]; then go build -o "$2" ./cmd/squeeze; return; fi
  git worktree add -q --detach "$work/src-$(basename "$2")" "$1"
  (cd "$work/src-$(basename "$2")" && go build -o "$2" ./cmd/squeeze)
}
build "$A" "$work/a"
build "$B" "$work/b"
[ -n "$DOC" ] && go build -o "$work/docload" ./scripts/docload

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
waitport() { for _ in $(seq 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "port $1 did not answer" >&2; exit 1; }
start_redis() { redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --loglevel warning >/dev/null 2>&1 & pids+=($!); waitport "$1"; }
start_proxy() { # BIN PORT UPSTREAM_PORT
  # shellcheck disable=SC2086 # FLAGS holds several flags
  "$1" proxy --listen "127.0.0.1:$2" --upstream "redis://127.0.0.1:$3" --log-level warn $FLAGS 2>>"$work/proxy.log" &
  pids+=($!); waitport "$2"
}
RD=$(freeport); start_redis "$RD"; RD_PID=${pids[-1]}
if [ -n "${SHARED:-}" ]; then
  RA=$RD RA_PID=$RD_PID RB=$RD RB_PID=$RD_PID
else
  RA=$(freeport); start_redis "$RA"; RA_PID=${pids[-1]}
  RB=$(freeport); start_redis "$RB"; RB_PID=${pids[-1]}
fi
PA=$(freeport); start_proxy "$work/a" "$PA" "$RA"; PA_PID=${pids[-1]}
PB=$(freeport); start_proxy "$work/b" "$PB" "$RB"; PB_PID=${pids[-1]}
# The paths every round measures after direct: name, proxy PID, Redis PID, port.
paths=("A $PA_PID $RA_PID $PA" "B $PB_PID $RB_PID $PB")
if [ -n "$TWEM" ]; then
  PT=$(freeport)
  printf 'ab:\n  listen: 127.0.0.1:%s\n  redis: true\n  preconnect: true\n  servers:\n    - 127.0.0.1:%s:1\n' "$PT" "$RB" > "$work/nutcracker.yml"
  "$TWEM" -c "$work/nutcracker.yml" -s "$(freeport)" -a 127.0.0.1 -o "$work/nutcracker.log" &
  pids+=($!); waitport "$PT"
  paths+=("T ${pids[-1]} $RB_PID $PT")
fi

if [ -n "${PRE:-}" ]; then
  for port in $(printf '%s\n' "$RD" "$RA" "$RB" | sort -u); do eval "redis-cli -p $port $PRE" >/dev/null; done
fi

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rate() {
  local port=$1; shift
  if [ -n "$DOC" ]; then "$work/docload" -addr "127.0.0.1:$port" "$@"; return; fi
  redis-benchmark -p "$port" --csv "$@" 2>/dev/null | awk -F',' 'END {gsub(/"/, "", $2); print $2}'
}
per_req() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}'; }
run() { # PID REDIS_PID PORT ARGS... : rate, and CPU microseconds per request of the proxy and of its Redis
  local pid=$1 rpid=$2 port=$3; shift 3
  local t0 r0 r t1 r1
  t0=$(ticks "$pid"); r0=$(ticks "$rpid"); r=$(rate "$port" "$@"); t1=$(ticks "$pid"); r1=$(ticks "$rpid")
  echo "$r $(per_req $((t1 - t0))) $(per_req $((r1 - r0)))"
}
tool=redis-benchmark; [ -n "$DOC" ] && tool=docload
echo "A=$A B=$B${TWEM:+ T=twemproxy}${SHARED:+, one redis-server behind all}, $tool $*, $R rounds, $(nproc) cores"
printf '%10s' "direct"; for p in "${paths[@]}"; do n=${p%% *}; printf ' %10s %8s %8s' "$n rps" "$n us" "$n R us"; done; echo
for _ in $(seq "$R"); do
  line=$(rate "$RD" "$@")
  for p in "${paths[@]}"; do read -r _ pid rpid port <<< "$p"; line="$line $(run "$pid" "$rpid" "$port" "$@")"; done
  echo "$line" | tee -a "$work/rounds" | awk '{printf "%10.0f", $1; for (i = 2; i <= NF; i += 3) printf " %10.0f %8.2f %8.2f", $i, $(i+1), $(i+2); print ""}'
done
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
out="median:"
i=2
for p in "${paths[@]}"; do
  r=$(awk -v i=$i '{print $i/$1}' "$work/rounds" | median); u=$(awk -v i=$((i + 1)) '{print $i}' "$work/rounds" | median); ru=$(awk -v i=$((i + 2)) '{print $i}' "$work/rounds" | median)
  out="$out $(printf '%s %.2fx direct, %.2f us/request (Redis behind it %.2f);' "${p%% *}" "$r" "$u" "$ru")"
  i=$((i + 3))
done
echo "${out%;}"
