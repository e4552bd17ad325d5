#!/usr/bin/env python3
"""Gaps refused as squeezed after the narrow link, over the committed paths
benchmark runs (git history of results/paths_runs/, and the seed runs in
results/paths_seed*/): how often the hops phase's shapes "the narrow link is
the last one" (estimate/hops.hpp, narrow_link_is_last) and "no link after
the narrow one changed the trains" (narrow_hop_unchanged_after, with
measure's conditions on the least-delayed spans and the trains:
gaps_at_narrow_hop) would have taken the right gaps, and how often the wrong
ones. No lab run: every input is in the committed documents.

    python3 scripts/gaps_refusal_history.py [--repo .]
"""
import argparse
import collections
import glob
import json
import os

from committed_runs import committed_revs, path_runs

LAST_FASTER = 1.05  # kLastFaster
UNCHANGED_AFTER = 0.05  # kUnchangedAfter
LEAST_DELAYED_NEAR = 0.9  # kLeastDelayedNear (app/runs/availbw_run.cpp)
TRAINS_UNDER_GAPS = 0.9  # kTrainsUnderGaps
HOP_FASTER = 1.05  # kHopFasterThanTrains


def narrow_link_is_last(hops, gaps_high):
    if not hops or not gaps_high > 0:
        return False
    for h in hops[:-1]:
        if not h.get("used") or not h.get("rate_bps", 0) > LAST_FASTER * gaps_high:
            return False
    last = hops[-1]
    return bool(last.get("used")) and 0 < last.get("rate_bps", 0) <= LAST_FASTER * gaps_high


def narrow_hop_unchanged_after(hops, gaps_high):
    if len(hops) < 2 or not gaps_high > 0:
        return -1
    k = 0
    while k < len(hops) and hops[k].get("used") and \
            hops[k].get("rate_bps", 0) > LAST_FASTER * gaps_high:
        k += 1
    if k + 1 >= len(hops) or not hops[k].get("used") or not hops[k].get("rate_bps", 0) > 0:
        return -1
    r = hops[k]["rate_bps"]
    for h in hops[k + 1:]:
        if not h.get("used") or abs(h.get("rate_bps", 0) / r - 1) > UNCHANGED_AFTER or \
                h.get("compressed_fraction", 0) > 0:
            return -1
    return k


def shape(doc, gc):
    """"last", "unchanged" or None: which rule takes the gaps."""
    hops = doc.get("hops") or []
    if not hops or hops[-1].get("addr") != doc.get("target_addr"):
        return None
    if not gc.get("capacity_bps", 0) > doc["capacity_bps"]:
        return None
    gaps_high = max(gc.get("high_bps") or 0, doc.get("capacity_high_bps") or 0)
    if doc.get("capacity_source") not in ("rst_trains", "reply_gaps"):
        return None
    if narrow_link_is_last(hops, gaps_high):
        return "last"
    gaps = gc["capacity_bps"]
    k = narrow_hop_unchanged_after(hops, gaps_high)
    if k >= 0 and gc.get("min_delay_bps", 0) >= LEAST_DELAYED_NEAR * gaps and \
            doc["capacity_bps"] < TRAINS_UNDER_GAPS * gaps and \
            hops[k].get("rate_high_bps", 0) > HOP_FASTER * doc["capacity_bps"]:
        return "unchanged"
    return None


def seed_runs(repo):
    for f in sorted(glob.glob(os.path.join(repo, "results/paths_seed*/paths_runs/path*.json"))):
        with open(f) as fh:
            d = json.load(fh)
        yield os.path.basename(os.path.dirname(os.path.dirname(f))), d.get("path", {}).get("index"), d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".")
    a = ap.parse_args()
    revs = committed_revs(a.repo)
    counts = collections.Counter()
    taken = []
    runs = list(path_runs(a.repo, revs)) + list(seed_runs(a.repo))
    for rev, i, d in runs:
        doc = d.get("doc") or {}
        gc = doc.get("gap_check") or {}
        if gc.get("verdict") not in ("squeezed_after_narrow", "trains_too_slow"):
            continue
        truth = (d.get("truth") or {}).get("capacity_bps")
        if not truth or not doc.get("capacity_bps"):
            continue
        rule = shape(doc, gc)
        gaps_err = gc["capacity_bps"] / truth - 1
        rep_err = doc["capacity_bps"] / truth - 1
        counts[(rule or "-", abs(gaps_err) <= 0.03)] += 1
        if rule:
            taken.append((rule, rev, i, gaps_err, rep_err))
    n = sum(counts.values())
    print(f"{len(revs)} committed runs of results/paths_runs/ and the seed runs on disk; {n} "
          "paths whose gaps were refused as squeezed after the narrow link (or "
          "trains_too_slow)")
    for (rule, ok), k in sorted(counts.items()):
        print(f"  rule: {rule:9s}  gaps within 3%: {'yes' if ok else 'no '}  {k}")
    for rule, rev, i, ge, re_ in sorted(taken):
        print(f"  taken ({rule}): {rev} path {i}: gaps {100 * ge:+.1f}%, "
              f"reported {100 * re_:+.1f}%")


if __name__ == "__main__":
    main()
