#!/usr/bin/env python3
"""Avail-bw with open-port vs closed-port markers on one lab path (50 Mbit/s,
20 Mbit/s of UDP cross traffic, 443 listening; the open-ports-only firewall
toggled between runs). Root, lab: flock /tmp/lw-lab.lock python3 scripts/open_port_availbw_compare.py"""
import sys, json, time, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab
BIN = os.environ.get("LINKWIDTH_BIN", "build/linkwidth")
spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)])
with lab.Lab(spec) as L:
    L.listen(443)
    x = L.cross(2, "udp", rate=20e6, cpu=1)
    time.sleep(0.5)
    kinds = sys.argv[1:] or ["open", "closed"] * 4  # e.g.: open open closed open
    for kind in kinds:
        L.set_target_open_only((443,) if kind == "open" else None)
        w = L.cross_window(2)
        p = L.run_in_prober(["taskset", "-c", "0", BIN, "measure", L.target_ip, "--no-hops", "--json"], timeout=90)
        cross = w.stop().bps
        d = json.loads(p.stdout)
        truth = L.ground_truth_capacity(ip_len=1500) - cross
        print(kind, d.get("marker_kind"), "cap", round(d["capacity_bps"]/1e6, 2), "ab", round(d["availbw_bps"]/1e6, 2),
              "truth", round(truth/1e6, 2), "err %+.1f%%" % (100*(d["availbw_bps"]/truth-1)),
              "range", round(d["availbw_low_bps"]/1e6,1), round(d["availbw_high_bps"]/1e6,1), d["stop_reason"],
              [w["code"] for w in d["warnings"]], flush=True)
    x.stop()
