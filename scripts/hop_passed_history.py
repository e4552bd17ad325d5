#!/usr/bin/env python3
"""One hop train through, over the committed paths benchmark runs (git
history of results/paths_runs/): where the hops phase's trains slowed after
a hop that read above the capacity and some (too few to give the capacity,
or the capacity rule did not fire) reached the target at that hop's rate,
how the capacity's interval widens to the hop (estimate/hops.hpp,
hop_one_train_passed; warning hop_train_passed) and whether it then holds
the truth. No lab run: every input is in the committed documents (which do
not carry the trains' count, so a share of 2 of 8 or more, which
narrow_hop_passed would have taken by now, counts too).

    python3 scripts/hop_passed_history.py [--repo .]
"""
import argparse

from committed_runs import committed_revs, path_runs

ABOVE, SLACK, CHOKE, PASSED_DROP = 1.05, 1.03, 0.5, 1.10  # estimate/hops.cpp
SYSTEMATIC, HOP_HIGH = 0.003, 1.03  # kSystematicRel; interval_to_passed_hop


def slowed_after(hops, k, drop):
    r = hops[k]["rate_bps"]
    later = [h["rate_bps"] for h in hops[k + 1:] if h.get("used") and h.get("rate_bps", 0) > 0]
    return not any(x > SLACK * r for x in later) and any(drop * x < r for x in later)


def passed_hop(hops, trains):
    found = -1
    for k, h in enumerate(hops):
        r = h.get("rate_bps", 0)
        if (h.get("used") and h.get("passed_fraction", 0) > 0 and
                h.get("choke_fraction", 0) >= CHOKE and r > ABOVE * trains and 2 * trains > r and
                slowed_after(hops, k, PASSED_DROP)):
            found = k
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".")
    a = ap.parse_args()
    revs = committed_revs(a.repo)
    seen = fired = 0
    for rev, i, d in path_runs(a.repo, revs):
        doc = d.get("doc") or {}
        hops = doc.get("hops") or []
        truth = (d.get("truth") or {}).get("capacity_bps")
        C = doc.get("capacity_bps")
        if not hops or not truth or not C or \
                doc.get("capacity_source") not in ("rst_trains", "reply_gaps"):
            continue
        seen += 1
        k = passed_hop(hops, C)
        if k < 0:
            continue
        fired += 1
        h = hops[k]
        high = max(h["rate_bps"] * (1 + SYSTEMATIC),
                   min(h.get("rate_high_bps", 0), HOP_HIGH * h["rate_bps"]))
        lo, hi = doc["capacity_low_bps"], doc["capacity_high_bps"]
        new_hi = max(hi, high)
        print(f"  {rev} path {i}: C {C / 1e6:.2f} [{lo / 1e6:.2f}, {hi / 1e6:.2f}] -> "
              f"[.., {new_hi / 1e6:.2f}] (hop {k + 1} at {h['rate_bps'] / 1e6:.2f}, "
              f"passed {h['passed_fraction']:.3f}), truth {truth / 1e6:.2f}: held "
              f"{'yes' if lo <= truth <= hi else 'no '} -> "
              f"{'yes' if lo <= truth <= new_hi else 'no'}")
    print(f"{len(revs)} committed runs; {seen} paths with hops whose capacity came from the "
          f"trains or the gaps; the rule fires on {fired}")


if __name__ == "__main__":
    main()
