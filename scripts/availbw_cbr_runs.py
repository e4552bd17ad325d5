#!/usr/bin/env python3
"""N runs of `linkwidth measure` on prober --(unshaped)-- r1 --(RATE)-- target
with constant-rate UDP cross traffic CROSS on the shaped link (the setting of
tests/lab/test_availbw.py), one line per run with the avail-bw error against
the truth (IP capacity minus the cross traffic on the link's counters), the
crossing's capacity source and the share of send-stalled trains; each run's
JSON document goes to --dump DIR. linkwidth on CPU 0, iperf3 on CPU 1.

    flock /tmp/lw-lab.lock python3 scripts/availbw_cbr_runs.py 100e6 40e6 --runs 5
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rate", type=float)
    ap.add_argument("cross", type=float, help="iperf3 -b (UDP payload bit/s)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.environ.get("LINKWIDTH_BIN",
                                                    os.path.join(ROOT, "build", "linkwidth")))
    ap.add_argument("--dump", default="")
    ap.add_argument("extra", nargs="*", help="more linkwidth measure options (after --)")
    a = ap.parse_args()
    errs = []
    with lab.Lab(lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=a.rate)])) as L:
        x = L.cross(2, "udp", rate=a.cross, cpu=1)
        try:
            time.sleep(0.5)
            for i in range(a.runs):
                w = L.cross_window(2)
                p = L.run_in_prober(["taskset", "-c", "0", a.bin, "measure", L.target_ip,
                                     "--json", *a.extra], timeout=120)
                truth = L.ground_truth_capacity(ip_len=1500) - w.stop().bps
                doc = json.loads(p.stdout)
                if a.dump:
                    os.makedirs(a.dump, exist_ok=True)
                    with open(os.path.join(a.dump, f"run{i}.json"), "w") as f:
                        json.dump({"truth_bps": truth, "doc": doc}, f)
                av = doc.get("availbw_bps")
                if av is None:
                    print(f"run {i}: exit {p.returncode} no estimate "
                          f"{json.dumps(doc.get('error'))}", flush=True)
                    continue
                trains = [t for r in doc["rates"] for t in r["trains"]]
                stalls = sum(t["verdict"] == "send_stall" for t in trains)
                held = doc["availbw_low_bps"] <= truth <= doc["availbw_high_bps"]
                errs.append(av / truth - 1)
                print(f"run {i}: C {doc['capacity_bps'] / 1e6:.2f} avail-bw {av / 1e6:.2f} "
                      f"[{doc['availbw_low_bps'] / 1e6:.2f}, {doc['availbw_high_bps'] / 1e6:.2f}] "
                      f"truth {truth / 1e6:.2f} err {errs[-1]:+.1%} held {held} "
                      f"source {doc.get('crossing_capacity_source')} "
                      f"stalled {stalls}/{len(trains)}", flush=True)
        finally:
            x.stop()
    if errs:
        print(f"median |err| {statistics.median(abs(e) for e in errs):.1%}")


if __name__ == "__main__":
    main()
