#!/usr/bin/env python3
"""Fleet verdicts with and without the delay trend, over the committed paths
benchmark runs (git history of results/paths_runs/): how often a fleet at a
rate below the true avail-bw read "above", and one above it did, with the
train verdict of the ratio alone and with the trend rule of classify_train
(estimate/availbw.hpp). No lab run: every train's ratio and PDT, the run's
calibration (baseline, threshold) and the truth are in the committed
documents. (The search in those runs followed the old verdicts; this replays
the verdicts at the rates it chose, not a search.)

    python3 scripts/train_trend_history.py [--repo .] [--rev 1cc9219]
"""
import collections

from committed_runs import fleet_verdict as fleet, history_args, path_runs

TREND_ABOVE = 0.2          # kTrendAbove
TREND_STEADY = 0.6         # kTrendSteady
TREND_STEADY_SHARE = 0.25  # kTrendSteadyShare
NOISE_FLOOR = 0.002        # kNoiseFloor
NOISY = 0.03               # kNoisyThreshold
BANDS = ((0.3, 0.7), (0.7, 0.95), (1.05, 1.3), (1.3, 3.0))
SKIP = ("send_stall", "unusable", "lost", "lost_load")


def ratio_alone(ratio, pdt, base, thr):
    if ratio > base + thr:
        return "above"
    return "below" if ratio <= base + thr / 2 else "unclear"


def with_trend(ratio, pdt, base, thr):
    """classify_train with a valid trend (every train here had 6 markers or
    its pdt is 0, which the rule reads as no rise)."""
    if ratio > base + thr:
        return "above" if pdt > TREND_ABOVE else "unclear"
    if ratio > base + max(TREND_STEADY_SHARE * thr, NOISE_FLOOR) and pdt > TREND_STEADY:
        return "above"
    return "below" if ratio <= base + thr / 2 else "unclear"


def main():
    a, revs = history_args(__doc__)
    # (noisy, band, rule) -> Counter of fleet verdicts
    tally = collections.defaultdict(collections.Counter)
    runs = 0
    for _, _, d in path_runs(a.repo, revs):
        doc = d.get("doc") or {}
        truth = d.get("truth_availbw_phase") or d.get("truth") or {}
        A = truth.get("availbw_bps")
        noise = doc.get("noise")
        if not A or not noise or not doc.get("rates"):
            continue
        runs += 1
        base, thr = noise["baseline"], noise["threshold"]
        noisy = thr > NOISY
        for r in doc["rates"]:
            if r["phase"] not in ("search", "response"):
                continue
            band = next((b for b in BANDS if b[0] * A <= r["offered_bps"] < b[1] * A), None)
            if band is None:
                continue
            trains = [(t["ratio"], t.get("pdt") or 0.0) for t in r["trains"]
                      if t.get("ratio") is not None and t.get("verdict") not in SKIP]
            if not trains:
                continue
            for name, rule in (("ratio alone", ratio_alone), ("with trend", with_trend)):
                v = fleet([rule(x, p_, base, thr) for x, p_ in trains])
                for cls in ("all", "noisy" if noisy else "quiet"):
                    tally[(cls, band, name)][v] += 1
    print(f"{runs} path runs in {len(revs)} committed runs (newest {revs[0] if revs else '-'})")
    print("share of fleets that read \"above\", by offered rate / true avail-bw")
    for cls in ("all", "quiet", "noisy"):
        print(f"{cls} (calibration threshold {'> ' if cls == 'noisy' else '<= ' if cls == 'quiet' else ''}"
              f"{NOISY if cls != 'all' else 'any'}):")
        for band in BANDS:
            row = []
            for name in ("ratio alone", "with trend"):
                c = tally[(cls, band, name)]
                n = sum(c.values())
                row.append(f"{name} {100 * c['above'] / n:5.1f}%" if n else f"{name}   -")
            n = sum(tally[(cls, band, "ratio alone")].values())
            print(f"  {band[0]:.2f}-{band[1]:.2f} A ({n:4d} fleets): " + ", ".join(row))


if __name__ == "__main__":
    main()
