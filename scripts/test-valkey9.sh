#!/usr/bin/env bash
# Runs the whole test suite against Valkey 9 as well (built from the source
# Debian unstable ships, see scripts/build-server.sh): the first server here
# with the compare-and-set commands (SET ... IFEQ, DELIFEQ) and MSETEX, so
# that their tests (TestProxy_Compare, TestProxy_CompareConcurrent,
# TestProxy_Msetex, TestHook_Compare, TestHook_CompareConcurrent,
# TestHook_Msetex, the differential tests' compare commands) run instead of
# skipping.
exec bash "$(dirname "$0")/test-built.sh" valkey9
