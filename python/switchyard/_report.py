"""A report (the JSON ``switchyard ... --format json`` prints) as a dict of DataFrames."""

from __future__ import annotations

import json
from typing import Dict

import pandas as pd

CLAIM_COLUMNS = ["claim", "source", "published", "published_text", "ours", "ours_text", "difference", "why"]


def table_frame(table: dict) -> pd.DataFrame:
    """One table of a report: its rows under its columns' machine names; the title, notes and
    each column's unit and meaning in ``frame.attrs``."""
    columns = [c["name"] for c in table["columns"]]
    frame = pd.DataFrame(table["rows"], columns=columns)
    for c in table["columns"]:
        # A measure that is null in every row (not measured here) is NaN, not None: still a number.
        if c["kind"] == "number" and frame[c["name"]].dtype == object:
            frame[c["name"]] = pd.to_numeric(frame[c["name"]])
    frame.attrs["title"] = table.get("title", "")
    frame.attrs["notes"] = list(table.get("notes", []))
    frame.attrs["units"] = {c["name"]: c.get("unit", "") for c in table["columns"]}
    frame.attrs["about"] = {c["name"]: c.get("about", "") for c in table["columns"]}
    return frame


def frames(report_json: str) -> Dict[str, pd.DataFrame]:
    """Every table of the report by name, then ``claims`` (ours beside the published figure and
    the difference, ours over published minus one) and ``parameters`` (what the run used). The
    report's title and notes are in each frame's ``attrs``."""
    report = json.loads(report_json)
    out: Dict[str, pd.DataFrame] = {t["name"]: table_frame(t) for t in report["tables"]}
    out["claims"] = pd.DataFrame(report.get("claims", []), columns=CLAIM_COLUMNS)
    out["parameters"] = pd.DataFrame(
        [(p["name"], p["value"], p.get("about", "")) for p in report.get("parameters", [])],
        columns=["name", "value", "about"],
    )
    for frame in out.values():
        frame.attrs["report"] = report["name"]
        frame.attrs["report_title"] = report["title"]
        frame.attrs["report_notes"] = list(report.get("notes", []))
    return out
