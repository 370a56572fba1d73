#!/usr/bin/env bash
# Installs what the benchmarks need beyond the tests (bash scripts/setup.sh):
# twemproxy (Debian's nutcracker), the plain C proxy that scripts/bench-large.sh
# measures beside squeeze as a second column. The tests never need it; a bench
# run without it prints so and leaves its column out. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
need=()
command -v nutcracker >/dev/null 2>&1 || [ -x /usr/sbin/nutcracker ] || need+=(nutcracker)
if [ ${#need[@]} -gt 0 ]; then bash scripts/apt-install.sh "${need[@]}"; fi
# Debian's package may also start a nutcracker service on 22121 from
# /etc/nutcracker/nutcracker.yml; the bench starts its own on a free port.
