#!/usr/bin/env python3
"""Where `measure`'s time goes on the random-path benchmark (issue 11).

Reads a bench_paths.py output directory (paths_runs/pathNNN.json and
paths_benchmark.csv; no lab, no probes) and writes, for the runs with an
avail-bw phase:

* the time of each part: capacity phase, hops phase (what `measure --no-hops`
  leaves out), and the avail-bw phase's calibration, search and response
  trains (from the `at_s` of each rate record);
* the probe bytes and marker replies of each part of the avail-bw phase, and
  the two floors the defaults put under its time: bytes x 8 / (--max-load x
  C) and replies / --max-replies;
* a replay of the response trains: the crossing (estimate/availbw.cpp,
  response_crossing: mean of offered - C_x (ratio - baseline), with the
  capacity the run's crossing used) over the first K usable trains against
  all of them, on the runs whose response phase used every train it may
  (30) and whose estimate is the crossing. It answers whether fewer response
  trains would have done (a Python replica: no slope refit, no knee test).

    python3 scripts/paths_time_budget.py --dir results --out results/paths_time_budget.md
"""
import argparse
import csv
import glob
import json
import os
import statistics

UNUSABLE = ("send_stall", "lost", "lost_load", "unusable")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def p90(xs):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, -(-9 * len(s) // 10) - 1))]


def parts(doc):
    """Seconds, bytes, trains, replies per part of the avail-bw phase."""
    rates = doc.get("rates") or []
    total = doc.get("availbw_elapsed_s") or 0.0
    starts = {}
    for r in rates:
        starts.setdefault(r["phase"], r["at_s"])
    order = [p for p in ("calibration", "search", "response") if p in starts]
    out = {}
    for i, p in enumerate(order):
        end = starts[order[i + 1]] if i + 1 < len(order) else total
        trains = [t for r in rates if r["phase"] == p for t in r["trains"]]
        out[p] = {
            "s": max(0.0, end - starts[p]),
            "bytes": sum((t.get("load_packets") or 0) * (t.get("packet_size") or 0)
                         for t in trains),
            "trains": len(trains),
            "replies": sum((t.get("markers") or 0) + 1 for t in trains),  # + the warm-up SYN
        }
    return out


def replay(doc, k):
    """Crossings (first k usable response trains, all of them), or None."""
    rates = doc.get("rates") or []
    resp = [r for r in rates if r["phase"] == "response"]
    if len(resp) < 1 or doc.get("availbw_basis") != "response_curve":
        return None
    cx = doc.get("tight_link_capacity_bps") if doc.get("crossing_capacity_source") == \
        "response_slope" else None
    C = cx or doc.get("capacity_bps")
    base = (doc.get("noise") or {}).get("baseline", 1.0)
    # The two rates alternate train by train (availbw_run.cpp, run_response).
    a = resp[0]["trains"]
    b = resp[1]["trains"] if len(resp) > 1 else []
    seq = []
    for i in range(max(len(a), len(b))):
        seq += [x[i] for x in (a, b) if i < len(x)]
    seq = [t for t in seq if t.get("verdict") not in UNUSABLE and t.get("ratio")]
    if len(seq) < k + 1:
        return None
    cr = [t["offered_bps"] - C * (t["ratio"] - base) for t in seq]
    return statistics.mean(cr[:k]), statistics.mean(cr), len(seq)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="results", help="a bench_paths.py --out directory")
    ap.add_argument("--out", default="", help="write the report here (default: stdout)")
    ap.add_argument("--replay-trains", type=int, default=12,
                    help="response trains kept in the replay (default 12: the phase's minimum)")
    args = ap.parse_args()

    truth = {}
    with open(os.path.join(args.dir, "paths_benchmark.csv")) as f:
        for row in csv.DictReader(f):
            truth[int(row["path"])] = row
    runs = []
    for fn in sorted(glob.glob(os.path.join(args.dir, "paths_runs", "path*.json"))):
        rec = json.load(open(fn))
        doc = rec.get("doc") or {}
        if not doc.get("rates"):
            continue
        runs.append((rec["path"]["index"], doc))
    if not runs:
        raise SystemExit(f"no runs with an avail-bw phase under {args.dir}/paths_runs")

    cols = {k: [] for k in ("capacity", "hops", "avail", "calibration", "search", "response",
                            "no_hops", "byte_floor", "reply_floor", "share_search",
                            "share_response", "replies")}
    for _, d in runs:
        cap, av, el = d.get("capacity_elapsed_s") or 0, d.get("availbw_elapsed_s") or 0, \
            d.get("elapsed_s") or 0
        cols["capacity"].append(cap)
        cols["avail"].append(av)
        cols["hops"].append(max(0.0, el - cap - av))
        cols["no_hops"].append(cap + av)
        ps = parts(d)
        for p in ("calibration", "search", "response"):
            cols[p].append(ps.get(p, {}).get("s", 0.0))
        byts = sum(v["bytes"] for v in ps.values())
        reps = sum(v["replies"] for v in ps.values())
        C = d.get("capacity_bps") or 0
        prm = d.get("params") or {}
        if C > 0 and byts > 0:
            cols["byte_floor"].append(8 * byts / (prm.get("max_load", 0.1) * C))
            cols["share_search"].append(ps.get("search", {}).get("bytes", 0) / byts)
            cols["share_response"].append(ps.get("response", {}).get("bytes", 0) / byts)
        cols["replies"].append(reps)
        cols["reply_floor"].append(reps / prm.get("max_replies_per_s", 100.0))

    L = []
    L.append("# Where `measure`'s time goes (random-path benchmark)\n")
    L.append(f"Produced by `python3 scripts/paths_time_budget.py --dir {args.dir}"
             f"{' --out ' + args.out if args.out else ''}` from the runs in "
             f"`{args.dir}/paths_runs/` ({len(runs)} runs with an avail-bw phase); "
             "no lab run of its own.\n")
    L.append("| part | median s | mean s | p90 s |")
    L.append("|---|---|---|---|")
    names = [("capacity", "capacity phase (discovery included)"),
             ("hops", "hops phase (`--no-hops` leaves it out)"),
             ("avail", "avail-bw phase"),
             ("calibration", "  calibration trains"),
             ("search", "  search fleets"),
             ("response", "  response trains"),
             ("no_hops", "capacity + avail-bw (what `measure --no-hops` takes)")]
    for k, label in names:
        v = cols[k]
        L.append(f"| {label} | {med(v):.2f} | {statistics.mean(v):.2f} | {p90(v):.2f} |")
    L.append("")
    L.append("Floors under the avail-bw phase's time at the run's own defaults:\n")
    L.append("| floor | median s | p90 s |")
    L.append("|---|---|---|")
    L.append(f"| probe bytes x 8 / (--max-load x C) | {med(cols['byte_floor']):.2f} | "
             f"{p90(cols['byte_floor']):.2f} |")
    L.append(f"| marker replies / --max-replies (markers + the warm-up SYN per train) | "
             f"{med(cols['reply_floor']):.2f} | {p90(cols['reply_floor']):.2f} |")
    L.append("")
    L.append(f"Share of the avail-bw phase's load bytes: search fleets median "
             f"{100 * med(cols['share_search']):.0f} %, response trains "
             f"{100 * med(cols['share_response']):.0f} % (calibration trains are small packets).\n")

    k = args.replay_trains
    L.append(f"## Replay: the crossing from the first {k} response trains against all\n")
    L.append("Runs whose response phase sent its maximum (30 usable trains or more) and whose "
             "estimate is the crossing. Error against the avail-bw truth of the run "
             "(`paths_benchmark.csv`).\n")
    L.append(f"| path | truth Mbit/s | all trains: crossing (n) | error | first {k}: crossing "
             "| error |")
    L.append("|---|---|---|---|---|---|")
    e_all, e_k = [], []
    for idx, d in runs:
        r = replay(d, k)
        if r is None or r[2] < 30:
            continue
        t = float(truth[idx]["availbw_truth_bps"] or 0)
        if t <= 0:
            continue
        mk, ma, n = r
        e_all.append(abs(ma / t - 1))
        e_k.append(abs(mk / t - 1))
        L.append(f"| {idx} | {t / 1e6:.2f} | {ma / 1e6:.2f} ({n}) | {100 * (ma / t - 1):+.1f} % | "
                 f"{mk / 1e6:.2f} | {100 * (mk / t - 1):+.1f} % |")
    if e_all:
        L.append(f"\nMedian |error| over these {len(e_all)} runs: all trains "
                 f"{100 * med(e_all):.1f} %, first {k} {100 * med(e_k):.1f} %; "
                 f"90th percentile {100 * p90(e_all):.1f} % against {100 * p90(e_k):.1f} %.")
    text = "\n".join(L) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
