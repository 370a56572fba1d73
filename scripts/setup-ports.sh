#!/usr/bin/env bash
# Installs what the Python and Node ports of the frame format need
# (ports/python, ports/node) and what codec/ports_test.go runs them with:
# Debian's python3 codec packages, and the npm packages pinned in
# ports/node/package-lock.json. Safe to run again; does nothing that is done.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/bin/python3 ] || need+=(python3)
for m in zstandard:python3-zstandard lz4.block:python3-lz4 brotli:python3-brotli snappy:python3-snappy; do
  /usr/bin/python3 -c "import ${m%%:*}" >/dev/null 2>&1 || need+=("${m#*:}")
done
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then bash scripts/apt-install.sh "${need[@]}"; fi
node_dir=ports/node
# node_modules/.installed-lock is the lock file node_modules was installed from.
if ! cmp -s "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock"; then
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock"
fi
