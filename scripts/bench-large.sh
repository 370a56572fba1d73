#!/usr/bin/env bash
# Large values through a proxy (issue 21): direct Redis, "squeeze proxy" and
# twemproxy side by side in one run, values of 0.1, 1, 4.2 and 10 MB, SET and
# GET, with the ratio of each proxy's rate to Redis directly, and the CPU
# each request cost (user + system from /proc/PID/stat, before and after
# each run, over the requests): of Redis directly, of each proxy, and of
# Redis behind each proxy.
#
#   1. compression off (squeeze --min-size 1GB): redis-benchmark -t set/get
#      -d SIZE, -c 10 for 100 kB, -c 4 for 1 MB, -c 2 for 4.2 MB and 10 MB.
#   2. compression on (squeeze's default codec): a generated JSON document
#      of each size (bench.JSONDocument, the documents "squeeze bench redis"
#      writes), SET and GET by scripts/docload with the same client counts:
#      redis-benchmark cannot send a document (one argument is at most 128 kB,
#      and its -d values are not JSON). twemproxy does not compress: it is
#      the plain hop to compare the compressing one with.
#
# All paths use one Redis (the same server state for each; the runs take
# turns, never overlap). Each row runs ROUNDS interleaved rounds, each round
# one run per path in a rotating order, and reports the median rate. -n is
# scaled per size so that one direct run takes a couple of seconds here.
#
# twemproxy (nutcracker 0.5) runs with its defaults: one pool, one server,
# redis: true, preconnect: true, on loopback. It holds values in chains of
# mbufs of 16 kB (-m, --mbuf-size); its README notes a larger mbuf can help
# large values at a memory cost per connection. A check at 1 and 4.2 MB with
# -m 512KiB showed no difference beyond the noise, so the default stays;
# TWEMPROXY_MBUF=524288 measures another size.
#
# Usage: bash scripts/bench-large.sh                (ROUNDS=3 SCALE=1)
#        ROUNDS=1 SCALE=0.2 bash scripts/bench-large.sh   (quick look)
#        JSON=1 bash scripts/bench-large.sh   (also writes bench-large.json;
#                                              JSON=path writes there)
#        SIZES="1000000 4200000" PARTS=off bash scripts/bench-large.sh
#          (some sizes only; PARTS=off, on, or "off on", the default)
#        TWEMPROXY=none bash scripts/bench-large.sh   (no twemproxy column;
#          TWEMPROXY=path/to/nutcracker runs another build)
# Needs redis-server and redis-benchmark (bash scripts/setup.sh), and for the
# twemproxy column nutcracker (bash scripts/setup-bench.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SCALE=${SCALE:-1}
SIZES=${SIZES:-100000 1000000 4200000 10000000}
PARTS=${PARTS:-off on}
SERVER=${SQUEEZE_REDIS_SERVER:-redis-server}
JSON=${JSON:-}
[ "$JSON" = 1 ] && JSON=bench-large.json
case "$ROUNDS" in ''|*[!0-9]*|0) echo "ROUNDS must be a whole number of at least 1, not '$ROUNDS'" >&2; exit 2;; esac
awk -v s="$SCALE" 'BEGIN {exit !(s + 0 > 0)}' || { echo "SCALE must be a number above 0, not '$SCALE'" >&2; exit 2; }
for s in $SIZES; do
  case "$s" in 100000|1000000|4200000|10000000) ;; *) echo "SIZES: $s is not one of 100000 1000000 4200000 10000000" >&2; exit 2;; esac
done
for p in $PARTS; do
  case "$p" in off|on) ;; *) echo "PARTS: $p is neither off nor on" >&2; exit 2;; esac
done

# clients and requests per size: -c as issue 21 measures, -n for a couple
# of seconds of direct Redis on this machine.
clients_for() { case $1 in 100000) echo 10;; 1000000) echo 4;; *) echo 2;; esac; }
requests_for() {
  local n
  case $1 in 100000) n=40000;; 1000000) n=8000;; 4200000) n=1200;; 10000000) n=150;; esac
  awk -v n="$n" -v s="$SCALE" -v c="$(clients_for "$1")" 'BEGIN {n = int(n * s); print (n < c ? c : n)}'
}
label_for() { case $1 in 100000) echo "100 kB";; 1000000) echo "1 MB";; 4200000) echo "4.2 MB";; 10000000) echo "10 MB";; esac; }

TWEM=${TWEMPROXY:-$(command -v nutcracker || true)}
[ -z "$TWEM" ] && [ -x /usr/sbin/nutcracker ] && TWEM=/usr/sbin/nutcracker
if [ "$TWEM" = none ]; then TWEM=""
elif [ -z "$TWEM" ]; then
  echo "twemproxy (nutcracker) is not installed: its column is left out (bash scripts/setup-bench.sh installs it)" >&2
elif ! [ -x "$TWEM" ]; then
  echo "TWEMPROXY=$TWEM is not an executable file" >&2; exit 2
fi

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/squeeze" ./cmd/squeeze
go build -o "$work/docload" ./scripts/docload

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
waitport() { for _ in $(seq 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "port $1 did not answer" >&2; exit 1; }

R=$(freeport)
"$SERVER" --port "$R" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --loglevel warning --daemonize no >/dev/null 2>&1 &
pids+=($!); R_PID=$!; waitport "$R"
start_squeeze() { # port flags...
  local port=$1; shift
  "$work/squeeze" proxy --listen "127.0.0.1:$port" --upstream "redis://127.0.0.1:$R" --log-level warn "$@" 2>>"$work/proxy.log" &
  pids+=($!); waitport "$port"
}
SOFF=$(freeport); start_squeeze "$SOFF" --min-size 1GB; SOFF_PID=${pids[-1]}
SON=$(freeport); start_squeeze "$SON"; SON_PID=${pids[-1]}
T=""
if [ -n "$TWEM" ]; then
  T=$(freeport)
  cat > "$work/nutcracker.yml" <<EOF
bench:
  listen: 127.0.0.1:$T
  redis: true
  preconnect: true
  servers:
    - 127.0.0.1:$R:1
EOF
  mbuf=()
  [ -n "${TWEMPROXY_MBUF:-}" ] && mbuf=(-m "$TWEMPROXY_MBUF")
  "$TWEM" -c "$work/nutcracker.yml" -s "$(freeport)" -a 127.0.0.1 -o "$work/nutcracker.log" -p "$work/nutcracker.pid" "${mbuf[@]}" &
  pids+=($!); waitport "$T"; T_PID=${pids[-1]}
fi

# rb_rate PORT ARGS... : requests per second of one redis-benchmark run.
rb_rate() { local port=$1; shift; redis-benchmark -p "$port" --csv "$@" 2>/dev/null | awk -F',' 'END {gsub(/"/, "", $2); print $2 + 0}'; }
# doc_rate PORT KEY ARGS... : requests per second of one docload run.
doc_rate() { local port=$1 key=$2; shift 2; "$work/docload" --addr "127.0.0.1:$port" --key "$key" "$@"; }
# ticks PID: CPU time (user + system) of a process so far, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
# per_req TICKS N: microseconds of CPU per request.
per_req() { awk -v t="$1" -v hz="$HZ" -v n="$2" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}'; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b + 0 == 0) print "-"; else printf "%.2f", a/b}'; }
joinc() { local IFS=,; echo "$*"; }

json_rows=()
# row PART OP SIZE : measures one row on every path and prints it.
row() {
  local part=$1 op=$2 size=$3 c n
  c=$(clients_for "$size"); n=$(requests_for "$size")
  local paths=(direct squeeze) d=() s=() t=() dr=() sp=() sr=() tp=() tr=()
  [ -n "$T" ] && paths+=(twemproxy)
  local r i k path v pid p0 p1 r0 r1
  for r in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((${#paths[@]} - 1))); do
      path=${paths[$(( (i + r) % ${#paths[@]} ))]}
      if [ "$part" = off ]; then
        case $path in direct) k=$R pid=$R_PID;; squeeze) k=$SOFF pid=$SOFF_PID;; twemproxy) k=$T pid=$T_PID;; esac
      else
        case $path in direct) k=$R pid=$R_PID;; squeeze) k=$SON pid=$SON_PID;; twemproxy) k=$T pid=$T_PID;; esac
      fi
      p0=$(ticks "$pid"); r0=$(ticks "$R_PID")
      if [ "$part" = off ]; then
        v=$(rb_rate "$k" -t "$op" -d "$size" -c "$c" -n "$n")
      else
        v=$(doc_rate "$k" "squeeze:bench:large:$path" --op "$op" --size "$size" --clients "$c" --requests "$n")
      fi
      p1=$(ticks "$pid"); r1=$(ticks "$R_PID")
      case $path in
        direct) d+=("$v"); dr+=("$(per_req $((r1 - r0)) "$n")");;
        squeeze) s+=("$v"); sp+=("$(per_req $((p1 - p0)) "$n")"); sr+=("$(per_req $((r1 - r0)) "$n")");;
        twemproxy) t+=("$v"); tp+=("$(per_req $((p1 - p0)) "$n")"); tr+=("$(per_req $((r1 - r0)) "$n")");;
      esac
    done
  done
  local dm sm tm="" drm spm srm tpm=- trm=-
  dm=$(printf '%s\n' "${d[@]}" | median)
  sm=$(printf '%s\n' "${s[@]}" | median)
  drm=$(printf '%s\n' "${dr[@]}" | median)
  spm=$(printf '%s\n' "${sp[@]}" | median)
  srm=$(printf '%s\n' "${sr[@]}" | median)
  if [ -n "$T" ]; then
    tm=$(printf '%s\n' "${t[@]}" | median)
    tpm=$(printf '%s\n' "${tp[@]}" | median)
    trm=$(printf '%s\n' "${tr[@]}" | median)
  fi
  local name
  name="$(echo "$op" | tr a-z A-Z) $(label_for "$size"), -c $c"
  printf '%-22s %6s %10.1f %10.1f %8s %10s %8s %7s %7s %7s %7s %7s\n' "$name" "$n" "$dm" "$sm" "$(ratio "$sm" "$dm")x" \
    "$([ -n "$tm" ] && printf '%.1f' "$tm" || echo -)" "$([ -n "$tm" ] && echo "$(ratio "$tm" "$dm")x" || echo -)" \
    "$drm" "$spm" "$srm" "$tpm" "$trm"
  local stored=null
  if [ "$part" = on ] && [ "$op" = set ]; then
    stored=$(redis-cli -p "$R" STRLEN squeeze:bench:large:squeeze)
    echo "    stored through squeeze: $stored of $size bytes ($(awk -v a="$stored" -v b="$size" 'BEGIN {printf "%.1f%%", 100*a/b}'))"
  fi
  json_rows+=("$(printf '{"compression":"%s","op":"%s","size_bytes":%s,"clients":%s,"requests":%s,"rounds":%s,"direct_rps":%s,"squeeze_rps":%s,"twemproxy_rps":%s,"squeeze_ratio":%s,"twemproxy_ratio":%s,"squeeze_stored_bytes":%s,"cpu_us_per_request":{"redis_direct":%s,"squeeze":%s,"redis_behind_squeeze":%s,"twemproxy":%s,"redis_behind_twemproxy":%s},"runs":{"direct":[%s],"squeeze":[%s],"twemproxy":[%s]}}' \
    "$part" "$op" "$size" "$c" "$n" "$ROUNDS" "$dm" "$sm" "${tm:-null}" \
    "$(ratio "$sm" "$dm")" "$([ -n "$tm" ] && ratio "$tm" "$dm" || echo null)" "$stored" \
    "$drm" "$spm" "$srm" "$([ -n "$T" ] && echo "$tpm" || echo null)" "$([ -n "$T" ] && echo "$trm" || echo null)" \
    "$(joinc "${d[@]}")" "$(joinc "${s[@]}")" "$(joinc ${t[@]+"${t[@]}"})")")
}

# The last five columns are CPU microseconds per request (medians): Redis
# directly, squeeze, Redis behind squeeze, twemproxy, Redis behind twemproxy.
header() {
  printf '%-22s %6s %10s %10s %8s %10s %8s %7s %7s %7s %7s %7s\n' "workload" "-n" "direct/s" "squeeze/s" "ratio" "twemproxy" "ratio" \
    "us:R" "sq" "R<sq" "tw" "R<tw"
}
twem_version=none
[ -n "$TWEM" ] && twem_version="$("$TWEM" --version 2>&1 | awk '/nutcracker-/ {sub(/.*nutcracker-/, ""); print; exit}'), mbuf ${TWEMPROXY_MBUF:-16384 (default)}"
echo "large values: direct vs squeeze proxy vs twemproxy, $(nproc) cores, $("$SERVER" --version | awk '{sub(/^v=/, "", $3); print $1, $3}'), twemproxy $twem_version, median of $ROUNDS interleaved rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "CPU us per request: us:R Redis directly, sq squeeze, R<sq Redis behind squeeze, tw twemproxy, R<tw Redis behind twemproxy"
for part in $PARTS; do
  if [ "$part" = off ]; then
    echo "--- compression off (squeeze --min-size 1GB), redis-benchmark -d SIZE"
  else
    alg=$(head -c 100000 /dev/zero | tr '\0' a | "$work/squeeze" encode | "$work/squeeze" inspect | awk '$1 == "codec" {print $2}')
    echo "--- compression on (squeeze's default codec, $alg), generated JSON documents, scripts/docload"
  fi
  header
  for size in $SIZES; do
    row "$part" set "$size"
    row "$part" get "$size"
  done
done

if [ -n "$JSON" ]; then
  {
    printf '{"date":"%s","cores":%s,"server":"%s","twemproxy":"%s","rounds":%s,"scale":%s,"rows":[\n' \
      "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$(nproc)" "$("$SERVER" --version | awk '{sub(/^v=/, "", $3); print $1" "$3}')" "$twem_version" "$ROUNDS" "$SCALE"
    for i in "${!json_rows[@]}"; do
      [ "$i" -gt 0 ] && printf ',\n'
      printf '%s' "${json_rows[$i]}"
    done
    printf '\n]}\n'
  } > "$JSON"
  echo "wrote $JSON"
fi
