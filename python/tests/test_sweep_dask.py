"""A sweep through a Dask cluster of worker processes gives the serial run's frame, byte for byte."""

import pandas as pd
import pytest

from switchyard import place, sim

from conftest import tiny

distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed")


def scenarios(n):
    policies = ["hrw", "jsq", "ahrw", "round-robin", "bounded", "p2c-hrw"]
    return [tiny(seed=i, policies=[policies[i % len(policies)], policies[(i + 1) % len(policies)]]) for i in range(n)]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_250_scenarios_on_worker_processes_equal_the_serial_run(client):
    given = scenarios(250)
    on_dask = sim.sweep(given, engine=client)
    serial = pd.concat(
        [sim.run(s, threads=1).assign(scenario=i)[["scenario", *sim.RUNS_COLUMNS]] for i, s in enumerate(given)],
        ignore_index=True,
    )
    assert len(on_dask) == 500
    assert on_dask.to_csv(index=False).encode() == serial.to_csv(index=False).encode()
    # The work really left this process: the workers are other processes.
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()


def test_a_bad_scenario_on_dask_raises_its_message(client):
    import switchyard

    with pytest.raises(switchyard.SwitchyardError, match="unknown policy `hwr`"):
        sim.sweep([tiny(), dict(tiny(), policies=["hwr"])], engine=client)
