"""The simulated reproductions of published results, each a dict of DataFrames: its tables by
name, ``claims`` (each published figure beside ours and the difference, ours over published
minus one, with why) and ``parameters``. The options are ``switchyard reproduce NAME``'s,
under the same names (``threads`` does not change the result).

Reproductions on real sockets stay with the binary: ``iwashima-m`` (real TCP in network
namespaces, needs root), ``yates-clp`` (the delivery server on real threads and sockets), and
the ``--real`` parts of ``dou-cacheflow`` and ``dou-miscort``.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import pandas as pd

from . import _report, _switchyard

OPTIONS = (
    "seed", "runs", "scale", "threads", "requests", "oracle", "poisson", "presume",
    "app_kib", "tables", "lab_data", "lab_locs", "neighbourhood",
)


def names() -> List[str]:
    """The reproductions this package runs, by the binary's names."""
    return list(_switchyard.reproduce_names())


def run(name: str, **options) -> Dict[str, pd.DataFrame]:
    """Reproduction ``name`` (as ``switchyard reproduce NAME``) with ``options``."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise _switchyard.SwitchyardError(
            f"reproduce {name}: unexpected option {', '.join(unknown)}; options are: {', '.join(OPTIONS)}"
        )
    given = {k: options.get(k) for k in OPTIONS}
    if given["tables"] is not None:
        given["tables"] = [str(t) for t in given["tables"]]
    return _report.frames(_switchyard.reproduce(name, given))


def _one(name: str, what: str):
    def reproduction(**options) -> Dict[str, pd.DataFrame]:
        return run(name, **options)

    reproduction.__name__ = name.replace("-", "_")
    reproduction.__qualname__ = reproduction.__name__
    reproduction.__doc__ = f"``switchyard reproduce {name}``: {what}"
    return reproduction


dpi_affinity = _one("dpi-affinity", "Guo ch. 4: DPI throughput by connection affinity against per-packet spraying.")
niagara_hierarchy = _one("niagara-hierarchy", "Guo ch. 5: hierarchical HRW on the Niagara's cores and threads.")
gop_cache_aware = _one("gop-cache-aware", "Guo ch. 6: cache-aware placement of transcoding GOPs.")
niagara_hierarchy_cache = _one("niagara-hierarchy-cache", "Guo ch. 5 with the cache model on.")
gop_cache_aware_cache = _one("gop-cache-aware-cache", "Guo ch. 6 with the cache model on.")
ps_shares = _one("ps-shares", "Guo ch. 7: PS-HRW's proportional shares.")
yates_cache = _one(
    "yates_cache".replace("_", "-"),
    "Yates ch. 5 Tables 5.4–5.9: the seven lookup policies (options tables, scale, seed, lab_data, lab_locs, neighbourhood; "
    "the lab trace's tables read data/labdata/ relative to the working directory unless lab_data and lab_locs say where).",
)
dou_cacheflow = _one("dou-cacheflow", "Dou ch. 4: Cacheflow's cooperative hit rate, simulated (seed).")
dou_miscort = _one("dou-miscort", "Dou ch. 3: MiscoRT against EDF and other task schedulers (runs, seed, poisson, presume).")
dou_rgedf = _one("dou-rgedf", "Dou ch. 2: G-EDF and RG-EDF against FIFO and EDF on a sensor node (runs, seed).")
ko_worker_centric = _one("ko-worker-centric", "Ko et al.: worker-centric locality against storage affinity (runs, seed, scale).")
figurehead = _one("figurehead", "Figurehead: Base against OptWait and today's routing policies (requests, oracle, seed).")
guo_interrupt_affinity = _one("guo-interrupt-affinity", "Guo ch. 3: interrupt affinity by message size (seed).")
guo_xen_credit = _one("guo-xen-credit", "Guo ch. 8: Xen's credit scheduler against cache-aware migration (runs, seed, scale, app_kib).")
