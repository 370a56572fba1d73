#!/usr/bin/env bash
# Scripts and compression, on a real framework (issue 22): a BullMQ queue,
# which writes every job from Lua, directly on Redis and through
# "squeeze proxy", and whether compacting what its scripts write would be
# safe. As a new user would: BullMQ (version pinned in
# scripts/bullmq/package-lock.json) installed with npm ci, a throwaway
# redis-server on a free loopback port, squeeze built from this tree with
# its default settings. Four parts, each but the third on a new
# redis-server and proxy:
#
#   1. direct: N jobs (default 200) of about SIZE bytes of JSON (default
#      35000) added with Queue.add on Redis directly; used_memory after the
#      adds; a worker (concurrency 4) processes them all, checks each job's
#      data and writes one job.log line per job.
#   2. proxy: the same through squeeze proxy; used_memory; the bytes per
#      kind of key; squeeze:script-prefixes; what
#      "squeeze advise --depth 2 --json" says (script_prefixes,
#      script_used); what "squeeze compact --min-idle 0 --include-raw" does
#      (its skipped counts).
#   3. on part 2's server: the completed jobs' data and returnvalue framed
#      by force (scripts/scriptstudy, HSET on Redis: what compact would do
#      if it did not skip the prefix); used_memory; then
#      queue.getCompleted (BullMQ's getJobs script) and Job.fromId (a plain
#      HGETALL) through the proxy.
#   4. N new jobs added through the proxy, their data framed by force;
#      used_memory; then a worker through the proxy for TIMEOUT_MS
#      (default 15000, lockDuration and stalledInterval 2 s instead of 30 s
#      so that stalled jobs show): what BullMQ's scripts do with the frames.
#
# Prints a table and the errors quoted; nothing is timed beyond the bounded
# worker runs (about 80 s in all on 2 cores, and npm ci the first time).
#
# Usage: bash scripts/study-scripts.sh
#        N=50 SIZE=10000 bash scripts/study-scripts.sh     (smaller queue)
# Needs node and npm (bash scripts/setup-clients.sh), redis-server and
# redis-cli (bash scripts/setup.sh), and go.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
SIZE=${SIZE:-35000}
TIMEOUT_MS=${TIMEOUT_MS:-15000}
SERVER=${SQUEEZE_REDIS_SERVER:-redis-server}
case "$N" in ''|*[!0-9]*|0) echo "N must be a whole number of at least 1, not '$N'" >&2; exit 2;; esac
[ "$N" -le 5000 ] || { echo "N=$N: at most 5000 jobs" >&2; exit 2; }
case "$SIZE" in ''|*[!0-9]*) echo "SIZE must be a whole number, not '$SIZE'" >&2; exit 2;; esac
for c in node npm redis-cli "$SERVER" go; do
  command -v "$c" >/dev/null || { echo "$c is not installed (bash scripts/setup.sh; bash scripts/setup-clients.sh)" >&2; exit 2; }
done

dir=scripts/bullmq
# node_modules/.installed-lock is the lock file node_modules was installed from.
if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.installed-lock"; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$dir/package-lock.json" "$dir/node_modules/.installed-lock"
fi

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/squeeze" ./cmd/squeeze
go build -o "$tmp/scriptstudy" ./scripts/scriptstudy

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
waitport() { for _ in $(seq 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "port $1 did not answer" >&2; exit 1; }

# fresh: a new redis-server and squeeze proxy in front of it for each part,
# so that used_memory compares like with like (an emptied server keeps
# memory it allocated: FLUSHALL and SCRIPT FLUSH left used_memory about
# 1.1 MB above a new server's here). The previous pair is stopped.
R="" P="" rp="" pp=""
part=0
fresh() {
  for p in $pp $rp; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  part=$((part + 1))
  mkdir -p "$tmp/redis$part"
  R=$(freeport)
  "$SERVER" --port "$R" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp/redis$part" --loglevel warning --daemonize no >/dev/null 2>&1 &
  rp=$!; pids+=($rp); waitport "$R"
  P=$(freeport)
  "$tmp/squeeze" proxy --listen "127.0.0.1:$P" --upstream "redis://127.0.0.1:$R" --log-level warn 2>>"$tmp/proxy.log" &
  pp=$!; pids+=($pp); waitport "$P"
  echo "  (a new redis-server: used_memory $(mem) before anything is written)"
}

prefix=bull:study:
study() { (cd "$dir" && TIMEOUT_MS=$TIMEOUT_MS node study.js "$@"); }
mem() { redis-cli -p "$R" INFO memory | awk -F: '$1 == "used_memory" {print $2 + 0}'; }
# j JSON EXPR: one value of a JSON line (node is there anyway).
j() { node -e 'const o = JSON.parse(process.argv[1]); const v = eval("o." + process.argv[2]); console.log(typeof v === "object" ? JSON.stringify(v) : v)' "$1" "$2"; }
group() { # sizes-json kind: "K keys, B bytes (MEMORY USAGE)"
  printf '%s keys, %s bytes' "$(j "$1" "groups['$2'].keys")" "$(j "$1" "groups['$2'].memory_usage")"
}
field() { # sizes-json name
  printf '%s fields, %s bytes, %s framed' "$(j "$1" "fields['$2'].count")" "$(j "$1" "fields['$2'].bytes")" "$(j "$1" "fields['$2'].framed")"
}
sizes() { "$tmp/scriptstudy" sizes --addr "127.0.0.1:$R" --prefix "$prefix"; }
sizes_report() { # label sizes-json
  echo "  $1 (used_memory $(j "$2" used_memory), used_memory_dataset $(j "$2" used_memory_dataset), used_memory_scripts $(j "$2" used_memory_scripts), mem_clients_normal $(j "$2" mem_clients_normal); MEMORY USAGE of the queue's keys: $(j "$2" memory_usage)):"
  echo "    job hashes (${prefix}N):     $(group "$2" job)"
  echo "      data:                       $(field "$2" data)"
  echo "      returnvalue:                $(field "$2" returnvalue)"
  echo "    per-job keys (${prefix}N:*, logs, locks): $(group "$2" job-sub)"
  echo "    events stream:                $(group "$2" events)"
  echo "    other queue keys:             $(group "$2" queue)"
}
work_report() { # work-json
  echo "  worker: completed $(j "$1" completed), failed $(j "$1" failed), stalled $(j "$1" stalled), processed $(j "$1" processed), data mismatches $(j "$1" data_mismatch), worker errors $(j "$1" worker_errors), $(j "$1" seconds) s$( [ "$(j "$1" timed_out)" = true ] && echo ", stopped at TIMEOUT_MS=$TIMEOUT_MS")"
  local e
  e=$(j "$1" first_worker_errors)
  [ "$e" != "[]" ] && echo "  first worker errors: $e"
  e=$(j "$1" failed_reasons)
  [ "$e" != "[]" ] && echo "  failed reasons: $e"
  return 0
}

script_prefixes() {
  local sp
  sp=$(redis-cli -p "$R" SMEMBERS squeeze:script-prefixes | sort -V)
  echo "  squeeze:script-prefixes: $(echo "$sp" | grep -c .) members: $(echo "$sp" | head -4 | paste -sd' ')$( [ "$(echo "$sp" | grep -c .)" -gt 4 ] && echo " ...")"
}
# row LABEL SIZES-JSON: one line of the final table.
rows=()
row() {
  rows+=("$(printf '| %s | %s | %s | %s | %s |' "$1" "$(j "$2" used_memory)" "$(j "$2" used_memory_dataset)" "$(j "$2" memory_usage)" "$(j "$2" "fields['data'].bytes")")")
}

echo "BullMQ $(node -p 'require("./'$dir'/node_modules/bullmq/package.json").version') with ioredis $(node -p 'require("./'$dir'/node_modules/ioredis/package.json").version'), $("$SERVER" --version | awk '{sub(/^v=/, "", $3); print $1, $3}'), squeeze proxy with its defaults, $N jobs of ~$SIZE bytes of JSON, $(date -u '+%Y-%m-%d %H:%M UTC')"

echo "--- 1. directly on Redis"
fresh
add=$(study add "$R" "$N" "$SIZE")
echo "  added $(j "$add" added) jobs, $(j "$add" data_bytes) bytes of job data (JSON.stringify)"
sz=$(sizes); sizes_report "keys after the adds" "$sz"; row "1. direct, after the adds" "$sz"
direct=$(j "$sz" memory_usage)
w=$(study work "$R" "$N" "$SIZE"); work_report "$w"
sz=$(sizes); row "1. direct, after the worker" "$sz"

echo "--- 2. through squeeze proxy"
fresh
add=$(study add "$P" "$N" "$SIZE")
sz=$(sizes); sizes_report "keys after the adds" "$sz"; row "2. proxy, after the adds" "$sz"
echo "  the queue's keys: $(j "$sz" memory_usage) bytes (MEMORY USAGE), directly $direct"
script_prefixes
w=$(study work "$P" "$N" "$SIZE"); work_report "$w"
sz=$(sizes); sizes_report "keys after the worker" "$sz"; row "2. proxy, after the worker" "$sz"
script_prefixes
adv=$("$tmp/squeeze" advise --redis "redis://127.0.0.1:$R" --depth 2 --json 2>/dev/null)
echo "  squeeze advise --depth 2 --json: $(j "$adv" 'script_prefixes.length') script_prefixes"
node -e '
  const r = JSON.parse(process.argv[1]);
  for (const p of r.prefixes) console.log(`    prefix ${p.prefix}: ${p.keys} keys sampled, types ${JSON.stringify(p.types)}, script_used ${!!p.script_used}, advice ${p.advice.compress ? p.advice.write_codec + " would save " + p.advice.saved_pct.toFixed(1) + "%" : "raw"} of ${p.memory_raw} bytes of values`);
' "$adv"
echo "  squeeze advise --depth 2 (text), its script lines:"
"$tmp/squeeze" advise --redis "redis://127.0.0.1:$R" --depth 2 2>/dev/null | awk '/scripts use these prefixes/ {on = 1} /^codecs over/ {on = 0} on && NF' | sed 's/^/    /' | awk 'NR <= 8 || /^ *prefix "/'
cmp=$("$tmp/squeeze" compact --redis "redis://127.0.0.1:$R" --min-idle 0 --include-raw --json 2>/dev/null)
echo "  squeeze compact --min-idle 0 --include-raw --json: keys_scanned $(j "$cmp" keys_scanned), keys_rewritten $(j "$cmp" keys_rewritten), keys_skipped $(j "$cmp" keys_skipped)"

echo "--- 3. completed jobs, data and returnvalue framed by force (s2, HSET on Redis)"
fr=$("$tmp/scriptstudy" frame --addr "127.0.0.1:$R" --prefix "$prefix" --fields data,returnvalue --codec s2)
echo "  framed $(j "$fr" framed) fields of $(j "$fr" hashes) job hashes ($(j "$fr" left_raw) too small or gaining too little, left raw): $(j "$fr" bytes_before) -> $(j "$fr" bytes_after) bytes"
sz=$(sizes); row "3. completed jobs framed by force" "$sz"
echo "  queue.getCompleted through the proxy (BullMQ's getJobs script): $(study completed "$P" "$N" "$SIZE")"
echo "  Job.fromId 1..$N through the proxy (HGETALL, no script):       $(study fromid "$P" "$N" "$SIZE")"
echo "  queue.getJobCounts through the proxy:                          $(study counts "$P")"

echo "--- 4. waiting jobs, data framed by force (s2, HSET on Redis), then a worker through the proxy (LOCK_MS=2000: lockDuration and stalledInterval 2 s)"
fresh
add=$(study add "$P" "$N" "$SIZE")
fr=$("$tmp/scriptstudy" frame --addr "127.0.0.1:$R" --prefix "$prefix" --fields data --codec s2)
echo "  framed $(j "$fr" framed) data fields ($(j "$fr" left_raw) left raw): $(j "$fr" bytes_before) -> $(j "$fr" bytes_after) bytes"
sz=$(sizes); row "4. waiting jobs framed by force" "$sz"
w=$(LOCK_MS=2000 study work "$P" "$N" "$SIZE"); work_report "$w"
echo "  queue.getJobCounts through the proxy afterwards: $(study counts "$P")"
sizes_report "keys afterwards" "$(sizes)"

echo "--- summary (bytes; the queue's keys = MEMORY USAGE summed over ${prefix}*)"
echo "| state | used_memory | used_memory_dataset | the queue's keys | job data fields |"
echo "|---|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
if [ -s "$tmp/proxy.log" ]; then echo "proxy log (last lines):"; tail -5 "$tmp/proxy.log"; fi
