#!/usr/bin/env python3
"""Comparison with the LinkWidth paper's section 4 (Tables 1-4): for each
scenario, `linkwidth measure` (both avail-bw methods) and iperf3 TCP run one
after another under the same cross traffic, each beside the ground truth of
its own interval.

Lab: prober --(unshaped)-- r1 --(bottleneck R, 100 ms queue)-- r2
--(unshaped)-- target; cross traffic from xs2 (behind r1) to xr2 (behind
r2) crosses exactly the bottleneck, in the probed direction. Per tool run,
the cross traffic that crossed the bottleneck is read from xr2's interface
counters over that run's own interval; truth = IP-layer capacity
R x 1500/1514 minus it. linkwidth's results are read only from its JSON
output (kept, one file per run, under OUT/runs/), iperf3's from `-J`.

Writes OUT/comparison.csv (one row per run), OUT/comparison.md (tables
beside the paper's own numbers), OUT/table{N}.png and, for one
representative run per table, OUT/measure-*.png (scripts/plot_measure.py).
`--report-only` rebuilds the tables and plots from an existing CSV.
"""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402
from benchlib import CROSS_CPU, PROBER_CPU, held, iperf3_run, measure_run, start_cross  # noqa: E402,E501

M = 1e6
TCP_FLOWS = 2             # long-lived cubic flows for Table 3 ("many single-threaded wget")
HTTP_CAPACITY = 3 * M     # Table 4: the paper's 2/3/10 conn/s block (its LinkWidth "I" ~ 2.9)
HTTP_FILE = 64 * 1024     # bytes per GET: 2 and 3 conn/s offer 35% and 53% of a 3 Mbit/s link,
#                           10 conn/s overloads it (the paper's avail-bw fell 2.0 -> 1.08 -> 0.37)
HTTP_TIMEOUT = 10         # s: httperf gives up a connection after this (under overload)
METHODS = ("fleet", "linkwidth")


def _scenario(table, name, capacity, kind, amount, paper):
    return {"table": table, "name": name, "capacity": capacity, "kind": kind,
            "amount": amount, "paper": paper}


# The paper's numbers (section 4.3), as printed: LinkWidth "installed (I) /
# available (A)" capacity and iperf, Mbit/s. Table 1's 0 column has two
# LinkWidth results (Linux 2.4; Linux 2.6.17 with the high-resolution timer).
# Table 2's iperf at 0 is printed "8.5.1". Table 4 does not give the link
# capacities of its five blocks; the 2/3/10 conn/s block is the first one, its
# LinkWidth "I" of 2.8-3 Mbit/s suggests a link of about 3 Mbit/s.
SCENARIOS = [
    _scenario(1, "t1-udp0", 100 * M, "udp", 0, ("88/87 (2.4); 90/78 (2.6 HRT)", "82")),
    _scenario(1, "t1-udp20", 100 * M, "udp", 20 * M, ("66/63", "0.50-40")),
    _scenario(1, "t1-udp40", 100 * M, "udp", 40 * M, ("48/45", "5-38")),
    _scenario(1, "t1-udp50", 100 * M, "udp", 50 * M, ("43/40", "6-15")),
    _scenario(2, "t2-udp0", 10 * M, "udp", 0, ("9.6/9.5", "8.5.1")),
    _scenario(2, "t2-udp2", 10 * M, "udp", 2 * M, ("9.3/7.4", "6.2")),
    _scenario(2, "t2-udp5", 10 * M, "udp", 5 * M, ("4.6/3.2", "3.53")),
    _scenario(3, "t3-tcp10", 10 * M, "tcp", TCP_FLOWS, ("9.6/5.5", "6.2")),
    _scenario(3, "t3-tcp30", 30 * M, "tcp", TCP_FLOWS, ("30/24", "26")),
    _scenario(3, "t3-tcp70", 70 * M, "tcp", TCP_FLOWS, ("70/58", "29-57")),
    _scenario(3, "t3-tcp100", 100 * M, "tcp", TCP_FLOWS, ("82/75", "38-67")),
    _scenario(4, "t4-http2", HTTP_CAPACITY, "http", 2, ("2.9/2.0", "2.57")),
    _scenario(4, "t4-http3", HTTP_CAPACITY, "http", 3, ("3/1.08", "0.991")),
    _scenario(4, "t4-http10", HTTP_CAPACITY, "http", 10, ("2.8/0.368", "0.406")),
]
BY_NAME = {s["name"]: s for s in SCENARIOS}
# The run of these scenarios (if they ran) gets the one-measurement plots.
REPRESENTATIVE = {1: "t1-udp40", 2: "t2-udp2", 3: "t3-tcp30", 4: "t4-http3"}

FIELDS = ["scenario", "table", "run", "capacity_truth_bps", "bottleneck_hop_truth",
          "cross_kind", "cross_config", "cross_configured_bps"]
TOOL_FIELDS = ["exit", "cross_bps", "avail_truth_bps", "availbw_bps", "low_bps", "high_bps",
               "error_pct", "range_holds_truth", "capacity_bps", "capacity_error_pct",
               "bottleneck_hop", "elapsed_s", "probe_bytes", "stop_reason", "json"]
for _m in METHODS:
    FIELDS += [f"{_m}_{f}" for f in TOOL_FIELDS]
FIELDS += ["iperf3_cross_bps", "iperf3_avail_truth_bps", "iperf3_bps", "iperf3_error_pct",
           "iperf3_seconds", "iperf3_bytes", "run_elapsed_s"]


def cross_config(sc):
    if sc["kind"] == "udp":
        return f"UDP CBR {sc['amount'] / M:g} Mbit/s (IP layer)" if sc["amount"] else "none"
    if sc["kind"] == "tcp":
        return f"{sc['amount']} TCP cubic flows (iperf3)"
    return f"httperf {sc['amount']} conn/s x {HTTP_FILE // 1024} KiB GET"


def start_scenario_cross(L, sc):
    if sc["kind"] == "udp":
        return start_cross(L, "udp", sc["amount"], CROSS_CPU) if sc["amount"] else None
    if sc["kind"] == "tcp":
        return L.cross(2, "tcp", flows=sc["amount"], cpu=CROSS_CPU)
    return L.cross(2, "http", rate=sc["amount"], size=HTTP_FILE, timeout=HTTP_TIMEOUT,
                   cpu=CROSS_CPU)


def mbit(v):
    return "-" if v in ("", None) else f"{v / M:.2f}"


def pct(est, truth):
    return 100 * (est / truth - 1) if est is not None and truth and truth > 0 else ""


def tool_fields(method, code, doc, cross, C, json_rel):
    """The CSV fields of one `linkwidth measure` run, from its JSON only."""
    truth = C - cross
    a, lo, hi = doc.get("availbw_bps"), doc.get("availbw_low_bps"), doc.get("availbw_high_bps")
    cap = doc.get("capacity_bps")
    vals = {
        "exit": code, "cross_bps": cross, "avail_truth_bps": truth,
        "availbw_bps": a, "low_bps": lo, "high_bps": hi, "error_pct": pct(a, truth),
        "range_holds_truth": (lo <= truth <= hi) if None not in (lo, hi) else "",
        "capacity_bps": cap, "capacity_error_pct": pct(cap, C),
        "bottleneck_hop": doc.get("bottleneck_hop"), "elapsed_s": doc.get("elapsed_s"),
        "probe_bytes": doc.get("probe_bytes"),
        "stop_reason": doc.get("stop_reason") or (doc.get("error") or {}).get("code", ""),
        "json": json_rel,
    }
    return {f"{method}_{k}": ("" if v is None else v) for k, v in vals.items()}


def run_scenario(sc, args, out):
    """Builds the lab, starts the cross traffic, runs K x (fleet, linkwidth,
    iperf3); returns the CSV rows."""
    R = sc["capacity"]
    spec = lab.Spec(links=[lab.Link(rate=None),
                           lab.Link(rate=R, limit=int(max(30000, 0.1 * R / 8))),
                           lab.Link(rate=None)])
    rows = []
    with lab.Lab(spec, name="cmp" + os.urandom(3).hex()) as L:
        C = L.ground_truth_capacity(ip_len=1500)
        x = start_scenario_cross(L, sc)
        try:
            time.sleep(args.settle)
            for run in range(args.runs):
                t0 = time.monotonic()
                row = {"scenario": sc["name"], "table": sc["table"], "run": run,
                       "capacity_truth_bps": C, "bottleneck_hop_truth": L.narrow_link(),
                       "cross_kind": sc["kind"] if sc["amount"] else "none",
                       "cross_config": cross_config(sc),
                       "cross_configured_bps": sc["amount"] if sc["kind"] == "udp" else ""}
                for m in METHODS:
                    code, doc, cross = measure_run(L, args.bin, ["--method", m, *args.tool_args],
                                                   cpu=PROBER_CPU)
                    rel = os.path.join("runs", f"{sc['name']}-r{run}-{m}.json")
                    with open(os.path.join(out, rel), "w") as f:
                        json.dump(doc, f, indent=1)
                    row.update(tool_fields(m, code, doc, cross, C, rel))
                    time.sleep(args.pause)
                ip = iperf3_run(L, args.iperf_seconds, cpu=PROBER_CPU, cross_link=2)
                it = C - ip["cross_bps"] if ip["cross_bps"] is not None else None
                row.update({"iperf3_cross_bps": ip["cross_bps"], "iperf3_avail_truth_bps": it,
                            "iperf3_bps": ip["bps"], "iperf3_error_pct": pct(ip["bps"], it),
                            "iperf3_seconds": ip["seconds"], "iperf3_bytes": ip["bytes"],
                            "run_elapsed_s": time.monotonic() - t0})
                rows.append({k: ("" if v is None else v) for k, v in row.items()})
                print(f"{sc['name']} run {run}: truth {mbit(row['fleet_avail_truth_bps'])} "
                      f"fleet {mbit(row['fleet_availbw_bps'])} "
                      f"linkwidth {mbit(row['linkwidth_availbw_bps'])} "
                      f"iperf3 {mbit(ip['bps'])} Mbit/s ({row['run_elapsed_s']:.0f} s)", flush=True)
                time.sleep(args.pause)
        finally:
            if x:
                x.stop()
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def selected(args):
    if args.all:
        return list(SCENARIOS)
    names = list(args.scenario or [])
    for t in args.table or []:
        names += [s["name"] for s in SCENARIOS if s["table"] == t]
    if not names:
        sys.exit("compare.py: name --scenario NAME, --table N or --all "
                 f"(scenarios: {', '.join(BY_NAME)})")
    bad = [n for n in names if n not in BY_NAME]
    if bad:
        sys.exit(f"compare.py: unknown scenario {', '.join(bad)} (have {', '.join(BY_NAME)})")
    return [BY_NAME[n] for n in dict.fromkeys(names)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", action="append", help="scenario name (repeatable)")
    ap.add_argument("--table", action="append", type=int, choices=[1, 2, 3, 4],
                    help="every scenario of the paper's table N (repeatable)")
    ap.add_argument("--all", action="store_true", help="every scenario of Tables 1-4")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--runs", type=int, default=3, help="runs per scenario (default 3)")
    ap.add_argument("--iperf-seconds", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="CI: 1 run, iperf3 for 2 s, shorter settling")
    ap.add_argument("--out", default=os.path.join(ROOT, "results"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "linkwidth"))
    ap.add_argument("--tool-args", default="", help="extra `linkwidth measure` arguments")
    ap.add_argument("--lock", default="",
                    help="flock this file around each scenario (shared machines)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild comparison.md and the plots from OUT/comparison.csv")
    args = ap.parse_args()
    if args.list:
        for s in SCENARIOS:
            print(f"{s['name']:10} table {s['table']}  bottleneck {s['capacity'] / M:g} Mbit/s  "
                  f"{cross_config(s)}")
        return
    import compare_report  # after --list: it needs nothing the runs do not
    out = os.path.abspath(args.out)
    csv_path = os.path.join(out, "comparison.csv")
    if not args.report_only:
        scenarios = selected(args)
        if args.quick:
            args.runs, args.iperf_seconds = 1, 2
        args.settle, args.pause = (1.0, 0.5) if args.quick else (2.0, 1.0)
        args.tool_args = args.tool_args.split()
        os.makedirs(os.path.join(out, "runs"), exist_ok=True)
        # The source the binary was built from: read before the runs, not after.
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip()
        rows, t_start = [], time.monotonic()
        for sc in scenarios:
            t0 = time.monotonic()
            with held(args.lock):
                rows += run_scenario(sc, args, out)
            print(f"{sc['name']}: {time.monotonic() - t0:.0f} s", flush=True)
            write_csv(csv_path, rows)       # keep what is done if a later one fails
        meta = {"command": "python3 scripts/compare.py " + " ".join(sys.argv[1:]),
                "commit": commit or "?", "date": str(datetime.date.today()),
                "cores": os.cpu_count(), "seconds": round(time.monotonic() - t_start),
                "iperf_seconds": args.iperf_seconds, "runs": args.runs}
        with open(os.path.join(out, "comparison.meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
    compare_report.report(out, SCENARIOS, REPRESENTATIVE, plots=not args.no_plots)


if __name__ == "__main__":
    main()
