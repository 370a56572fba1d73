#!/usr/bin/env bash
# The test command from README.md: installs what is missing, then runs every
# test (unit, golden, fuzz seeds, and integration tests against real
# redis-server processes that the tests start themselves, the Node,
# Python and Ruby client libraries through the proxy, and the Python and
# Node ports of the frame format against the Go codec).
#
# It says what it does as it goes: a line when each phase starts and one
# with its time when it ends, and during "go test" a line per package as
# it finishes, numbered, with the time since the start. On a machine of 2
# cores "go test" takes the longest (README.md says how long).
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
phase=""
clock() { # the time since the start, m:ss
  local s=$((SECONDS - start))
  printf '%d:%02d' $((s / 60)) $((s % 60))
}
# run NAME COMMAND...: runs COMMAND as phase NAME, between two lines.
run() {
  phase=$1
  shift
  local t0=$SECONDS
  echo "== test.sh [$(clock)] $phase" >&2
  "$@"
  echo "== test.sh [$(clock)] $phase: done in $((SECONDS - t0)) s" >&2
  phase=""
}
trap 'rc=$?; if [ -n "$phase" ]; then echo "== test.sh [$(clock)] $phase: FAILED (exit $rc)" >&2; elif [ "$rc" = 0 ]; then echo "== test.sh [$(clock)] all passed" >&2; fi' EXIT

run "setup: redis-server, Go modules" bash scripts/setup.sh
run "setup: client libraries (Node, Python, Ruby)" bash scripts/setup-clients.sh
run "setup: ports (Python, Node)" bash scripts/setup-ports.sh
# The proxy's event loop and raw writes are Linux's; elsewhere it falls back
# to a goroutine per client. Vet for macOS and Windows keeps that building
# (and the tests compiling) there.
vet() {
  go vet ./...
  GOOS=darwin go vet ./...
  GOOS=windows go vet ./...
}
run "go vet (linux, darwin, windows)" vet
gofmt_check() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  if [ -n "$unformatted" ]; then
    echo "gofmt needed: $unformatted"
    return 1
  fi
}
run "gofmt" gofmt_check

# go test prints a line per package when it is done (in package order);
# each gets its number and the time since the start.
module=$(go list -m)
total=$(go list ./... | wc -l)
gotest() {
  local n=0 line
  go test -count=1 -timeout 20m ./... 2>&1 | while IFS= read -r line; do
    if [[ $line =~ ^(ok|FAIL|\?)[[:space:]]+$module ]]; then
      n=$((n + 1))
      printf '[%2d/%d %s] %s\n' "$n" "$total" "$(clock)" "$line"
    else
      printf '%s\n' "$line"
    fi
  done
}
run "go test: $total packages" gotest
