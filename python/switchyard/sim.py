"""The deterministic simulator: a scenario in, its runs as a DataFrame out.

A scenario is what ``switchyard sim FILE`` reads (see ``scenarios/*.toml`` and the
switchyard-sim ``scenario`` module): given here as

- a path (``str`` or :class:`os.PathLike`) to a TOML file — a ``str`` is a path unless it
  contains a newline or ``=``, when it is TOML text;
- TOML text;
- a ``dict`` of the same keys and tables (``{"name": ..., "machine": {...}, ...}``).

The same scenario and seed give the same frame, byte for byte, whatever the number of threads
or processes.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd

from . import _report, _switchyard

Scenario = Union[str, "os.PathLike[str]", dict]

#: The columns of ``runs.csv`` (``switchyard sim --out DIR``), in order.
RUNS_COLUMNS = [
    "case",
    "policy",
    "swept",
    "units_per_s",
    "offered_gbps",
    "utilisation_mean",
    "utilisation_spread",
    "busy_max_over_mean",
    "migrations",
    "out_of_order",
    "latency_p50_us",
    "latency_p99_us",
]


def _given(scenario: Scenario, seed: Optional[int]) -> Tuple[str, str, Optional[int]]:
    """(TOML text, where it came from, seed) for the native half."""
    if isinstance(scenario, dict):
        try:
            text = _switchyard.toml_of_json(json.dumps(scenario))
        except TypeError as e:
            raise _switchyard.SwitchyardError(f"scenario dict: {e}") from None
        return text, f"<dict {scenario.get('name', '')!s}>".replace(" >", ">"), seed
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and "\n" not in scenario and "=" not in scenario):
        path = os.fspath(scenario)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), path, seed
        except OSError as e:
            # The binary's message: `cannot read scenario `PATH`: the reason`.
            raise _switchyard.SwitchyardError(f"cannot read scenario `{path}`: {e.strerror} (os error {e.errno})") from None
        except UnicodeDecodeError as e:
            raise _switchyard.SwitchyardError(f"cannot read scenario `{path}`: stream did not contain valid UTF-8 ({e.reason})") from None
    if isinstance(scenario, str):
        return scenario, "<toml>", seed
    raise _switchyard.SwitchyardError(
        f"scenario: a {type(scenario).__name__} is not a scenario; give a path, TOML text or a dict"
    )


def report(scenario: Scenario, seed: Optional[int] = None, threads: Optional[int] = None) -> Dict[str, pd.DataFrame]:
    """``switchyard sim``'s whole report: ``runs`` (the columns of runs.csv), ``details``
    (details.csv: the rest of each run's figures, keyed by ``case``), ``claims`` (a
    reproduction's published figures beside ours) and ``parameters``.

    ``seed`` replaces the scenario's root seed (a swept ``seed`` still wins); ``threads``
    defaults to the machine's cores and does not change the result.
    """
    text, origin, seed = _given(scenario, seed)
    return _report.frames(_switchyard.report(text, origin, seed, threads))


def run(scenario: Scenario, seed: Optional[int] = None, threads: Optional[int] = None) -> pd.DataFrame:
    """The scenario's runs: one row per policy and sweep combination, with the columns of
    ``runs.csv`` (:data:`RUNS_COLUMNS`)."""
    return report(scenario, seed, threads)["runs"]


def _run_json(given: Tuple[str, str, Optional[int]]) -> str:
    """One scenario of a sweep, on one thread: its report's JSON (small to send back)."""
    text, origin, seed = given
    return _switchyard.report(text, origin, seed, 1)


def _frame(reports: Sequence[str]) -> pd.DataFrame:
    frames = []
    for i, r in enumerate(reports):
        f = _report.frames(r)["runs"]
        f.insert(0, "scenario", i)
        frames.append(f)
    if not frames:
        return pd.DataFrame(columns=["scenario", *RUNS_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def sweep(
    scenarios: Sequence[Scenario],
    engine=None,
    seed: Optional[int] = None,
    threads: Optional[int] = None,
) -> pd.DataFrame:
    """Runs many scenarios; one frame of their runs, each row led by ``scenario``, the
    scenario's position in ``scenarios``, in that order.

    ``engine``:

    - ``None`` (default): local threads (``threads``, default the machine's cores), one
      scenario per thread, without the GIL.
    - a ``dask.distributed.Client``: one task per scenario on the cluster's workers
      (``client.map``), gathered in order. Dask is the primary engine: pure-Python wheels from
      PyPI, a ``LocalCluster`` of worker processes on one machine or the same code against a
      scheduler on many, no daemon to install.
    - ``"ray"``: one Ray task per scenario, on the cluster ``ray.init()`` joins or starts.

    The frame is the same, byte for byte, whichever engine ran it.
    """
    given = [_given(s, seed) for s in scenarios]
    if engine is None:
        return _frame(_switchyard.sweep(given, threads))
    if isinstance(engine, str) and engine == "ray":
        import ray

        if not ray.is_initialized():
            ray.init()
        task = ray.remote(_run_json)
        return _frame(ray.get([task.remote(g) for g in given]))
    if hasattr(engine, "map") and hasattr(engine, "gather"):
        futures = engine.map(_run_json, given, pure=False)
        return _frame(engine.gather(futures))
    raise _switchyard.SwitchyardError(
        f"engine: a {type(engine).__name__} is not an engine; give None (local threads), a dask.distributed.Client or \"ray\""
    )


def mmc(lam: float, mu: float, servers: int, customers: int, seed: int = 1) -> dict:
    """The M/M/c queue in the simulator (``switchyard_sim::models::mmc``): Poisson arrivals at
    ``lam`` per second, ``servers`` servers each serving at ``mu`` per second, until
    ``customers`` are served. Returns ``customers`` (served), ``events``, ``mean_wait``
    (seconds in the queue) and ``erlang_c`` (the theory's mean wait, ``None`` if unstable)."""
    served, events, mean_wait, erlang_c = _switchyard.mmc(float(lam), float(mu), int(servers), int(customers), int(seed))
    return {"customers": served, "events": events, "mean_wait": mean_wait, "erlang_c": erlang_c}
