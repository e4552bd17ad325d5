#!/usr/bin/env python3
"""Fleet verdicts with and without the trains our own queue disturbed, over
one paths benchmark run (results/paths_runs/ or --dir): how often a fleet
below the true avail-bw read "above", and one above it did, when its
verdict counts every train (as the search did) and when it counts only the
trains that left our interface undisturbed (their delay from send to leaving
spread by at most the tolerance of evaluate_paced_train: max(50 us, 1% of
the train's send span)), everywhere, and only at rates under 0.9 x our own
link's avail-bw from its counters (root shaper's rate less this host's other
traffic; runs without a shaper rate keep every train): there our own link is
not the tight one, and a train it disturbed met a burst of this host's
traffic, not the path's limit. And the rule the tool took instead (kOwnLinkFree in
estimate/availbw.hpp): such a train judged on the lower of its two ratios,
as sent and as it left our interface (the verdict "above" only if it read
above before, as the trend test cannot be redone offline). Needs runs that record each train's local_queue_s (718edb8 on).
No lab run: this replays verdicts at the rates the search chose, not a
search.

    python3 scripts/local_disturbance_replay.py [--dir results/paths_runs]
"""
import argparse
import collections
import glob
import json
import os

from committed_runs import fleet_verdict as decide

QUEUE_FLOOR_S = 50e-6   # kLocalQueueFloor
QUEUE_SHARE = 0.01      # kLocalQueueShare
BANDS = ((0.0, 0.7), (0.7, 0.95), (1.05, 1.3), (1.3, 10.0))
COUNTED = ("above", "below", "unclear")


def disturbed(t):
    q = t.get("local_queue_s")
    if q is None or not t.get("offered_bps"):
        return False
    span = 8.0 * (t["load_packets"] + t["markers"]) * t["packet_size"] / t["offered_bps"]
    return q > max(QUEUE_FLOOR_S, QUEUE_SHARE * span)


def lower_view_verdict(t, own, noise):
    """The train's verdict on the lower of its two ratios (as sent, as it left
    our interface) where the tool's rule applies: our queue moved it about
    (local_queue_s over the tolerance) at under 0.9 x our link's avail-bw."""
    v = t["verdict"]
    lr = t.get("local_ratio")
    if (own is None or not lr or not t.get("offered_bps") or not disturbed(t)
            or t["offered_bps"] >= 0.9 * own or not noise):
        return v
    # The ratio recorded is the sent view on a train shaped locally, else
    # the departures' view; sent = left x local_ratio over the same markers.
    as_left = t["ratio"] / lr if t.get("shaped_locally") else t["ratio"]
    r = min(as_left, as_left * lr)
    base, thr = noise["baseline"], noise["threshold"]
    if r > base + thr:
        return "above" if v == "above" else "unclear"
    return "below" if r <= base + thr / 2 else "unclear"


def own_availbw(doc):
    """Our own link's avail-bw from its counters, or None without a shaper rate."""
    o = doc.get("own_traffic") or {}
    q = o.get("qdisc") or {}
    if not q.get("rate_bps") or not o.get("packet_size"):
        return None
    ps, l2 = o["packet_size"], o.get("l2_header") or 0
    return (q["rate_bps"] * ps / (ps + l2 + (q.get("overhead") or 0))
            - (o.get("other_bps") or 0) * ps / (ps + l2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="results/paths_runs")
    a = ap.parse_args()
    tally = collections.defaultdict(lambda: collections.Counter())
    runs = with_fields = touched = 0
    for f in sorted(glob.glob(os.path.join(a.dir, "path*.json"))):
        d = json.load(open(f))
        doc, truth = d.get("doc") or {}, d.get("truth") or {}
        A = truth.get("availbw_bps")
        if not doc.get("rates") or not A:
            continue
        runs += 1
        trains = [t for r in doc["rates"] for t in r["trains"]]
        if not any("local_queue_s" in t for t in trains):
            continue
        with_fields += 1
        hit = False
        own = own_availbw(doc)
        for r in doc["rates"]:
            if r["phase"] != "search":
                continue
            x = r["rate_bps"] / A
            band = next((b for b in BANDS if b[0] <= x < b[1]), None)
            if band is None:
                continue
            ts = [t for t in r["trains"] if t["verdict"] in COUNTED]
            clean = [t for t in ts if not disturbed(t)]
            if len(clean) < len(ts):
                hit = True
            gated = clean if own is not None and r["rate_bps"] < 0.9 * own else ts
            lower = [lower_view_verdict(t, own, doc.get("noise")) for t in ts]
            for key, vs in (("every train", [t["verdict"] for t in ts]),
                            ("undisturbed only", [t["verdict"] for t in clean]),
                            ("undisturbed under 0.9 x own", [t["verdict"] for t in gated]),
                            ("lower view under 0.9 x own", lower)):
                v = decide(vs)
                tally[(band, key)][v or "no trains"] += 1
                if len(clean) < len(ts):
                    tally[(band, key + ", fleets with a disturbed train")][v or "no trains"] += 1
        touched += hit
    print(f"{runs} runs with an avail-bw search in {a.dir}; {with_fields} record local_queue_s; "
          f"{touched} had a search fleet with a train our own queue disturbed.\n")
    print("| fleets at (x A) | trains counted | fleets | above | grey | below | no trains left |")
    print("|---|---|---|---|---|---|---|")
    for (band, key), c in sorted(tally.items()):
        n = sum(c.values())
        print(f"| {band[0]}-{band[1]} | {key} | {n} | {100 * c['above'] / n:.1f}% | "
              f"{100 * c['grey'] / n:.1f}% | {100 * c['below'] / n:.1f}% | {c['no trains']} |")


if __name__ == "__main__":
    main()
