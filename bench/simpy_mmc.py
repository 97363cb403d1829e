"""The M/M/c model of crates/sim/src/models/mmc.rs, written for SimPy, for a same-machine speed
comparison (bench/sim-vs-simpy.sh). Prints one JSON line like the Rust example.
examples/python/mmc_vs_simpy.py imports `model` from here, so that the SimPy side of both
comparisons is one model.

Usage: python simpy_mmc.py LAMBDA MU SERVERS CUSTOMERS SEED
"""

import json
import random
import sys
import time

import simpy


def model(lam, mu, servers, customers, seed):
    """The model set up and not yet run: Poisson arrivals at `lam`, `servers` desks serving at
    `mu`, until `customers` have arrived. Returns the environment (call `run()`) and the list
    each customer's wait is appended to as it is served."""
    arrivals, services = random.Random(seed), random.Random(seed + 1)
    env = simpy.Environment()
    desk = simpy.Resource(env, capacity=servers)
    waits = []

    def customer():
        arrived = env.now
        with desk.request() as req:
            yield req
            waits.append(env.now - arrived)
            yield env.timeout(services.expovariate(mu))

    def source():
        for _ in range(customers):
            yield env.timeout(arrivals.expovariate(lam))
            env.process(customer())

    env.process(source())
    return env, waits


def main() -> None:
    lam, mu, servers, customers, seed = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    env, waits = model(lam, mu, servers, customers, seed)
    start = time.perf_counter()
    env.run()
    wall = time.perf_counter() - start
    print(json.dumps({
        "engine": "simpy " + simpy.__version__,
        "customers": len(waits),
        "mean_wait": sum(waits) / len(waits),
        "wall_s": wall,
        "customers_per_s": len(waits) / wall,
    }))


if __name__ == "__main__":
    main()
