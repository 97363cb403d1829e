"""Placement policies by name: place keys, change members, measure balance and disruption.

The policies are those ``switchyard place --policy`` takes (:func:`policies` lists them); the
options are ``switchyard place``'s, under the same names (``switchyard place --help`` says what
each does).
"""

from __future__ import annotations

import warnings
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from . import _switchyard

#: The options every policy takes, with ``switchyard place``'s defaults.
DEFAULTS = dict(
    epsilon=0.25,
    vnodes=160,
    maglev_table=65537,
    beta=0.16,
    queue="units",
    hash="fast",
    qmin="true",
    parent_load="eq67",
    ca_min="weighted",
    ps_dispatch="set",
)


def _options(given: dict) -> dict:
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise _switchyard.SwitchyardError(
            f"unexpected option {', '.join(unknown)}; the options are: {', '.join(DEFAULTS)}"
        )
    return {**DEFAULTS, **given}


def policies() -> List[str]:
    """Every policy's name, as ``switchyard place --policy`` takes them."""
    return list(_switchyard.policy_names())


class Placer:
    """A placement policy over workers ``0 … workers-1``, with its state and the load it has
    placed.

    ``workers`` defaults to the topology's leaves, else the number of weights, else 8 (the
    binary's default is 8 even with ``--weights``: here one weight per worker says how many
    there are); ``weights`` gives one weight per
    worker; ``topology`` is ``switchyard place --topology``'s (``xeon-e5335``, ``4x4x4``,
    ``flat:N``, …). Other keyword options are :data:`DEFAULTS`'.

    >>> p = Placer("hrw", workers=4)
    >>> p.place(np.arange(5, dtype=np.uint64))  # doctest: +SKIP
    array([...], dtype=uint32)
    """

    def __init__(
        self,
        policy: str,
        workers: Optional[int] = None,
        weights: Optional[Sequence[float]] = None,
        topology: Optional[str] = None,
        **options,
    ) -> None:
        if workers is None and topology is None and weights is not None:
            workers = len(weights)
        self._inner = _switchyard.Placer(
            policy, workers, None if weights is None else [float(w) for w in weights], topology, _options(options)
        )

    @property
    def policy(self) -> str:
        """The policy's name."""
        return self._inner.policy

    @property
    def workers(self) -> List[Tuple[int, float]]:
        """The members, as ``(worker id, weight)`` pairs."""
        return list(self._inner.workers)

    def place(self, keys: Union[np.ndarray, Sequence[Union[str, int]]], sizes: Optional[Sequence[int]] = None) -> np.ndarray:
        """Places each key in order and returns its worker id (a ``uint32`` array as long as
        ``keys``).

        ``keys`` is a 1-D NumPy array of ``uint64`` or ``int64`` (each a numeric key), or a list
        of ``str`` read as ``switchyard place --keys FILE`` reads a line (``tcp 10.0.0.1:4000
        10.0.0.2:80``, a number, any text) or ``int``. ``sizes`` (bytes, default 1 each) count
        for ``queue="bytes"``. Every placed key stays queued on its worker, so load-aware
        policies see the load placed so far; :meth:`reset_load` empties the queues.
        """
        return self._inner.place(keys, None if sizes is None else [int(s) for s in sizes])

    def reset_load(self) -> None:
        """Empties every worker's queue."""
        self._inner.reset_load()

    def load(self) -> pd.DataFrame:
        """The load placed so far, a row per worker id: ``units`` and ``bytes``."""
        units, size = self._inner.load()
        return pd.DataFrame({"units": units, "bytes": size}).rename_axis("worker")

    def add_worker(self, id: int, weight: float = 1.0) -> None:
        """Adds worker ``id`` with ``weight``."""
        self._inner.add_worker(id, float(weight))

    def remove_worker(self, id: int) -> None:
        """Removes worker ``id``."""
        self._inner.remove_worker(id)

    def set_weight(self, id: int, weight: float) -> None:
        """Sets worker ``id``'s weight."""
        self._inner.set_weight(id, float(weight))

    def __repr__(self) -> str:
        return repr(self._inner)


def measure(
    policies: Union[str, Iterable[str]] = "all",
    workers: Optional[int] = None,
    weights: Optional[Sequence[float]] = None,
    topology: Optional[str] = None,
    keys: str = "sample",
    seed: int = 1,
    undirected: bool = False,
    **options,
) -> pd.DataFrame:
    """``switchyard place``: each policy places every key of ``keys`` (``sample``,
    ``uniform:COUNT``, ``zipf:S:COUNT[:KEYS]``, a capture or a key file) on the workers; a row
    per policy with the columns of ``switchyard place --format csv``: ``policy, workers, keys,
    max_over_mean, cov, jain`` (balance), ``moved_on_remove, moved_on_add`` (the share of
    units that move when worker 0 leaves / the last worker joins) and ``ns_per_decision``
    (wall time, so noisy).

    ``workers`` defaults as :class:`Placer`'s. ``policies`` is a name, a comma-separated list, a list, or ``"all"``; with ``weights``,
    ``"all"`` keeps the policies that honour weights (with a warning naming the others) and a
    named policy that ignores weights is an error.
    """
    if isinstance(policies, str):
        policies = policies.split(",")
    if workers is None and topology is None and weights is not None:
        workers = len(weights)
    rows, notes = _switchyard.measure(
        [p.strip() for p in policies],
        workers,
        None if weights is None else [float(w) for w in weights],
        topology,
        keys,
        seed,
        undirected,
        _options(options),
    )
    for note in notes:
        warnings.warn(note, stacklevel=2)
    columns = ["policy", "workers", "keys", "max_over_mean", "cov", "jain", "moved_on_remove", "moved_on_add", "ns_per_decision"]
    return pd.DataFrame(rows, columns=columns)
