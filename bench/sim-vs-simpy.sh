#!/usr/bin/env bash
# The simulator against SimPy on the same M/M/c model, in one go on this machine. Builds a SimPy
# virtualenv from PyPI under target/ the first time. Prints both runs and the speed ratio in
# customers per second (each engine counts its own events differently, so customers are the
# common unit).
#
# Usage: bench/sim-vs-simpy.sh [CUSTOMERS] [SERVERS]   (defaults 300000 and 4; λ = 0.9·c·μ)
set -euo pipefail
cd "$(dirname "$0")/.."

customers=${1:-300000}
servers=${2:-4}
mu=1000
lambda=$(python3 -c "print(0.9 * $servers * $mu)")
venv=target/simpy-venv

if [ ! -x "$venv/bin/python" ]; then
  echo "building a SimPy virtualenv in $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'simpy==4.1.1'
fi

cargo build --quiet --release -p switchyard-sim --example mmc
ours=$(target/release/examples/mmc "$lambda" "$mu" "$servers" "$customers" 1)
theirs=$("$venv/bin/python" bench/simpy_mmc.py "$lambda" "$mu" "$servers" "$customers" 1)
echo "$ours"
echo "$theirs"
python3 - "$ours" "$theirs" "$servers" <<'PY'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = ours["customers_per_s"] / theirs["customers_per_s"]
print(f"M/M/{sys.argv[3]}, {ours['customers']} customers: switchyard-sim {ours['customers_per_s']:,.0f}/s, "
      f"{theirs['engine']} {theirs['customers_per_s']:,.0f}/s: {ratio:.1f}x (goal: at least 30x)")
print(f"mean wait: ours {ours['mean_wait']:.6f} s, SimPy {theirs['mean_wait']:.6f} s, Erlang C {ours['erlang_c']:.6f} s")
PY
