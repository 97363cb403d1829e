#!/usr/bin/env bash
# Issue 39's evidence: `switchyard bench inspect --peer ndpi` on captures written by others
# (bench/fetch-captures.sh gathers them: Wireshark's and tcpdump's test captures from their
# Debian source packages, pcaps in PyPI libraries), then issue 39's figures per protocol over
# all of them: agreement on the flows nDPI names from payload with a protocol we know, breadth
# over every flow nDPI names from payload, false claims. nDPI's own test captures are never used.
# Usage: bench/ndpi-on-others.sh [CAPTURE_DIR] [REPORT_JSON]
#   CAPTURE_DIR  default data/traces/others (fetched first if empty; skipped visibly offline)
#   REPORT_JSON  default target/ndpi-on-others.json
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-data/traces/others}"
json="${2:-target/ndpi-on-others.json}"
if [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
  bench/fetch-captures.sh "$dir"
fi
if [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "ndpi-on-others: no captures in $dir (fetching found none: offline?); nothing compared" >&2
  exit 0
fi
command -v ndpiReader >/dev/null || bench/install-peers.sh
cargo build --release -q -p switchyard
args=()
for f in "$dir"/*; do args+=(--capture "$f"); done
target/release/switchyard bench inspect --peer ndpi --repeat 1 --connections 200 "${args[@]}" --format json >"$json"
python3 bench/ndpi_figures.py "$json"
