#!/usr/bin/env python3
"""Demo: build a small lab with a known bottleneck and measure it with linkwidth.

prober --(unshaped)-- r1 --(50 Mbit/s)-- r2 --(200 Mbit/s)-- target

Prints the ground truth (IP-layer capacity of the narrow link) beside the
estimate. Everything is torn down at the end, also on failure or Ctrl-C.
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
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rates = [None if r in ("0", "") else lab.parse_rate(r) for r in args.rates.split(",")]
    spec = lab.Spec(links=[lab.Link(rate=r) for r in rates])
    with lab.Lab(spec) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        print(f"lab: {len(rates)} links, rates {args.rates} (prober -> target {L.target_ip})")
        print(f"ground truth: narrow link {L.narrow_link()}, IP-layer capacity "
              f"{truth / 1e6:.2f} Mbit/s (configured rate x 1500/1514)\n")
        for i in range(args.runs):
            p = L.run_in_prober([args.bin, "capacity", L.target_ip, "--json"], timeout=60)
            doc = json.loads(p.stdout)
            if p.returncode != 0:
                print(f"run {i + 1}: error: {doc.get('error')}")
                continue
            est = doc["capacity_bps"]
            print(f"run {i + 1}: estimate {est / 1e6:7.2f} Mbit/s "
                  f"[{doc['capacity_low_bps'] / 1e6:.2f}, {doc['capacity_high_bps'] / 1e6:.2f}]"
                  f"   truth {truth / 1e6:7.2f}   error {100 * (est / truth - 1):+.2f}%"
                  f"   {doc['elapsed_s']:.2f} s, {doc['probe_bytes'] / 1e3:.0f} kB, "
                  f"{doc['trains_used']}/{doc['trains_sent']} trains")
        print("\nhuman-readable output of one more run:\n")
        p = L.run_in_prober([args.bin, "capacity", L.target_ip], timeout=60)
        print(p.stdout + p.stderr)


if __name__ == "__main__":
    main()
