"""Place keys, run a scenario, and plot both with matplotlib: a report in one PNG.

- Left: how evenly HRW, jump, Maglev and bounded-load consistent hashing spread 20,000 Zipf keys
  over 8 workers, and how many keys move when a worker leaves (switchyard.place.measure).
- Right: the 99th-percentile latency and throughput of each policy in scenarios/xeon-flows.toml
  (switchyard.sim.run).

    pip install matplotlib       # and switchyard (pip install ./python)
    python examples/python/place_sim_plot.py [OUT.png]    (run from the repository's root)
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from switchyard import place, sim  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "place-sim.png"
    policies = ["hrw", "jump", "maglev", "bounded"]
    measured = place.measure(policies, workers=8, keys="zipf:1.0:20000")

    # A placer kept across calls: the keys' workers before and after worker 3 leaves.
    p = place.Placer("hrw", workers=8)
    keys = np.arange(20_000, dtype=np.uint64)
    before = p.place(keys)
    p.remove_worker(3)
    p.reset_load()
    moved = (p.place(keys) != before).mean()

    runs = sim.run("scenarios/xeon-flows.toml")

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(measured))
    left.bar(x - 0.2, measured["max_over_mean"], 0.4, label="max / mean load")
    left.bar(x + 0.2, measured["moved_on_remove"] * 8, 0.4, label="keys moved when w0 leaves × N")
    left.axhline(1.0, color="grey", lw=0.8)
    left.set_xticks(x, measured["policy"])
    left.set_title(f"20,000 Zipf keys on 8 workers (HRW moved {moved:.1%} when w3 left)")
    left.legend()

    right.scatter(runs["units_per_s"] / 1e3, runs["latency_p99_us"])
    for r in runs.itertuples():
        right.annotate(r.policy, (r.units_per_s / 1e3, r.latency_p99_us), fontsize=8)
    right.set_yscale("log")
    right.set_xlabel("throughput (thousand units/s)")
    right.set_ylabel("p99 latency (µs, log)")
    right.set_title("scenarios/xeon-flows.toml in the simulator")

    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
