#!/usr/bin/env bash
# The ports of the frame format to Python and Node: installs what they need
# on a fresh Debian machine, runs each port's own tests (golden frames,
# FORMAT.md's examples, corrupt frames, a round-trip property test), then
# the Go test that decodes what both write and has them decode what Go
# writes (codec/ports_test.go). In CI a missing port fails that test
# instead of skipping it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-ports.sh
echo "== ports/python"
(cd ports/python && /usr/bin/python3 -m unittest test_squeeze_frames)
echo "== ports/node"
(cd ports/node && node --test test/)
echo "== Go decodes what the ports write, and the other way round"
go test -count=1 -run 'TestPorts|TestGoEncodesPorts' ./codec
