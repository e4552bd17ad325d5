#!/usr/bin/env python3
"""Replay the own-shaper capacity rules (app/runs/availbw_run.cpp,
apply_own_shaper_capacity) over random-path benchmark documents.

`measure` read our interface's root shaper (own_traffic.qdisc), IP-layer rate
S. The capacity becomes S when
  * "above": the capacity phase read above S (every packet of ours passes it);
  * "below": the capacity read over 0.1% below S (1% before 2026-12-06), the
    trains were spread by our own queue (warning local_bottleneck or
    local_shaping), the reply gaps
    (gap_check.capacity_bps) read at least 0.97 S, and this host's other
    traffic took over 5% of S.
For each directory (a bench_paths.py --out), prints every run where a rule
fires, with the truth, and every run where none fires but S was the truth and
the capacity missed it by over 3%. Documents written after the rules read S
already (capacity_source own_shaper): they count as fired. No lab, no probes.

    python3 scripts/own_shaper_rule_history.py results /tmp/bench1 ...

With --unchanged first, it lists instead the documents where the hops phase's
veto on "below" (hop 1 at S, its trains within 3%, the capacity over 5% under
S) meets its exception (unchanged_to_target): every hop after ours but the
target's at S within 3%, the target reached, and whether the gaps read over
1.05 S (only then does the exception lift the veto).

With --spans first, it lists the documents whose capacity the "below" rule
made S (capacity_from_own_shaper, "no link after ours") and whether the veto
slower_link_after_ours holds there: the gap check's least-delayed spans
(gap_check.min_delay_bps) within 3% of the trains' estimate
(gap_check.trains_capacity_bps) and under 0.95 S, and a hop after ours (TTL 2
or more, used) within 3% of the spans. The capacity would then stay the
trains'; each line gives both errors against the truth.
"""
import glob
import json
import os
import sys


def ip_rate(doc):
    ot = doc.get("own_traffic") or {}
    q = ot.get("qdisc") or {}
    s = q.get("rate_bps")
    if not s:
        return 0.0
    ps = ot.get("packet_size") or 1500
    return s * ps / (ps + (ot.get("l2_header") or 14) + (q.get("overhead") or 0))


def fires(doc):
    """'above', 'below' or '' (see the module's doc)."""
    s = ip_rate(doc)
    c = doc.get("capacity_bps") or 0
    codes = {w["code"] for w in doc.get("warnings") or []}
    gaps = (doc.get("gap_check") or {}).get("capacity_bps") or 0
    other = (doc.get("own_traffic") or {}).get("other_bps") or 0
    if not s or not c or doc.get("capacity_is_lower_bound") or doc.get("shaper"):
        return ""
    if doc.get("capacity_source") == "own_shaper" or c > s:
        return "above" if c > s else "read"
    if not codes & {"local_bottleneck", "local_shaping"}:
        return ""
    return "below" if c < 0.999 * s and gaps >= 0.97 * s and other > 0.05 * s else ""


def unchanged(dirs):
    n = 0
    for d in dirs:
        for fn in sorted(glob.glob(os.path.join(d, "**", "paths_runs", "path*.json"), recursive=True)):
            rec = json.load(open(fn))
            doc = rec.get("doc") or {}
            truth = (rec.get("truth") or {}).get("capacity_bps")
            s = ip_rate(doc)
            hops = doc.get("hops") or []
            if not truth or not doc.get("capacity_bps") or not s or len(hops) < 2:
                continue
            n += 1
            h1 = hops[0]
            if not (h1.get("used") and abs(h1["rate_bps"] / s - 1) <= 0.02 and h1["rate_low_bps"] > 0
                    and h1["rate_high_bps"] <= 1.03 * h1["rate_low_bps"]
                    and doc["capacity_bps"] < 0.95 * s):
                continue
            if hops[-1].get("addr") != doc.get("target_addr"):
                continue
            if any(not h.get("used") or abs((h.get("rate_bps") or 0) / s - 1) > 0.03 for h in hops[1:-1]):
                continue
            gaps = (doc.get("gap_check") or {}).get("capacity_bps") or 0
            print(f"{fn}: capacity {100 * (doc['capacity_bps'] / truth - 1):+.1f}%, shaper "
                  f"{100 * (s / truth - 1):+.1f}%, gaps {gaps / s:.2f} of it"
                  f"{' (lifted)' if gaps > 1.05 * s else ''}")
    print(f"{n} documents with our shaper and hops")


def spans(dirs):
    n = vetoed = better = 0
    for d in dirs:
        for fn in sorted(glob.glob(os.path.join(d, "**", "paths_runs", "path*.json"), recursive=True)):
            rec = json.load(open(fn))
            doc = rec.get("doc") or {}
            truth = (rec.get("truth") or {}).get("capacity_bps")
            if not truth or doc.get("capacity_source") != "own_shaper":
                continue
            why = [w["message"] for w in doc.get("warnings") or []
                   if w["code"] == "capacity_from_own_shaper"]
            if not why or "no link after ours" not in why[0]:
                continue
            n += 1
            gc = doc.get("gap_check") or {}
            md = gc.get("min_delay_bps") or 0
            trains = gc.get("trains_capacity_bps") or 0
            s = doc["capacity_bps"]
            if not md or not trains or md >= 0.95 * s or abs(md / trains - 1) > 0.03:
                continue
            hop = [h for h in doc.get("hops") or [] if (h.get("ttl") or 0) >= 2 and h.get("used")
                   and h.get("rate_bps") and abs(h["rate_bps"] / md - 1) <= 0.03]
            if not hop:
                continue
            vetoed += 1
            was, now = s / truth - 1, trains / truth - 1
            better += abs(now) < abs(was)
            print(f"{fn}: shaper {100 * was:+.1f}% -> trains {100 * now:+.1f}% (spans "
                  f"{md / 1e6:.2f}, hop {hop[0]['ttl']} {hop[0]['rate_bps'] / 1e6:.2f} Mbit/s)")
    print(f"{n} documents with our shaper taken under the trains; the veto holds in {vetoed}, "
          f"closer to the truth in {better}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    if sys.argv[1] == "--unchanged":
        unchanged(sys.argv[2:])
        return
    if sys.argv[1] == "--spans":
        spans(sys.argv[2:])
        return
    fired = right = missed = runs = 0
    for d in sys.argv[1:]:
        for fn in sorted(glob.glob(os.path.join(d, "paths_runs", "path*.json"))):
            rec = json.load(open(fn))
            doc = rec.get("doc") or {}
            truth = (rec.get("truth") or {}).get("capacity_bps")
            if not doc.get("capacity_bps") or not truth:
                continue
            runs += 1
            s = ip_rate(doc)
            rule = fires(doc)
            if rule:
                fired += 1
                ok = abs(s / truth - 1) <= 0.01
                right += ok
                print(f"{rule:6} {fn}: capacity {doc['capacity_bps']/1e6:.1f}, shaper {s/1e6:.1f}, "
                      f"truth {truth/1e6:.1f} Mbit/s{'' if ok else '  WRONG'}")
            elif s and abs(s / truth - 1) <= 0.01 and abs(doc["capacity_bps"] / truth - 1) > 0.03 \
                    and doc.get("capacity_source") != "own_shaper":
                missed += 1
                print(f"missed {fn}: trains {doc['capacity_bps']/1e6:.1f}, shaper = truth "
                      f"{truth/1e6:.1f} Mbit/s")
    print(f"{runs} runs: the rules fire in {fired} ({right} right); "
          f"{missed} runs where the shaper was the truth and the capacity missed it stay as they were")


if __name__ == "__main__":
    main()
