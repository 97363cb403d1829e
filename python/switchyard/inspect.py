"""Packet inspection: a capture file in, one row per connection out."""

from __future__ import annotations

import io
import os
from typing import Optional, Union

import pandas as pd

from . import _switchyard

#: The columns of ``switchyard inspect --results``, in order.
COLUMNS = [
    "id", "proto", "client", "server", "protocol", "carrier", "evidence", "server_name",
    "alpn", "tls_version", "ja4", "matched_packet", "packets", "bytes",
]


def connections(
    path: Union[str, "os.PathLike[str]"],
    workers: Optional[int] = None,
    policy: Optional[str] = None,
    topology: Optional[str] = None,
    packets: int = 8,
    bytes: int = 12_000,
    guess: bool = False,
) -> pd.DataFrame:
    """``switchyard inspect PATH --results``: a pcap or pcapng capture, inspected by
    ``workers`` threads (default the machine's cores) that ``policy`` (default ``affinity``)
    places connections on, reading the first ``packets`` packets and ``bytes`` bytes of each;
    ``guess`` names by port what the payload did not. A row per connection with the columns
    of ``--results`` (:data:`COLUMNS`); text columns keep empty cells as ``""``, and ``matched_packet`` (the packet that named
    the protocol, from 1) is a nullable integer, ``<NA>`` where nothing matched.
    """
    csv = _switchyard.inspect_results(os.fspath(path), workers, policy, topology, packets, bytes, guess)
    if not csv:
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_csv(
        io.StringIO(csv), keep_default_na=False, na_values={"matched_packet": [""]}, dtype={"matched_packet": "Int64"}
    )
