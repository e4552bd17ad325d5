#!/usr/bin/env python3
"""Bottleneck-hop benchmark: how often `linkwidth hops` names the right hop.

For each chain length H (links) and each position b of the narrow link: a lab
prober --l1-- r1 --l2-- ... --lH-- target where link b has --narrow-rate and
every other link --other-rate; `--runs` runs without cross traffic, then
`--runs` runs with Poisson cross traffic (--cross-rate, measured at the sink)
on another link: the one right before the narrow link (it spreads the train
before the narrow link), or right after it when b = 1. A run is right when
bottleneck_hop == b. Also recorded: the rate reported at hop b against the
IP-layer truth R*1500/1514, run time and probe bytes.

Writes one CSV row per run to results/hops_benchmark<tag>.csv (appending with
--append, so a long benchmark can be split into short lab-lock holds, e.g. one
chain length per call) and regenerates results/hops_benchmark<tag>.md from the
whole CSV. Reads only linkwidth's JSON output.
"""
import argparse
import csv
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402

FIELDS = ["chain_links", "narrow_link", "cross_link", "cross_bps_measured", "run",
          "exit_code", "bottleneck_hop", "right", "confidence", "rate_at_narrow_bps",
          "truth_bps", "rate_error", "hops_answered", "trains_sent", "elapsed_s",
          "probe_bytes", "wall_s", "command"]


def run_tool(L, binary, tool_args):
    cmd = [binary, "hops", L.target_ip, "--json", *tool_args]
    t0 = time.monotonic()
    p = L.run_in_prober(cmd, timeout=120)
    wall = time.monotonic() - t0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {"error": {"message": p.stderr.strip()}}
    return p.returncode, doc, wall, cmd


def row_for(L, H, b, cross_link, cross_bps, i, code, doc, wall, cmd):
    truth = L.ground_truth_capacity(ip_len=1500)
    hops = doc.get("hops") or []
    rate = hops[b - 1]["rate_bps"] if len(hops) >= b else None
    found = doc.get("bottleneck_hop")
    return {
        "chain_links": H, "narrow_link": b, "cross_link": cross_link or "",
        "cross_bps_measured": f"{cross_bps:.0f}" if cross_bps else "",
        "run": i, "exit_code": code, "bottleneck_hop": found if found else "",
        "right": int(found == b), "confidence": doc.get("bottleneck_confidence", ""),
        "rate_at_narrow_bps": f"{rate:.0f}" if rate else "",
        "truth_bps": f"{truth:.0f}",
        "rate_error": f"{rate / truth - 1:.4f}" if rate else "",
        "hops_answered": sum(1 for h in hops if h.get("replies")),
        "trains_sent": doc.get("trains_sent", ""),
        "elapsed_s": f"{doc['elapsed_s']:.3f}" if "elapsed_s" in doc else "",
        "probe_bytes": doc.get("probe_bytes", ""),
        "wall_s": f"{wall:.3f}",
        "command": " ".join(cmd[:1] + ["hops", "TARGET"] + cmd[4:]),
    }


def summarize(csv_path, md_path, cmds_path):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    with open(cmds_path) as f:
        invocations = [l.strip() for l in f if l.strip()]
    out = ["# Bottleneck-hop benchmark (`linkwidth hops`)", "",
           "Produced by these commands (each under `flock /tmp/lw-lab.lock`; the CSV "
           "accumulates them with --append, this summary is regenerated from the whole CSV):", ""]
    out += [f"    {c}" for c in invocations]
    out += ["",
           f"Generated {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}"
           f"; {len(rows)} runs; tool command per run in the CSV.", "",
           "A run is right when `bottleneck_hop` equals the narrow link's index. Rate error: the "
           "rate reported at the narrow hop against R*1500/1514. Time: linkwidth's own "
           "`elapsed_s`; bytes: `probe_bytes`.", "",
           "| narrow link (IP) | links | cross traffic | right | runs | per position (right/runs) | "
           "median abs rate error | median time s | median probe bytes |",
           "|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in rows:
        key = (round(float(r["truth_bps"]) / 1e6, 1), int(r["chain_links"]), bool(r["cross_link"]))
        groups.setdefault(key, []).append(r)
    total_right = total = 0
    for (truth, H, cross), rs in sorted(groups.items()):
        right = sum(int(r["right"]) for r in rs)
        total_right += right
        total += len(rs)
        pos = []
        for b in sorted({int(r["narrow_link"]) for r in rs}):
            rb = [r for r in rs if int(r["narrow_link"]) == b]
            pos.append(f"{b}: {sum(int(r['right']) for r in rb)}/{len(rb)}")
        errs = [abs(float(r["rate_error"])) for r in rs if r["rate_error"]]
        times = [float(r["elapsed_s"]) for r in rs if r["elapsed_s"]]
        nbytes = [int(r["probe_bytes"]) for r in rs if r["probe_bytes"]]
        xs = [float(r["cross_bps_measured"]) for r in rs if r["cross_bps_measured"]]
        cross_txt = f"Poisson, {statistics.median(xs) / 1e6:.0f} Mbit/s measured" if xs else "none"
        out.append(
            f"| {truth} Mbit/s | {H} | {cross_txt} | {right / len(rs):.0%} | {len(rs)} | {', '.join(pos)} | "
            f"{statistics.median(errs):.1%} | " if errs else
            f"| {truth} Mbit/s | {H} | {cross_txt} | {right / len(rs):.0%} | {len(rs)} | "
            f"{', '.join(pos)} | - | ")
        out[-1] += (f"{statistics.median(times):.2f} | " if times else "- | ")
        out[-1] += (f"{statistics.median(nbytes):.0f} |" if nbytes else "- |")
    if total:
        out += ["", f"Overall: {total_right}/{total} runs right ({total_right / total:.0%})."]
    with open(md_path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hops", default="3,4,5,6", help="chain lengths (links)")
    ap.add_argument("--positions", default="", help="narrow-link positions (default: all)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--narrow-rate", default="50M")
    ap.add_argument("--other-rate", default="200M")
    ap.add_argument("--cross-rate", default="100M")
    ap.add_argument("--no-cross", action="store_true", help="skip the cross-traffic runs")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "linkwidth"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results"))
    ap.add_argument("--tool-args", default="", help="extra linkwidth arguments")
    ap.add_argument("--tag", default="", help="suffix for the output file names")
    ap.add_argument("--append", action="store_true", help="add to an existing CSV")
    ap.add_argument("--summarize-only", action="store_true",
                    help="only regenerate the .md from the CSV")
    args = ap.parse_args()
    tool_args = shlex.split(args.tool_args)
    os.makedirs(args.out, exist_ok=True)
    csv_path = os.path.join(args.out, f"hops_benchmark{args.tag}.csv")
    md_path = os.path.join(args.out, f"hops_benchmark{args.tag}.md")
    cmds_path = os.path.join(args.out, f"hops_benchmark{args.tag}.commands")
    if args.summarize_only:
        summarize(csv_path, md_path, cmds_path)
        return
    new = not (args.append and os.path.exists(csv_path))
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    with open(cmds_path, "w" if new else "a") as f:
        f.write("python3 scripts/bench_hops.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
                + f"    # at commit {commit or '?'}\n")
    with open(csv_path, "w" if new else "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        for H in [int(x) for x in args.hops.split(",")]:
            positions = ([int(x) for x in args.positions.split(",")] if args.positions
                         else range(1, H + 1))
            for b in positions:
                if b > H:
                    continue
                links = [lab.Link(rate=args.narrow_rate if i == b else args.other_rate)
                         for i in range(1, H + 1)]
                cross_link = b - 1 if b > 1 else b + 1
                spec = lab.Spec(links=links, cross_links=(cross_link,) if not args.no_cross
                                and cross_link <= H else ())
                with lab.Lab(spec) as L:
                    assert L.narrow_link() == b
                    for i in range(args.runs):
                        code, doc, wall, cmd = run_tool(L, args.bin, tool_args)
                        w.writerow(row_for(L, H, b, None, 0, i, code, doc, wall, cmd))
                    if not args.no_cross and cross_link <= H:
                        with L.cross(cross_link, "poisson", rate=args.cross_rate) as x:
                            time.sleep(0.5)
                            for i in range(args.runs):
                                code, doc, wall, cmd = run_tool(L, args.bin, tool_args)
                                w.writerow(row_for(L, H, b, cross_link, x.measured_bps(), i,
                                                   code, doc, wall, cmd))
                f.flush()
                print(f"H={H} narrow={b} done", flush=True)
    summarize(csv_path, md_path, cmds_path)


if __name__ == "__main__":
    main()
