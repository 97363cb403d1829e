"""The cost of a Dask cluster per scenario, against local threads, on the same sweep.

Runs N small scenarios (50 flows on 4 workers, a few ms each) three ways — local threads
(`engine=None`), a Dask LocalCluster of worker processes (`engine=client`) and, if Ray is
installed, Ray — checks the frames are equal byte for byte, and prints the wall time of each
and the overhead per scenario (engine minus local threads, over N). Wall times on a shared
machine are noisy: read the load average printed beside them.

    python examples/python/sweep_overhead.py [N] [WORKERS]
"""

import os
import sys
import time

from switchyard import sim


def tiny(seed):
    return {
        "name": "tiny", "seed": seed, "policies": ["hrw", "jsq"],
        "machine": {"topology": "flat:4", "queue_capacity": 64, "on_full": "block",
                    "service_base_ns": 5000, "service_per_kib_ns": 20000},
        "workload": {"kind": "synthetic", "flows": 50, "flow_rate": 20000.0, "units_shape": 1.2,
                     "units_max": 50, "unit_gap_s": 20e-6, "sizes": [[64, 0.5], [1500, 0.5]]},
    }


def timed(label, f):
    start = time.perf_counter()
    frame = f()
    took = time.perf_counter() - start
    print(f"{label:<28} {took:8.3f} s   load average {os.getloadavg()[0]:.2f}")
    return frame, took


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    scenarios = [tiny(i) for i in range(n)]
    print(f"{n} scenarios, {workers} threads / worker processes")
    local, t_local = timed(f"local threads ({workers})", lambda: sim.sweep(scenarios, threads=workers))

    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        sim.sweep(scenarios[:workers * 4], engine=client)  # warm: workers import switchyard
        on_dask, t_dask = timed(f"dask LocalCluster ({workers} procs)", lambda: sim.sweep(scenarios, engine=client))
    assert on_dask.to_csv(index=False) == local.to_csv(index=False), "dask's frame differs from local threads'"
    print(f"dask overhead per scenario: {(t_dask - t_local) / n * 1e3:.2f} ms (local {t_local / n * 1e3:.2f} ms/scenario)")

    try:
        import ray
    except ImportError:
        print("ray: not installed (pip install ray), skipped")
        return
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        sim.sweep(scenarios[:workers * 4], engine="ray")
        on_ray, t_ray = timed(f"ray ({workers} cpus)", lambda: sim.sweep(scenarios, engine="ray"))
    finally:
        ray.shutdown()
    assert on_ray.to_csv(index=False) == local.to_csv(index=False), "ray's frame differs from local threads'"
    print(f"ray overhead per scenario: {(t_ray - t_local) / n * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
