#!/usr/bin/env python3
"""Avail-bw benchmark: both methods of `linkwidth measure` over a grid of
capacity x utilisation x cross-traffic kind, with iperf3's TCP throughput in
the same conditions. --family 6: a dual-stack lab with linkwidth, the cross
traffic and iperf3 all over IPv6 (2001:2::/48), into availbw_benchmark_ipv6.*
unless --tag says otherwise. --family both: a dual-stack lab where every run
measures the IPv4 and the IPv6 address of the target back to back under the
same cross traffic (the order alternates run by run), with an IPv4 | IPv6
comparison, into availbw_benchmark_families.*.

Lab: prober --(unshaped)-- r1 --(tbf rate R)-- target; cross traffic on the
shaped link. Kinds: "udp" (iperf3 constant rate) and "bursty" (lw_crossgen:
Poisson departures, IP sizes 1500/576/64 B at 40/20/40 %). Ground truth per
run: the IP-layer capacity R x 1500/1514 minus the cross traffic measured on
the link's counters during that run. iperf3: one TCP flow, cubic (this VM
defaults to BBR), under the same cross traffic. Reads only linkwidth's JSON.
Writes results/availbw_benchmark{tag}.csv and .md.
"""
import argparse
import csv
import datetime
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402
from benchlib import CROSS_CPU, PROBER_CPU, fmt, held, iperf3_tcp, measure_run, start_cross  # noqa: E402,E501


def one_run(L, binary, method, extra, pin, target=None):
    # The hops phase has its own benchmark (bench_hops.py): leave it out here.
    code, doc, cross = measure_run(L, binary, ["--no-hops", "--method", method, *extra],
                                   cpu=PROBER_CPU if pin else None, target=target)
    truth = L.ground_truth_capacity(ip_len=1500) - cross
    a = doc.get("availbw_bps")
    lo, hi = doc.get("availbw_low_bps"), doc.get("availbw_high_bps")
    return {
        "method": method, "exit": code, "cross_bps": cross, "truth_bps": truth,
        "estimate_bps": a if a is not None else "",
        "low_bps": lo if lo is not None else "", "high_bps": hi if hi is not None else "",
        "error_pct": 100 * (a / truth - 1) if a is not None and truth > 0 else "",
        "range_holds_truth": (lo <= truth <= hi) if a is not None else "",
        "range_width_pct": 100 * (hi - lo) / doc["capacity_bps"] if a is not None else "",
        "capacity_bps": doc.get("capacity_bps") or "",
        "tight_link_bps": doc.get("tight_link_capacity_bps") or "",
        "elapsed_s": doc.get("elapsed_s", ""),
        "availbw_elapsed_s": doc.get("availbw_elapsed_s", ""),
        "probe_bytes": doc.get("probe_bytes", ""),
        "fleets": sum(1 for r in doc.get("rates", []) if r["phase"] != "calibration"),
        "stop_reason": doc.get("stop_reason", ""),
        "warnings": " ".join(w["code"] for w in doc.get("warnings", [])),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="10M,50M,100M,300M")
    ap.add_argument("--utils", default="0,30,60,80", help="cross traffic, %% of the capacity")
    ap.add_argument("--kinds", default="udp,bursty")
    ap.add_argument("--methods", default="fleet,linkwidth")
    ap.add_argument("--runs", type=int, default=1, help="runs per method and condition")
    ap.add_argument("--iperf-seconds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "linkwidth"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results"))
    ap.add_argument("--tool-args", default="", help="extra linkwidth arguments")
    ap.add_argument("--lock", default="", help="flock this file around each condition")
    ap.add_argument("--tag", default=None,
                    help="suffix for the output file names (default: '' or '_ipv6')")
    ap.add_argument("--family", choices=("4", "6", "both"), default="4",
                    help="6: linkwidth, cross traffic and iperf3 over IPv6; both: each run "
                    "measures both addresses of the target under the same cross traffic")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin linkwidth to CPU 0 and the cross generator to CPU 1")
    args = ap.parse_args()
    families = [4, 6] if args.family == "both" else [int(args.family)]
    both = len(families) == 2
    if args.tag is None:
        args.tag = "_families" if both else "_ipv6" if families == [6] else ""
    v6 = 6 in families
    os.makedirs(args.out, exist_ok=True)
    # The source the binary was built from: read before the runs, not after.
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    methods = args.methods.split(",")
    rows = []
    for rate_text in args.rates.split(","):
        rate = lab.parse_rate(rate_text)
        for util in [int(u) for u in args.utils.split(",")]:
            for kind in (["none"] if util == 0 else args.kinds.split(",")):
                with held(args.lock), lab.Lab(lab.Spec(
                        links=[lab.Link(rate=None), lab.Link(rate=rate)], ipv6=v6)) as L:
                    C = L.ground_truth_capacity(ip_len=1500)
                    cpu = None if args.no_pin else CROSS_CPU
                    targets = {4: L.target_ip, 6: L.target_ip6 if v6 else None}
                    target = targets[families[0]]
                    # Both families: the cross traffic over IPv4 (the link carries
                    # bytes either way; its counters give the truth).
                    x = start_cross(L, kind, util / 100 * C, cpu,
                                    family=families[0]) if util else None
                    try:
                        time.sleep(0.5)
                        cond = []
                        for run in range(args.runs):
                            for m in methods:
                                order = families if run % 2 == 0 else families[::-1]
                                for fam in order:
                                    r = one_run(L, args.bin, m, args.tool_args.split(),
                                                not args.no_pin, targets[fam])
                                    r.update({"rate_bps": rate, "util_pct": util, "kind": kind,
                                              "run": run, "family": fam})
                                    cond.append(r)
                                    print(f"{rate_text} {util}% {kind} {m} IPv{fam}: "
                                          f"err {r['error_pct']!s:.6}% "
                                          f"t {r['elapsed_s']!s:.5} s", flush=True)
                        ip = iperf3_tcp(L, args.iperf_seconds, target=target)
                    finally:
                        if x:
                            x.stop()
                    for r in cond:
                        r["iperf3_tcp_bps"] = ip
                    rows.extend(cond)

    fields = ["rate_bps", "util_pct", "kind", "run", "family", "method", "exit", "cross_bps", "truth_bps",
              "estimate_bps", "low_bps", "high_bps", "error_pct", "range_holds_truth",
              "range_width_pct", "capacity_bps", "tight_link_bps", "elapsed_s",
              "availbw_elapsed_s", "probe_bytes", "fleets", "stop_reason", "warnings",
              "iperf3_tcp_bps"]
    base = f"availbw_benchmark{args.tag}"
    with open(os.path.join(args.out, base + ".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)

    cmd = "python3 scripts/bench_availbw.py " + " ".join(sys.argv[1:])
    lines = [
        "# Available-bandwidth benchmark"
        + (": IPv4 and IPv6 under the same load" if both else " over IPv6" if v6 else ""), "",
        f"Produced by `{cmd.strip()}` at commit {commit or '?'} on {datetime.date.today()} "
        f"({os.cpu_count()} cores). "
        f"Raw rows: `{base}.csv`.", "",
        "Lab: prober --(unshaped veth)-- r1 --(tbf rate R)-- target, cross traffic on the shaped",
        "link: `udp` = iperf3 constant rate, `bursty` = lw_crossgen (Poisson departures, IP sizes",
        "1500/576/64 B at 40/20/40 %). Truth = R x 1500/1514 minus the cross traffic measured on",
        "the link's counters during the run. Error = estimate / truth - 1. Time = the whole",
        "`linkwidth measure` (capacity phase included). iperf3: one TCP flow, cubic (this VM",
        f"defaults to BBR), {args.iperf_seconds} s, under the same cross traffic."
        + (" Everything over IPv6: addresses in 2001:2::/48, 40-byte headers counted in "
           "every IP-layer rate, UDP cross traffic with 1452-byte payloads." if v6 and not both
           else "")
        + (" Dual-stack lab (2001:2::/48 beside 198.18.0.0/15): each run measured the "
           "target's IPv4 and IPv6 addresses back to back under the same cross traffic "
           "(IPv4 first in even runs, IPv6 first in odd ones), each against the cross "
           "traffic counted during its own run; 40-byte IPv6 headers are counted in its "
           "IP-layer rates. The cross traffic and iperf3 ran over IPv4." if both else "")
        + ("" if args.no_pin else " linkwidth ran pinned to CPU 0 and the cross-traffic "
           "generator to CPU 1 (on this 2-core VM they otherwise compete: the generator "
           "stalls while the prober sends)."), "",
        "## Summary", "",
        "| method | " + ("family | " if both else "") + "cross traffic | runs | median abs error "
        "| 90th pct abs error | range holds truth | median time s | median probe kB |",
        "|---|---|---|---|---|---|---|---|" + ("---|" if both else ""),
    ]
    for m in methods:
        for fam in families:
            for kind in ["all"] + args.kinds.split(","):
                rs = [r for r in rows if r["method"] == m and r["family"] == fam and
                      (kind == "all" or r["kind"] in (kind, "none"))]
                ok = [r for r in rs if r["error_pct"] != ""]
                if not ok:
                    continue
                errs = sorted(abs(r["error_pct"]) for r in ok)
                p90 = errs[min(len(errs) - 1, int(round(0.9 * (len(errs) - 1))))]
                held_n = sum(1 for r in ok if r["range_holds_truth"] is True)
                lines.append(
                    f"| {m} | " + (f"IPv{fam} | " if both else "")
                    + f"{kind if kind != 'all' else 'all (incl. none)'} | {len(ok)}/{len(rs)} "
                    f"| {statistics.median(errs):.1f}% | {p90:.1f}% | {held_n}/{len(ok)} "
                    f"| {statistics.median(r['elapsed_s'] for r in ok):.1f} "
                    f"| {statistics.median(r['probe_bytes'] for r in ok) / 1e3:.0f} |")
    if both:
        lines += ["", "## IPv4 | IPv6, condition by condition", "",
                  "Error = estimate / truth - 1 of each family's run (its own truth: the cross "
                  "traffic counted during that run).", "",
                  "| R | util | kind | method | run | truth Mbit/s | IPv4 estimate | IPv4 error "
                  "| IPv6 estimate | IPv6 error | IPv4 time s | IPv6 time s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        key = lambda r: (r["rate_bps"], r["util_pct"], r["kind"], r["method"], r["run"])  # noqa: E731
        seen = []
        for r in rows:
            if key(r) not in seen:
                seen.append(key(r))
        for k in seen:
            pair = {r["family"]: r for r in rows if key(r) == k}
            a, b = pair.get(4), pair.get(6)
            e4 = "" if not a or a["error_pct"] == "" else f"{a['error_pct']:+.1f}%"
            e6 = "" if not b or b["error_pct"] == "" else f"{b['error_pct']:+.1f}%"
            lines.append(
                f"| {fmt(k[0], 1e6, 0)}M | {k[1]}% | {k[2]} | {k[3]} | {k[4]} "
                f"| {fmt(a['truth_bps']) if a else ''} | {fmt(a['estimate_bps']) if a else ''} "
                f"| {e4} | {fmt(b['estimate_bps']) if b else ''} | {e6} "
                f"| {fmt(a['elapsed_s'], 1, 1) if a else ''} "
                f"| {fmt(b['elapsed_s'], 1, 1) if b else ''} |")
    lines += ["", "## Every condition", "",
              "| R | util | kind | truth Mbit/s | method | " + ("family | " if both else "")
              + "estimate | range | error | time s | probe kB | stop | iperf3 TCP |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if both else "")]
    for r in rows:
        err = "" if r["error_pct"] == "" else f"{r['error_pct']:+.1f}%"
        el = "" if r["elapsed_s"] == "" else f"{r['elapsed_s']:.1f}"
        lines.append(
            f"| {fmt(r['rate_bps'], 1e6, 0)}M | {r['util_pct']}% | {r['kind']} "
            f"| {fmt(r['truth_bps'])} | {r['method']} | "
            + (f"IPv{r['family']} | " if both else "") + f"{fmt(r['estimate_bps'])} "
            f"| {fmt(r['low_bps'])}..{fmt(r['high_bps'])} | {err} | {el} "
            f"| {fmt(r['probe_bytes'], 1e3, 0)} | {r['stop_reason']} "
            f"| {fmt(r['iperf3_tcp_bps'])} |")
    with open(os.path.join(args.out, base + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
