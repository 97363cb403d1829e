"""Ray, the optional engine: the same frame as local threads (skipped where ray is not installed)."""

import pytest

from switchyard import sim

from conftest import tiny

ray = pytest.importorskip("ray", reason="ray is not installed (pip install ray): the optional engine is not tested")


def test_ray_sweep_equals_local_threads():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        given = [tiny(seed=i) for i in range(60)]
        assert sim.sweep(given, engine="ray").to_csv(index=False) == sim.sweep(given).to_csv(index=False)
    finally:
        ray.shutdown()
