#!/usr/bin/env bash
# Regenerates docs/img/report.png, the first screen of the demo's report
# that README.md shows: runs `squeeze demo` into a temporary directory
# (about a minute; it starts its own redis-server) and renders the report
# with headless Chromium at 1280x900, installing Chromium when missing.
#
#   bash scripts/screenshot-report.sh                 # run the demo, then shoot
#   REPORT=./report bash scripts/screenshot-report.sh # shoot an existing report
#   OUT=/tmp/shot.png bash scripts/screenshot-report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-docs/img/report.png}
command -v chromium >/dev/null || bash scripts/apt-install.sh chromium
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report=${REPORT:-}
from=$report/index.html
if [ -z "$report" ]; then
  # Run from the temporary directory, so that the report names the command
  # as a user types it ("squeeze demo"), not a temporary path.
  go build -o "$tmp/squeeze" ./cmd/squeeze
  (cd "$tmp" && ./squeeze demo > demo.txt)
  report=$tmp/report from="a fresh squeeze demo"
fi
[ -f "$report/index.html" ] || { echo "no $report/index.html" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
# No network, no profile of the user's, nothing but the page.
if ! chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$tmp/profile" --window-size=1280,900 \
    --screenshot="$tmp/shot.png" "file://$(realpath "$report")/index.html" > "$tmp/chromium.log" 2>&1 ||
    [ ! -s "$tmp/shot.png" ]; then
  cat "$tmp/chromium.log" >&2
  exit 1
fi
mv "$tmp/shot.png" "$out"
echo "wrote $out ($(stat -c %s "$out") bytes) from $from"
