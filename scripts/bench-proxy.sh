#!/usr/bin/env bash
# Measures "squeeze proxy" against Redis directly with redis-benchmark, and
# prints throughput ratios measured in one run on this machine:
#
#   1. compression off (--min-size 1GiB): SET/GET, -c 50, without and with -P 16,
#      and the CPU per SET of the proxy and of Redis itself (from /proc)
#   2. compression on (the default codec), 47.5 kB JSON documents: SET/GET rates
#      and the Redis memory those documents take, direct vs through the proxy.
#
# Each measurement alternates direct and proxied runs ROUNDS times and takes
# the median rate, because a shared 2-core machine is noisy.
#
# Large values (0.1-10 MB), with twemproxy as a second column: bash
# scripts/bench-large.sh (issue 21's size sweep).
#
# Usage: bash scripts/bench-proxy.sh            (N=200000 PN=10*N ROUNDS=3)
#        N=50000 ROUNDS=1 bash scripts/bench-proxy.sh   (quick look)
#        DOC=path/to/doc.json bash scripts/bench-proxy.sh
#        SQUEEZE_REDIS_SERVER=path/to/redis-server bash scripts/bench-proxy.sh
#          (another server, e.g. Redis 8 from bash scripts/build-server.sh redis8)
# Needs redis-server and redis-benchmark (bash scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
# Pipelined runs get ten times the requests (PN): at -P 16 200,000 requests
# take a third of a second here, shorter than the machine's swings, and
# their ratios moved by 0.2 from one run to the next.
PN=${PN:-$((N * 10))}
ROUNDS=${ROUNDS:-3}
DOCN=${DOCN:-20000}
SERVER=${SQUEEZE_REDIS_SERVER:-redis-server}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/squeeze" ./cmd/squeeze

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
waitport() { for _ in $(seq 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "port $1 did not answer" >&2; exit 1; }
start_redis() {
  "$SERVER" --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --loglevel warning --daemonize no >/dev/null 2>&1 &
  pids+=($!); waitport "$1"
}
start_proxy() { # port upstream-port extra-flags...
  local port=$1 up=$2; shift 2
  "$work/squeeze" proxy --listen "127.0.0.1:$port" --upstream "redis://127.0.0.1:$up" --log-level warn "$@" 2>>"$work/proxy.log" &
  pids+=($!); waitport "$port"
}

# rate PORT ARGS... : requests per second of one redis-benchmark run (first test).
# The test name may hold commas and quotes (a JSON argument): count fields
# from the end of the line.
rate() { local port=$1; shift; redis-benchmark -p "$port" --csv "$@" 2>/dev/null | awk -F',' 'END {gsub(/"/, "", $(NF-6)); print $(NF-6)}'; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }

# compare NAME DIRECT_PORT PROXY_PORT ARGS... : median rates and their ratio.
compare() {
  local name=$1 dport=$2 pport=$3; shift 3
  local d=() p=()
  for _ in $(seq "$ROUNDS"); do
    d+=("$(rate "$dport" "$@")")
    p+=("$(rate "$pport" "$@")")
  done
  local dm pm
  dm=$(printf '%s\n' "${d[@]}" | median)
  pm=$(printf '%s\n' "${p[@]}" | median)
  printf '%-34s %12.0f %12.0f %8sx\n' "$name" "$dm" "$pm" "$(ratio "$pm" "$dm")"
}

RD=$(freeport); start_redis "$RD"        # direct runs
RD_PID=${pids[-1]}
RP=$(freeport); start_redis "$RP"        # behind the proxies
POFF=$(freeport); start_proxy "$POFF" "$RP" --min-size 1GiB
POFF_PID=${pids[-1]}
PON=$(freeport); start_proxy "$PON" "$RP"

idle=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)
[ "$idle" = haltpoll ] && idle="haltpoll, guest_halt_poll_ns=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo '?')"
echo "squeeze proxy vs Redis, $(nproc) cores, $("$SERVER" --version | awk '{sub(/^v=/, "", $3); print $1, $3}'), N=$N (pipelined: $PN), median of $ROUNDS, cpuidle: $idle"
printf '%-34s %12s %12s %9s\n' "benchmark" "direct rps" "proxy rps" "ratio"
echo "--- compression off (--min-size 1GiB)"
compare "SET -c 50"       "$RD" "$POFF" -t set -c 50 -n "$N"
compare "GET -c 50"       "$RD" "$POFF" -t get -c 50 -n "$N"
compare "SET -c 50 -P 16" "$RD" "$POFF" -t set -c 50 -n "$PN" -P 16
compare "GET -c 50 -P 16" "$RD" "$POFF" -t get -c 50 -n "$PN" -P 16
# The proxy's own CPU per command (user + system, from /proc), steadier
# than the ratios on a shared machine, beside what Redis itself spends per
# command when clients talk to it directly: GOMAXPROCS=2 bash
# scripts/bench-proxy.sh shows what a second proxy thread costs.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cpu_per_set() { # PID PORT ARGS... : CPU microseconds of PID per SET sent to PORT
  local pid=$1 port=$2; shift 2
  local before after
  before=$(cpu_ticks "$pid")
  redis-benchmark -p "$port" -t set -n "$N" "$@" -q >/dev/null 2>&1
  after=$(cpu_ticks "$pid")
  awk -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN {printf "%.1f", (b - a) / hz * 1e6 / n}'
}
for args in "-c 50" "-c 50 -P 16"; do
  # shellcheck disable=SC2086 # args holds several flags
  echo "CPU per SET ($args): proxy $(cpu_per_set "$POFF_PID" "$POFF" $args) us; Redis, clients direct: $(cpu_per_set "$RD_PID" "$RD" $args) us"
done

# A 47.5 kB JSON document: DOC, else a slice of a public JSON corpus when
# present, else generated records.
doc="$work/doc.json"
if [ -n "${DOC:-}" ]; then head -c 47500 "$DOC" > "$doc"
elif [ -f ../shared/corpus/citm_catalog.json ]; then head -c 47500 ../shared/corpus/citm_catalog.json > "$doc"
else
  : > "$doc"
  i=0
  while [ "$(stat -c %s "$doc")" -lt 47500 ]; do
    printf '{"id":%d,"name":"user %d","email":"user%d@example.com","active":%s,"score":%d,"tags":["redis","cache","json"],"address":{"city":"Springfield","zip":"%05d"}},\n' \
      $i $i $i $([ $((i % 3)) = 0 ] && echo true || echo false) $((i * 37 % 1000)) $((i * 7919 % 100000)) >> "$doc"
    i=$((i + 1))
  done
  truncate -s 47500 "$doc"
fi
val=$(cat "$doc")
alg=$("$work/squeeze" encode < "$doc" | "$work/squeeze" inspect | awk '$1 == "codec" {print $2}')
echo "--- compression on (default codec: $alg, min-size 64), 47.5 kB JSON documents, keyspace 1000"
redis-cli -p "$RD" FLUSHALL >/dev/null; redis-cli -p "$RP" FLUSHALL >/dev/null
base_d=$(redis-cli -p "$RD" INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
base_p=$(redis-cli -p "$RP" INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
compare "SET doc -c 50" "$RD" "$PON" -c 50 -n "$DOCN" -r 1000 SET 'doc:__rand_int__' "$val"
compare "GET doc -c 50" "$RD" "$PON" -c 50 -n "$DOCN" -r 1000 GET 'doc:__rand_int__'
keys_d=$(redis-cli -p "$RD" DBSIZE); keys_p=$(redis-cli -p "$RP" DBSIZE)
mem_d=$(( $(redis-cli -p "$RD" INFO memory | awk -F: '/^used_memory:/ {print $2+0}') - base_d ))
mem_p=$(( $(redis-cli -p "$RP" INFO memory | awk -F: '/^used_memory:/ {print $2+0}') - base_p ))
stored=$(redis-cli -p "$RP" STRLEN doc:000000000001 2>/dev/null || echo "?")
printf '%-34s %12s %12s\n' "keys" "$keys_d" "$keys_p"
printf '%-34s %12d %12d %8sx\n' "Redis used_memory for the docs" "$mem_d" "$mem_p" "$(ratio "$mem_p" "$mem_d")"
awk -v d="$mem_d" -v p="$mem_p" -v s="$stored" 'BEGIN {printf "memory saved through the proxy: %.1f%% (one document: 47500 bytes raw, %s bytes stored)\n", 100*(1-p/d), s}'
# Every document must read back through the proxy as it was written: the
# rates above mean nothing for a proxy that stores or returns other bytes
# (redis-benchmark does not look at replies). One GET per key, pipelined
# by redis-cli, compared with the document; the stored sizes as Redis
# holds them are printed too (one size for every key, unless the frames
# differ).
redis-cli -p "$RP" --scan --pattern 'doc:*' > "$work/keys"
sed 's/^/GET /' "$work/keys" | redis-cli -p "$PON" --raw > "$work/read"
while read -r _; do printf '%s\n' "$val"; done < "$work/keys" > "$work/want"
sizes=$(sed 's/^/STRLEN /' "$work/keys" | redis-cli -p "$RP" | sort | uniq -c | awk '{printf "%s%d x %d bytes", (NR > 1 ? ", " : ""), $1, $2}')
if cmp -s "$work/read" "$work/want"; then
  echo "documents read back through the proxy: all $(wc -l < "$work/keys") equal to the one written (stored: $sizes)"
else
  at=$(cmp "$work/read" "$work/want" | awk '{print $5+0}' | tr -d ,)
  # All keys before it read back whole: the first wrong one is at this index.
  each=$(printf '%s\n' "$val" | wc -c) # bytes of one read: the document and a newline
  bad=$(sed -n "$(( (at - 1) / each + 1 ))p" "$work/keys")
  keep=${TMPDIR:-/tmp}/squeeze-bench-mismatch
  redis-cli -p "$RP" --raw GET "$bad" > "$keep.stored"
  redis-cli -p "$PON" --raw GET "$bad" > "$keep.read"
  echo "documents read back through the proxy DIFFER from the one written, first at byte $at of the reads, key $bad (stored: $sizes); what Redis holds for it: $keep.stored, what the proxy returns: $keep.read" >&2
  exit 1
fi
