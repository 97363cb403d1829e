"""Shared fixtures: the repository's paths, a small scenario, and the binary when built."""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def tiny(seed=1, policies=("hrw", "jsq")):
    """A scenario that runs in milliseconds: 50 flows on 4 workers."""
    return {
        "name": "tiny",
        "seed": seed,
        "policies": list(policies),
        "machine": {"topology": "flat:4", "queue_capacity": 64, "on_full": "block",
                    "service_base_ns": 5000, "service_per_kib_ns": 20000},
        "workload": {"kind": "synthetic", "flows": 50, "flow_rate": 20000.0, "units_shape": 1.2,
                     "units_max": 50, "unit_gap_s": 20e-6, "sizes": [[64, 0.5], [1500, 0.5]]},
    }


@pytest.fixture
def repo():
    return REPO


@pytest.fixture
def binary():
    """The `switchyard` binary the workspace built (SWITCHYARD_BIN, else target/debug), or skip."""
    path = pathlib.Path(os.environ.get("SWITCHYARD_BIN", REPO / "target" / "debug" / "switchyard"))
    if not path.exists():
        pytest.skip(f"no switchyard binary at {path} (cargo build -p switchyard, or set SWITCHYARD_BIN)")
    return path
