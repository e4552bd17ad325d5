#!/usr/bin/env python3
"""Capacity benchmark: error, time and probe bytes of `linkwidth capacity`
against shaped bottlenecks, with iperf3's TCP throughput in the same lab.

For each rate: a lab prober --(unshaped)-- r1 --(rate)-- target, `--runs`
runs of linkwidth, then one iperf3 TCP run (cubic, this VM defaults to BBR).
Ground truth is the IP-layer capacity R * 1500/1514 (the same over IPv6:
1500-byte IP datagrams, header included). Writes
results/capacity_benchmark.csv and results/capacity_benchmark.md; with
--family 6 the lab is dual-stack and everything (linkwidth, the UDP flood,
iperf3) runs over IPv6, into capacity_benchmark_ipv6.{csv,md} unless --tag
says otherwise. --family both: a dual-stack lab where each run measures the
target's IPv4 and its IPv6 address back to back (the order alternates run by
run), with IPv4 and IPv6 columns, into capacity_benchmark_families.{csv,md}.
Reads only linkwidth's JSON output.
"""
import argparse
import csv
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402
from benchlib import iperf3_tcp  # noqa: E402


def shaper_delivered(L, rate, family=4):
    """What the bottleneck shaper really carries when flooded: UDP at 1.3 x R
    across link 2, measured by the sink's interface counters (IP layer)."""
    with L.cross(2, "udp", rate=1.3 * rate, family=family) as x:
        time.sleep(1.0)
        return x.measure(2.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="10M,50M,100M,300M,1G")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iperf-seconds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "linkwidth"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results"))
    ap.add_argument("--tool-args", default="", help="extra linkwidth arguments")
    ap.add_argument("--burst", type=int, default=3028, help="tbf burst of the bottleneck (bytes)")
    ap.add_argument("--network-cpu", type=int, default=None,
                    help="process lab forwarding on this CPU (RPS) and pin the prober elsewhere")
    ap.add_argument("--tag", default=None,
                    help="suffix for the output file names (default: '' or '_ipv6')")
    ap.add_argument("--family", choices=("4", "6", "both"), default="4",
                    help="IP version of the paths (6: dual-stack lab, IPv6 target; both: "
                    "each run measures both addresses of the target)")
    args = ap.parse_args()
    families = [4, 6] if args.family == "both" else [int(args.family)]
    both = len(families) == 2
    if args.tag is None:
        args.tag = "_families" if both else "_ipv6" if families == [6] else ""
    fam0 = families[0]
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for rate_text in args.rates.split(","):
        rate = lab.parse_rate(rate_text)
        spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=rate, burst=args.burst)],
                        network_cpu=args.network_cpu, ipv6=6 in families)
        with lab.Lab(spec) as L:
            targets = {4: L.target_ip, 6: L.target_ip6 if 6 in families else None}
            target = targets[fam0]
            truth = L.ground_truth_capacity(ip_len=1500)
            delivered = shaper_delivered(L, rate, fam0)
            order = [(run, fam) for run in range(args.runs)
                     for fam in (families if run % 2 == 0 else families[::-1])]
            for run, fam in order:
                p = L.run_in_prober([args.bin, "capacity", targets[fam], "--json",
                                     *args.tool_args.split()], timeout=120)
                doc = json.loads(p.stdout)
                est = doc.get("capacity_bps")
                rows.append({
                    "rate_bps": rate, "truth_bps": truth, "run": run, "family": fam,
                    "exit": p.returncode,
                    "estimate_bps": est if est is not None else "",
                    "low_bps": doc.get("capacity_low_bps") or "",
                    "high_bps": doc.get("capacity_high_bps") or "",
                    "error_pct": 100 * (est / truth - 1) if est else "",
                    "elapsed_s": doc.get("elapsed_s", ""),
                    "probe_bytes": doc.get("probe_bytes", ""),
                    "trains_sent": doc.get("trains_sent", ""),
                    "trains_used": doc.get("trains_used", ""),
                    "stop_reason": doc.get("stop_reason", ""),
                    "warnings": " ".join(w["code"] for w in doc.get("warnings", [])),
                    "iperf3_tcp_bps": "",
                    "shaper_delivered_bps": delivered,
                })
                print(f"{rate_text}: run {run} IPv{fam}: {rows[-1]['error_pct']!s:.6}% "
                      f"{rows[-1]['elapsed_s']!s:.5} s", flush=True)
            ip = iperf3_tcp(L, args.iperf_seconds, target=target)
            for r in rows:
                if r["rate_bps"] == rate:
                    r["iperf3_tcp_bps"] = ip
    csv_path = os.path.join(args.out, f"capacity_benchmark{args.tag}.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)

    cmd = "python3 scripts/bench_capacity.py " + " ".join(sys.argv[1:])
    lines = [
        "# Capacity benchmark"
        + (": IPv4 and IPv6 on the same paths" if both else " (IPv6)" if fam0 == 6 else ""),
        "",
        f"Produced by `{cmd.strip()}` on {datetime.date.today()} "
        f"({os.cpu_count()} cores). Raw rows: `capacity_benchmark{args.tag}.csv`.",
        "",
        f"Lab: prober --(unshaped veth)-- r1 --(tbf rate R, burst {args.burst})-- target"
        + (f"; forwarding on CPU {args.network_cpu} (RPS), prober pinned to the other CPU"
           if args.network_cpu is not None else "") + ".",
        "Truth is the configured IP-layer capacity R x 1500/1514. 'Shaper delivers' is what",
        "the shaper really carried under a UDP flood at 1.3 R (sink interface counters, IP",
        "layer): where it falls short of the truth, the shaper, not the link model, is the",
        "limit on this VM. iperf3: one TCP flow, cubic (this VM defaults to BBR), "
        f"{args.iperf_seconds} s, goodput (at most R x 1448/1514"
        + (", R x 1428/1514 over IPv6" if 6 in families else "") + ")."
        + (" Everything runs over IPv6 (dual-stack lab, 2001:2::/48)." if families == [6]
           else "")
        + (" Dual-stack lab (2001:2::/48 beside 198.18.0.0/15): each run measured the "
           "target's IPv4 and IPv6 addresses back to back (IPv4 first in even runs, IPv6 "
           "first in odd ones); the same 1500-byte IP datagrams, 40-byte IPv6 headers "
           "counted. The UDP flood and iperf3 ran over IPv4." if both else ""),
        "",
        "| rate | " + ("family | " if both else "") + "truth Mbit/s | shaper delivers "
        "| median estimate | median abs error | max abs error | median time s "
        "| median probe kB | iperf3 TCP Mbit/s |",
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if both else ""),
    ]
    for rate_text in args.rates.split(","):
        rate = lab.parse_rate(rate_text)
        for fam in families:
            rs = [r for r in rows if r["rate_bps"] == rate and r["family"] == fam]
            ok = [r for r in rs if r["error_pct"] != ""]
            col = f"IPv{fam} | " if both else ""
            if not ok:
                lines.append(f"| {rate_text} | {col}| | no estimate | | | | | |")
                continue
            errs = [abs(r["error_pct"]) for r in ok]
            lines.append(
                f"| {rate_text} | {col}{rs[0]['truth_bps'] / 1e6:.2f} "
                f"| {rs[0]['shaper_delivered_bps'] / 1e6:.2f} "
                f"| {statistics.median(r['estimate_bps'] for r in ok) / 1e6:.2f} "
                f"| {statistics.median(errs):.2f}% | {max(errs):.2f}% "
                f"| {statistics.median(r['elapsed_s'] for r in ok):.2f} "
                f"| {statistics.median(r['probe_bytes'] for r in ok) / 1e3:.0f} "
                f"| {rs[0]['iperf3_tcp_bps'] / 1e6:.1f} |")
            if len(ok) < len(rs):
                lines[-1] += f" ({len(rs) - len(ok)} runs without estimate)"
    md_path = os.path.join(args.out, f"capacity_benchmark{args.tag}.md")
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
