#!/usr/bin/env bash
# Installs the client libraries of other languages that proxy/clients_test.go
# drives through the proxy, as applications would use them: Node's
# node-redis and ioredis (versions pinned in proxy/testdata/clients/node's
# package-lock.json), Python's redis-py and Ruby's redis-rb (Debian's
# python3-redis and ruby-redis). Safe to run again; does nothing that is done.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || need+=(python3-redis)
ruby -e 'require "redis"' >/dev/null 2>&1 || need+=(ruby-redis)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then bash scripts/apt-install.sh "${need[@]}"; fi
node_dir=proxy/testdata/clients/node
# node_modules/.installed-lock is the lock file node_modules was installed from.
if ! cmp -s "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock"; then
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock"
fi
