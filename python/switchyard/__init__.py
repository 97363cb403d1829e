"""Switchyard from Python.

- :mod:`switchyard.place` — every placement policy by name (the names ``switchyard place``
  takes): a :class:`~switchyard.place.Placer` that places NumPy arrays of keys and whose
  members change, and :func:`~switchyard.place.measure`, the balance and disruption figures
  ``switchyard place`` prints, as a DataFrame.
- :mod:`switchyard.sim` — a scenario (a TOML file, TOML text or a dict) in the deterministic
  simulator, as a DataFrame with the columns of ``runs.csv``; sweeps of many scenarios on local
  threads or a Dask cluster.
- :mod:`switchyard.reproduce` — the simulated reproductions of published results, each as a
  dict of DataFrames (its tables, and the claims: ours beside the published figure).
- :mod:`switchyard.inspect` — a capture file in, one row per connection out (the columns of
  ``switchyard inspect --results``).

Every error is a :class:`SwitchyardError` (a :class:`ValueError`) carrying the one-line message
the ``switchyard`` binary prints. Long runs release the GIL, and Ctrl-C interrupts them.
"""

from ._switchyard import SwitchyardError
from . import inspect, place, reproduce, sim

__all__ = ["SwitchyardError", "inspect", "place", "reproduce", "sim"]
