#!/usr/bin/env bash
# Runs the whole test suite against Redis 8 as well (built from the source
# Debian 13 ships, see scripts/build-server.sh), so that the tests of Redis
# 8's own commands (HSETEX, HGETEX, HGETDEL) run instead of skipping.
exec bash "$(dirname "$0")/test-built.sh" redis8
