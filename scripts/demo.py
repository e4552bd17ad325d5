#!/usr/bin/env python3
"""Demo: build a small lab with a known bottleneck and cross traffic, and
measure it with `linkwidth measure` (capacity, bottleneck hop, avail-bw).

prober --(unshaped)-- r1 --(50 Mbit/s, 20 Mbit/s of UDP cross traffic)-- r2
       --(200 Mbit/s)-- target

Prints the ground truth beside each estimate: the narrow link's IP-layer
capacity, its index, and the capacity minus the cross traffic measured on its
counters during the run. The lab is dual-stack: the last measured run goes to
the target's IPv6 address (2001:2::/48) over the same links. Everything is
torn down at the end, also on failure or Ctrl-C.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "linkwidth"))
    ap.add_argument("--rates", default="0,50M,200M",
                    help="per-link rates prober->target, 0 = unshaped (default 0,50M,200M)")
    ap.add_argument("--cross", default="20M",
                    help="constant-rate UDP cross traffic (IP layer) on the narrow link, 0 = none")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    rates = [None if r in ("0", "") else lab.parse_rate(r) for r in args.rates.split(",")]
    cross = lab.parse_rate(args.cross) if args.cross not in ("0", "") else 0
    spec = lab.Spec(links=[lab.Link(rate=r) for r in rates], ipv6=True)
    # On a small machine the cross-traffic generator would otherwise share the
    # prober's CPU and stall while it sends: keep them apart when we can.
    pin = (os.cpu_count() or 1) >= 2
    with lab.Lab(spec) as L:
        C = L.ground_truth_capacity(ip_len=1500)
        narrow = L.narrow_link()
        print(f"lab: {len(rates)} links, rates {args.rates} (prober -> target {L.target_ip}), "
              f"{cross / 1e6:.0f} Mbit/s of UDP cross traffic on link {narrow}")
        print(f"ground truth: narrow link {narrow} (bottleneck hop {narrow}), IP-layer capacity "
              f"{C / 1e6:.2f} Mbit/s (configured rate x 1500/1514)\n")
        x = (L.cross(narrow, "udp", rate=cross * 1472 / 1500, cpu=1 if pin else None)
             if cross else None)
        try:
            targets = [(f"run {i + 1}", L.target_ip) for i in range(args.runs)]
            targets.append(("IPv6 run", L.target_ip6))
            for name, target in targets:
                w = L.cross_window(narrow) if x else None
                cmd = [args.bin, "measure", target, "--json"]
                p = L.run_in_prober((["taskset", "-c", "0"] if pin else []) + cmd, timeout=90)
                xb = w.stop().bps if w else 0.0
                doc = json.loads(p.stdout)
                if p.returncode != 0 or doc.get("availbw_bps") is None:
                    print(f"{name} ({target}): error: {doc.get('error') or doc.get('warnings')}")
                    continue
                c, a = doc["capacity_bps"], doc["availbw_bps"]
                truth_a = C - xb
                if target == L.target_ip6:
                    print(f"\n{name}: linkwidth measure {target} (from {doc.get('source')})")
                print(f"{name}: capacity {c / 1e6:6.2f} Mbit/s (truth {C / 1e6:.2f}, "
                      f"{100 * (c / C - 1):+.1f}%)   bottleneck hop {doc.get('bottleneck_hop')} "
                      f"(truth {narrow})   avail-bw {a / 1e6:6.2f} Mbit/s "
                      f"[{doc['availbw_low_bps'] / 1e6:.2f}, {doc['availbw_high_bps'] / 1e6:.2f}] "
                      f"(truth {truth_a / 1e6:.2f}, {100 * (a / truth_a - 1):+.1f}%)   "
                      f"{doc['elapsed_s']:.1f} s, {doc['probe_bytes'] / 1e6:.1f} MB")
            print("\nhuman-readable output of one more run:\n")
            p = L.run_in_prober([args.bin, "measure", L.target_ip], timeout=90)
            print(p.stdout + p.stderr)
        finally:
            if x:
                x.stop()


if __name__ == "__main__":
    main()
