"""The M/M/c queue both ways in one script: SimPy, and Switchyard's simulator from Python.

The same model as bench/sim-vs-simpy.sh (bench/simpy_mmc.py for SimPy, crates/sim's mmc model
for ours): Poisson arrivals at λ = 0.9·c·μ, c servers at μ = 1000/s, until N customers are
served. Prints both mean waits beside Erlang C's and the speed ratio in customers per second
(each engine counts events its own way, so customers are the common unit). The two runs use
different random streams, so the waits agree with each other and with the theory within
sampling error, not digit for digit.

    pip install simpy            # and switchyard (pip install ./python)
    python examples/python/mmc_vs_simpy.py [CUSTOMERS] [SERVERS]
"""

import os
import sys
import time
from pathlib import Path

import simpy

from switchyard import sim

# The SimPy model is bench/simpy_mmc.py's, the one bench/sim-vs-simpy.sh times.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from simpy_mmc import model as simpy_model  # noqa: E402


def simpy_mmc(lam, mu, servers, customers, seed):
    env, waits = simpy_model(lam, mu, servers, customers, seed)
    env.run()
    return {"customers": len(waits), "mean_wait": sum(waits) / len(waits)}


def timed(f):
    start = time.perf_counter()
    out = f()
    return out, time.perf_counter() - start


def main():
    customers = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    servers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    mu = 1000.0
    lam = 0.9 * servers * mu
    theirs, t_theirs = timed(lambda: simpy_mmc(lam, mu, servers, customers, 1))
    ours, t_ours = timed(lambda: sim.mmc(lam, mu, servers, customers, 1))
    rate_ours, rate_theirs = ours["customers"] / t_ours, theirs["customers"] / t_theirs
    print(f"M/M/{servers}, λ={lam:.0f}/s, μ={mu:.0f}/s, {customers} customers "
          f"(load average {os.getloadavg()[0]:.2f})")
    print(f"  switchyard.sim.mmc  mean wait {ours['mean_wait'] * 1e3:.4f} ms  {t_ours:7.3f} s  {rate_ours:12,.0f} customers/s")
    print(f"  SimPy {simpy.__version__:<12} mean wait {theirs['mean_wait'] * 1e3:.4f} ms  {t_theirs:7.3f} s  {rate_theirs:12,.0f} customers/s")
    print(f"  Erlang C            mean wait {ours['erlang_c'] * 1e3:.4f} ms")
    print(f"  ratio: switchyard {rate_ours / rate_theirs:.1f}x SimPy's customers per second")


if __name__ == "__main__":
    main()
