#!/usr/bin/env python3
"""The avail-bw range with and without widen_to_fleets (estimate/availbw.hpp),
over the committed paths benchmark runs (git history of results/paths_runs/):
how often the reported range held the truth, and how wide it was. No lab run:
every fleet's rate and verdict, the response rates' verdicts, the range the
run reported and the truth are in the committed documents.

The rule, on the reported range (which already had the search's resolution
omega added on each side):
  low  -> min(low,  the highest "below" search fleet under the lowest grey or
                    "above" one (0 if none) - omega)
  high -> max(high, min(C, the fastest "below" search fleet or response rate
                    + omega))

    python3 scripts/range_history.py [--repo .] [--rev d56df14]
"""
import collections
import statistics

from committed_runs import history_args, path_runs


def widened(doc):
    """(low, high) of the run's range after the rule."""
    lo, hi = doc["availbw_low_bps"], doc["availbw_high_bps"]
    C = doc.get("capacity_bps") or 0
    w = doc.get("resolution_bps") or 0
    search = [f for f in doc.get("rates") or [] if f.get("phase") == "search"]
    resp = [f for f in doc.get("rates") or [] if f.get("phase") == "response"]
    not_below = [f["rate_bps"] for f in search if f["verdict"] != "below"]
    if not_below:
        m = min(not_below)
        under = [f["rate_bps"] for f in search if f["verdict"] == "below" and f["rate_bps"] < m]
        lo = min(lo, max(0.0, (max(under) if under else 0.0) - w))
    below = [f["rate_bps"] for f in search + resp if f["verdict"] == "below"]
    if below:
        hi = max(hi, min(C, max(below) + w) if C > 0 else max(below) + w)
    return lo, hi


def main():
    a, revs = history_args(__doc__)
    tally = collections.defaultdict(lambda: {"n": 0, "held": [0, 0], "width": ([], [])})
    newest = revs[0] if revs else None
    for rev, _, d in path_runs(a.repo, revs):
        doc = d.get("doc") or {}
        A = (d.get("truth") or {}).get("availbw_bps")
        if not doc.get("rates") or not A or doc.get("availbw_low_bps") is None \
                or doc.get("availbw_high_bps") is None:
            continue
        ranges = ((doc["availbw_low_bps"], doc["availbw_high_bps"]), widened(doc))
        for key in ("all runs", f"newest ({newest})") if rev == newest else ("all runs",):
            t = tally[key]
            t["n"] += 1
            for k, (lo, hi) in enumerate(ranges):
                t["held"][k] += lo <= A <= hi
                t["width"][k].append((hi - lo) / A)
    print(f"Committed paths benchmark runs of {len(revs)} commits up to {a.rev}.\n")
    print("| runs | n | range held: as reported | with widen_to_fleets | "
          "median width / A: as reported | with the rule |")
    print("|---|---|---|---|---|---|")
    for key, t in tally.items():
        n = t["n"]
        print(f"| {key} | {n} | {100 * t['held'][0] / n:.1f}% | {100 * t['held'][1] / n:.1f}% | "
              f"{statistics.median(t['width'][0]):.2f} | {statistics.median(t['width'][1]):.2f} |")


if __name__ == "__main__":
    main()
