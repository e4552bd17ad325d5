#!/usr/bin/env python3
"""Replays the response-curve crossing of estimate_availbw() (src/estimate/availbw.cpp) over every
committed random-path benchmark run in git history (results/paths_runs/, each distinct file once),
with the calibration's baseline as the crossing's zero (as the runs had it), with that baseline
capped at 1 (the rule of 2026-12-04), with the zero at 1 also where the baseline lies under 1
by no more than 2 of its standard errors (the rule of 2026-12-05), and also where baseline +
threshold reaches 1 (a train at 1 within the noise band: the rule since 2026-12-06).

Only runs whose reported avail-bw was the crossing (availbw_basis "response_curve") are replayed.
Their response trains are rebuilt from the run's document: the response groups above the knee
(mean ratio over baseline + threshold, or at 0.95 C or more), crossed with the capacity the run
crossed with (crossing_capacity_bps), clamped to [0, max(C, C_t)]. The final choice of the
estimate (truncated normal, the bracket's floor) is not replayed. Errors against the truth over
the run's avail-bw phase.

    python3 scripts/baseline_history.py                # from the checkout's top directory
    python3 scripts/baseline_history.py --rev 112b51c  # the runs up to the rule (2026-12-04)
"""
import argparse
import statistics

from committed_runs import distinct_runs

ABOVE = ("above", "below", "unclear")


def replay(d):
    doc, truth = d.get("doc") or {}, (d.get("truth_availbw_phase") or {}).get("availbw_bps")
    if doc.get("availbw_basis") != "response_curve" or not truth or doc.get("crossing_bps") is None:
        return None
    C = doc["capacity_bps"]
    base, thr = doc["noise"]["baseline"], doc["noise"]["threshold"]
    resp = []
    for r in doc.get("rates", []):
        if r.get("phase") != "response":
            continue
        s = [(t["offered_bps"], t["ratio"]) for t in r["trains"]
             if t.get("verdict") in ABOVE and t.get("ratio", 0) > 0]
        if not s:
            continue
        mean = sum(y for _, y in s) / len(s)
        offered = sum(x for x, _ in s) / len(s)
        if offered >= 0.95 * C or mean > base + thr:
            resp += s
    if len(resp) < 2:
        return None
    ct = doc.get("crossing_capacity_bps") or C

    def crossing(zero):
        a = sum(x - ct * (y - zero) for x, y in resp) / len(resp)
        return min(max(a, 0.0), max(C, ct))

    # crossing_zero since 2026-12-05: the baseline only where it lies more than 2 standard errors
    # (of a median: 1.2533 x 1.4826 x MAD / sqrt(n)) under 1, over the last calibration round's
    # usable trains (those calibrate_noise() had)
    cals = [r for r in doc.get("rates", []) if r.get("phase") == "calibration"]
    cal = [t["ratio"] for t in cals[-1]["trains"] if t.get("verdict") == "calibration"] if cals else []
    se = 0.0
    if cal:
        m = statistics.median(cal)
        se = 1.2533 * 1.4826 * statistics.median(abs(x - m) for x in cal) / len(cal) ** 0.5
    zero = base if base < 1 - 2 * se else 1.0
    # crossing_zero since 2026-12-06: nor where a ratio of 1 lies within the noise band
    zero_band = zero if base + thr < 1 else 1.0
    return (base, crossing(base) / truth - 1, crossing(min(base, 1.0)) / truth - 1,
            crossing(zero) / truth - 1, thr, zero, crossing(1.0) / truth - 1,
            crossing(zero_band) / truth - 1, zero_band)


def summary(rows, i):
    a = sorted(abs(r[i]) for r in rows)
    return f"median {100 * statistics.median(a):.1f}%, p90 {100 * a[int(0.9 * len(a))]:.1f}%"


def moved(sel, old, new):
    """How many of the rows' errors the column `new` brings closer to 0 than `old`, and further."""
    return (sum(abs(r[new]) < abs(r[old]) - 0.005 for r in sel),
            sum(abs(r[new]) > abs(r[old]) + 0.005 for r in sel))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="the newest commit whose runs count")
    a = ap.parse_args()
    rows = [r for r in (replay(d) for _, d in distinct_runs(rev=a.rev)) if r]
    print(f"{len(rows)} distinct runs whose avail-bw was the response-curve crossing")
    for label, sel in (("all", rows),
                       ("baseline <= 1 (unchanged)", [r for r in rows if r[0] <= 1]),
                       ("baseline in (1, 1.02]", [r for r in rows if 1 < r[0] <= 1.02]),
                       ("baseline over 1.02", [r for r in rows if r[0] > 1.02])):
        if not sel:
            continue
        closer, further = moved(sel, 1, 2)
        print(f"  {label}: {len(sel)} runs; zero at the baseline: {summary(sel, 1)}; "
              f"capped at 1: {summary(sel, 2)}; closer {closer}, further {further}")
    # The second rule: a baseline under 1 by no more than 2 of its standard
    # errors is noise too, and the zero is 1.
    print("zero at 1 also for a baseline under 1 by at most 2 standard errors "
          "(against the zero capped at 1):")
    for label, lo, hi in (("threshold <= 0.03", 0, 0.03), ("threshold in (0.03, 0.3]", 0.03, 0.3),
                          ("threshold in (0.3, 1]", 0.3, 1), ("threshold over 1", 1, float("inf")),
                          ("all", 0, float("inf"))):
        sel = [r for r in rows if r[0] < 1 and r[5] == 1.0 and lo < r[4] <= hi]
        if not sel:
            continue
        closer, further = moved(sel, 2, 3)
        print(f"  {label}: {len(sel)} runs; capped at 1: {summary(sel, 2)}; "
              f"zero 1: {summary(sel, 3)}; closer {closer}, further {further}")
    # The baselines the rule keeps: what a zero of 1 would have done to them.
    kept = [r for r in rows if r[0] < 1 and r[5] != 1.0]
    if kept:
        closer, further = moved(kept, 2, 6)
        print(f"  baselines kept (over 2 standard errors under 1): {len(kept)} runs; zero 1 "
              f"would move {closer} closer, {further} further")
    # The third rule: nor where baseline + threshold reaches 1 (a train at 1
    # within the noise band).
    changed = [r for r in kept if r[8] == 1.0]
    if changed:
        closer, further = moved(changed, 3, 7)
        print(f"  of those, baseline + threshold >= 1 (zero 1 since 2026-12-06): {len(changed)} "
              f"runs, {closer} closer, {further} further:")
        for r in changed:
            print(f"    baseline {r[0]:.3f} threshold {r[4]:.3f}: {100 * r[3]:+.0f}% -> "
                  f"{100 * r[7]:+.0f}%")


if __name__ == "__main__":
    main()
