#!/usr/bin/env bash
# Runs the whole test suite, or the packages named after NAME, against a
# server built by scripts/build-server.sh (NAME: redis8, valkey9 or
# redis86): every test that starts a server starts that one
# (SQUEEZE_REDIS_SERVER), and the tests of its newer commands run instead
# of skipping. When no Debian mirror serves the source, it says so and
# skips the pass; a failed build or test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: test-built.sh redis8|valkey9|redis86 [PACKAGE...]}
shift
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
rc=0
server=$(bash scripts/build-server.sh "$name" | tail -1) || rc=$?
if [ "$rc" = 3 ]; then
  echo "test-built $name: SKIPPED, the source could not be fetched (see above)" >&2
  exit 0
elif [ "$rc" != 0 ]; then
  exit "$rc"
fi
SQUEEZE_REDIS_SERVER=$server go test -count=1 -timeout 20m "${pkgs[@]}"
