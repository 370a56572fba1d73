#!/usr/bin/env bash
# The test command from README.md: installs what is missing, then runs every
# test (unit, golden, fuzz seeds, and integration tests against real
# redis-server processes that the tests start themselves, the Node,
# Python and Ruby client libraries through the proxy, and the Python and
# Node ports of the frame format against the Go codec).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-clients.sh
bash scripts/setup-ports.sh
go vet ./...
# The proxy's event loop and raw writes are Linux's; elsewhere it falls back
# to a goroutine per client. Vet for macOS and Windows keeps that building
# (and the tests compiling) there.
GOOS=darwin go vet ./...
GOOS=windows go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed: $unformatted"; exit 1; fi
go test -count=1 -timeout 20m ./...
