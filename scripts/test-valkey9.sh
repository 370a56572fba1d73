#!/usr/bin/env bash
# Runs the whole test suite against Valkey 9 as well, built by
# scripts/build-server.sh: the first server here with the compare-and-set
# commands (SET ... IFEQ, DELIFEQ) and MSETEX, so that the tests of those
# (TestProxy_Compare, TestProxy_CompareConcurrent, TestProxy_Msetex,
# TestHook_Compare, TestHook_Msetex, the differential tests' compare
# commands) run instead of skipping. When no Debian mirror
# serves the source, it says so and skips the pass; a failed build or test
# fails.
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
server=$(bash scripts/build-server.sh valkey9 | tail -1) || rc=$?
if [ "$rc" = 3 ]; then
  echo "test-valkey9: SKIPPED, the Valkey 9 source could not be fetched (see above)" >&2
  exit 0
elif [ "$rc" != 0 ]; then
  exit "$rc"
fi
SQUEEZE_REDIS_SERVER=$server go test -count=1 -timeout 20m ./...
