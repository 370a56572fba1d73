#!/usr/bin/env bash
# Runs every Fuzz* target for a short time each (default 10s): bash scripts/fuzz.sh 1m
# New crashers land in testdata/fuzz/ of their package; commit them with the fix.
#
# Minimizing a new input is capped at FUZZ_MINIMIZE (default 5s, Go's is 60s):
# the minimizer drops bytes one at a time, so a large input the mutator made
# interesting could take a whole short run (FuzzDecodeReply sat at 0 execs/s
# for the 40 s left of a 45 s run), and that time found nothing new.
#
# Go 1.26's fuzzing coordinator can fail a target with a bare "context
# deadline exceeded" when -fuzztime runs out while a worker is mid-call on a
# busy machine (go.dev/issue/75804, fixed in Go 1.27). A real finding always
# writes its input under testdata/fuzz/ and says "Failing input written";
# so a failure without that line, whose only complaint is that deadline, is
# reported as the known flake, and the target's corpus is then replayed
# deterministically, which must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
minimize=${FUZZ_MINIMIZE:-5s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    if go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" -fuzzminimizetime "$minimize" "$pkg" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
      continue
    fi
    if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
      echo "fuzz $pkg $f: the Go 1.26 fuzzing deadline flake (go.dev/issue/75804), no failing input; replaying the corpus"
      go test -run "^$f\$" -count 1 "$pkg"
      continue
    fi
    exit 1
  done
done
