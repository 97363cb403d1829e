import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import switchyard
from switchyard import sim

from conftest import tiny

TINY_TOML = """
name = "tiny"
seed = 1
policies = ["hrw", "jsq"]

[machine]
topology = "flat:4"
queue_capacity = 64
on_full = "block"
service_base_ns = 5000
service_per_kib_ns = 20000

[workload]
kind = "synthetic"
flows = 50
flow_rate = 20000.0
units_shape = 1.2
units_max = 50
unit_gap_s = 20e-6
sizes = [[64, 0.5], [1500, 0.5]]
"""


def test_dict_text_and_file_give_the_same_frame(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_TOML)
    frames = [sim.run(tiny()), sim.run(TINY_TOML), sim.run(path), sim.run(str(path))]
    assert list(frames[0].columns) == sim.RUNS_COLUMNS
    assert frames[0]["policy"].tolist() == ["hrw", "jsq"]
    csvs = {f.to_csv(index=False) for f in frames}
    assert len(csvs) == 1


def test_same_seed_same_frame_other_seed_other_frame():
    a = sim.run(tiny(), seed=7, threads=1).to_csv(index=False)
    b = sim.run(tiny(), seed=7, threads=2).to_csv(index=False)
    c = sim.run(tiny(), seed=8).to_csv(index=False)
    assert a == b
    assert a != c


def test_frame_is_the_binarys_runs_csv(binary, repo, tmp_path):
    scenario = repo / "scenarios" / "trace-sample.toml"
    subprocess.run([binary, "sim", scenario, "--out", tmp_path, "--threads", "2"], cwd=repo, check=True,
                   capture_output=True)
    cwd = os.getcwd()
    os.chdir(repo)  # the scenario names its trace relative to the repository
    try:
        r = sim.report(scenario)
    finally:
        os.chdir(cwd)
    assert r["runs"].to_csv(index=False) == (tmp_path / "runs.csv").read_text()
    # details.csv writes a whole float as the binary's printer does (`0`, not `0.0`): the same values.
    pd.testing.assert_frame_equal(r["details"], pd.read_csv(tmp_path / "details.csv", keep_default_na=False,
                                                            na_values=[""]), check_dtype=False)


def test_report_has_runs_details_claims_and_parameters():
    r = sim.report(tiny())
    assert set(r) == {"runs", "details", "claims", "parameters"}
    assert "seed" in r["parameters"]["name"].tolist()
    assert r["runs"].attrs["units"]["latency_p99_us"] == "µs"


def test_local_sweep_is_the_serial_run():
    scenarios = [tiny(seed=s) for s in range(20)]
    swept = sim.sweep(scenarios, threads=2)
    serial = pd.concat(
        [sim.run(s, threads=1).assign(scenario=i)[["scenario", *sim.RUNS_COLUMNS]] for i, s in enumerate(scenarios)],
        ignore_index=True,
    )
    assert swept.to_csv(index=False) == serial.to_csv(index=False)


@pytest.mark.parametrize(
    "scenario, message",
    [
        ("no/such/file.toml", "cannot read scenario `no/such/file.toml`: No such file or directory (os error 2)"),
        ("name = \"x\"\npolicies = [", "<toml>: TOML parse error at line 2, column 13"),
        (dict(tiny(), policies=["hwr"]), "unknown policy `hwr`"),
        (dict(tiny(), seed=None), "scenario dict"),
        (dict(tiny(), when=object()), "scenario dict: Object of type object is not JSON serializable"),
        (42, "scenario: a int is not a scenario"),
    ],
)
def test_bad_scenarios_raise_one_line_messages(scenario, message):
    with pytest.raises(switchyard.SwitchyardError) as e:
        sim.run(scenario)
    assert message in str(e.value)
    if "TOML parse error" not in message:
        # A TOML syntax error shows the line and a caret under it, as the binary does.
        assert "\n" not in str(e.value)


def test_a_bad_scenario_fails_the_sweep_with_its_message():
    with pytest.raises(switchyard.SwitchyardError, match="unknown policy `hwr`"):
        sim.sweep([tiny(), dict(tiny(), policies=["hwr"]), tiny()])
    with pytest.raises(switchyard.SwitchyardError, match="not an engine"):
        sim.sweep([tiny()], engine=3)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for the run's thread")
def test_ctrl_c_interrupts_a_long_run(repo):
    # The handler runs when the native call asks Python for signals: the run's thread (named
    # `switchyard`) must still be working then, not finished with the signal handled after it.
    script = textwrap.dedent(
        """
        import os, signal, sys, threading
        from switchyard import sim

        def alive():
            names = []
            for t in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{t}/comm") as f:
                    names.append(f.read().strip())
            return "switchyard" in names

        def handler(signum, frame):
            print("handler: run thread alive" if alive() else "handler: run thread gone", flush=True)
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, handler)
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            sim.run(sys.argv[1], threads=1)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(repo / "scenarios" / "xeon-flows.toml")],
        capture_output=True, text=True, timeout=300,
    )
    assert out.stdout.split("\n")[:2] == ["handler: run thread alive", "interrupted"], out


def test_mmc_waits_as_erlang_c_says():
    out = sim.mmc(3600, 1000, 4, 200_000, seed=1)
    assert out["customers"] == 200_000
    assert out["mean_wait"] == pytest.approx(out["erlang_c"], rel=0.1)
    assert sim.mmc(3600, 1000, 4, 1000, seed=1) == sim.mmc(3600, 1000, 4, 1000, seed=1)


def test_mmc_bad_parameters_and_an_unstable_queue():
    with pytest.raises(switchyard.SwitchyardError, match="mmc: bad model parameter servers = 0: at least one server"):
        sim.mmc(1000, 1000, 0, 10)
    assert sim.mmc(5000, 1000, 4, 1000)["erlang_c"] is None
