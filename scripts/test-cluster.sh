#!/usr/bin/env bash
# The cluster suite: the proxy in front of a Redis Cluster of 3 masters and
# 3 replicas, a proxy per node, all started by the tests themselves. First
# the reshard and failover run: two verifying go-redis ClusterClient loads
# side by side, one through the proxies and one on the nodes directly,
# while slots move between masters and a master is killed with kill -9; it
# prints keys verified, wrong values, errors in each phase and the
# recovery after the kill on each side, and fails on a wrong value or a
# lost acknowledged write. Then every other test of a cluster: topology
# and redirections rewritten, a dead node's proxy, scripts redirected,
# ASKING carried, script prefixes, the tools, nodes added with
# --cluster-map and by port offset, the client libraries.
#
# Usage: bash scripts/test-cluster.sh        # short form, 1-2 min (CI)
#        LONG=1 bash scripts/test-cluster.sh # 3,000 keys a side, 10 s phases
# SQUEEZE_REDIS_SERVER=valkey-server runs it against Valkey.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh          # redis-server, redis-cli, Go modules
bash scripts/setup-clients.sh  # the client libraries the cluster tests drive
if [ -n "${LONG:-}" ]; then export SQUEEZE_CLUSTER_LONG=1; fi
echo "== test-cluster.sh: reshard and failover under load, through the proxies and directly" >&2
go test -count=1 -timeout 20m -v -run '^TestProxy_ClusterReshardFailover$' ./proxy
echo "== test-cluster.sh: the other cluster tests" >&2
go test -count=1 -timeout 20m -run 'Cluster' -skip '^TestProxy_ClusterReshardFailover$' \
  ./proxy ./cmd/squeeze ./client ./compact ./counters
