#!/usr/bin/env python3
"""Gaps refused as squeezed after the narrow link, over the committed paths
benchmark runs (git history of results/paths_runs/): how often the hops
phase's shape "the narrow link is the last one" (estimate/hops.hpp,
narrow_link_is_last) would have taken the right gaps, and how often the
wrong ones. No lab run: every input is in the committed documents.

    python3 scripts/gaps_refusal_history.py [--repo .]
"""
import argparse
import collections

from committed_runs import committed_revs, path_runs

LAST_FASTER = 1.05  # kLastFaster


def narrow_link_is_last(hops, gaps_high):
    if not hops or not gaps_high > 0:
        return False
    for h in hops[:-1]:
        if not h.get("used") or not h.get("rate_bps", 0) > LAST_FASTER * gaps_high:
            return False
    last = hops[-1]
    return bool(last.get("used")) and 0 < last.get("rate_bps", 0) <= LAST_FASTER * gaps_high


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".")
    a = ap.parse_args()
    revs = committed_revs(a.repo)
    counts = collections.Counter()
    taken = []
    for rev, i, d in path_runs(a.repo, revs):
        doc = d.get("doc") or {}
        gc = doc.get("gap_check") or {}
        if gc.get("verdict") not in ("squeezed_after_narrow", "trains_too_slow"):
            continue
        truth = (d.get("truth") or {}).get("capacity_bps")
        if not truth or not doc.get("capacity_bps"):
            continue
        hops = doc.get("hops") or []
        last_is_target = bool(hops) and hops[-1].get("addr") == doc.get("target_addr")
        gaps_high = max(gc.get("high_bps") or 0, doc.get("capacity_high_bps") or 0)
        rule = last_is_target and narrow_link_is_last(hops, gaps_high) and \
            gc.get("capacity_bps", 0) > doc["capacity_bps"]
        gaps_err = gc["capacity_bps"] / truth - 1
        rep_err = doc["capacity_bps"] / truth - 1
        counts[(rule, abs(gaps_err) <= 0.03)] += 1
        if rule:
            taken.append((rev, i, gaps_err, rep_err))
    n = sum(counts.values())
    print(f"{len(revs)} committed runs; {n} paths whose gaps were refused as squeezed after "
          "the narrow link (or trains_too_slow)")
    for (rule, ok), k in sorted(counts.items()):
        print(f"  narrow link last: {'yes' if rule else 'no '}  gaps within 3%: "
              f"{'yes' if ok else 'no '}  {k}")
    for rev, i, ge, re_ in taken:
        print(f"  taken: {rev} path {i}: gaps {100 * ge:+.1f}%, reported {100 * re_:+.1f}%")


if __name__ == "__main__":
    main()
