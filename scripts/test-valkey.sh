#!/usr/bin/env bash
# Runs the whole test suite against Valkey instead of Redis: every test
# that starts a server starts valkey-server (SQUEEZE_REDIS_SERVER), and the
# differential tests compare Valkey directly with Valkey behind squeeze.
# Installs valkey-server first when it is missing (scripts/setup-valkey.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-valkey.sh
SQUEEZE_REDIS_SERVER=valkey-server go test -count=1 -timeout 20m ./...
