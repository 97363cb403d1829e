#!/usr/bin/env python3
"""Issue 39's figures from `switchyard bench inspect --peer ndpi --format json`, summed over
every capture of the report: agreement on the flows nDPI names from payload whose protocol we
know, breadth over every flow nDPI names from payload, false claims; then per protocol what
was alike, what we missed (by nDPI's name), what we claimed wrongly, and nDPI's names outside
our set. The bench's own captures (the generated trace, and the shipped sample, which trace-gen
also wrote from our signatures' openings) are left out: they would measure us on our own
bytes. Usage: bench/ndpi_figures.py REPORT_JSON..."""
import collections
import json
import sys


OURS = ("uniform (", "sample")


def main(paths):
    tables = collections.defaultdict(lambda: {"columns": [], "rows": [], "notes": []})
    seen = set()
    for path in paths:
        report = json.load(open(path))
        if not report.get("tables"):
            print(f"{path}: no tables: " + "; ".join(report.get("notes", [])))
        # A capture in more than one report counts once, from the first.
        skip = set(seen)
        for t in report.get("tables", []):
            tables[t["name"]]["columns"] = t["columns"]
            keep = [r for r in t["rows"] if not str(r[0]).startswith(OURS) and r[0] not in skip]
            tables[t["name"]]["rows"] += keep
            seen.update(r[0] for r in keep)
    if "ndpi_captures" not in tables:
        return
    cols = lambda t: [c["name"] for c in tables[t]["columns"]]
    rows = lambda t: [dict(zip(cols(t), r)) for r in tables[t]["rows"]]
    both, alike = collections.Counter(), collections.Counter()
    for r in rows("ndpi_protocols"):
        both[r["protocol"]] += r["both"]
        alike[r["protocol"]] += r["alike"]
    kinds = collections.defaultdict(collections.Counter)
    for r in rows("ndpi_differences"):
        kinds[r["kind"]][(r["ours"], r["ndpi"])] += r["connections"]
    missed = kinds["only nDPI's, in our set"]
    outside = kinds["nDPI's outside our set"]
    wrong = kinds["differ"] + kinds["ours, nDPI's outside our set"]
    n_alike, n_both = sum(alike.values()), sum(both.values())
    known = n_both + sum(missed.values())
    named = known + sum(outside.values())
    n_wrong = sum(wrong.values())
    pct = lambda a, b: 100.0 * a / b if b else 0.0
    print(f"captures: {len(tables['ndpi_captures']['rows'])}; flows nDPI names from payload: {named}")
    print(f"agreement: {n_alike} of {known} ({pct(n_alike, known):.1f}%)  goal >= 95%")
    print(f"breadth:   {n_alike} of {named} ({pct(n_alike, named):.1f}%)  goal >= 85%")
    print(f"false:     {n_wrong} of {named} ({pct(n_wrong, named):.1f}%)  goal <= 1%")
    print("\nper protocol (ours): both named, alike")
    for p in sorted(both, key=lambda p: -both[p]):
        print(f"  {p:14} {both[p]:5} {alike[p]:5}")
    print("\nmissed (nDPI's name, in our set):")
    for (_, t), n in missed.most_common():
        print(f"  {t:24} {n:5}")
    print("\nfalse claims (ours, nDPI's):")
    for (o, t), n in wrong.most_common():
        print(f"  {o:14} {t:24} {n:5}")
    print("\nnDPI's names outside our set:")
    for (_, t), n in outside.most_common(40):
        print(f"  {t:24} {n:5}")


if __name__ == "__main__":
    main(sys.argv[1:])
