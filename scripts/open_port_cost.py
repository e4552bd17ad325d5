#!/usr/bin/env python3
"""What open-port markers cost the target (README, "Open-port markers").

Builds prober - r1 -(50 Mbit/s)- target, with only 443 open on the target
(nftables drops every other TCP packet to it), runs each command with its
defaults and --save-pcap, and prints per command: the SYN/ACKs the target
sent (from the capture), the request sockets our closer RSTs reset
(TcpExtEmbryonicRsts), SYN cookies sent and listen-queue overflows (nstat in
the target's namespace), the prober kernel's own 40-byte RSTs, the half-open
connections left in the target (ss, conntrack), and the run's time.

Root, lab: flock /tmp/lw-lab.lock python3 scripts/open_port_cost.py [--bin PATH]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402

COUNTERS = ("TcpExtEmbryonicRsts", "TcpExtSyncookiesSent", "TcpExtListenOverflows",
            "TcpExtListenDrops", "TcpExtTCPReqQFullDoCookies")
COMMANDS = (["capacity"], ["measure", "--no-hops"], ["measure"], ["hops"])


def nstat(L):
    cp = L.exec("target", ["nstat", "-az", *COUNTERS])
    return {l.split()[0]: int(l.split()[1]) for l in cp.stdout.splitlines()
            if l and not l.startswith("#")}


def count(cap, flt):
    cp = subprocess.run(["tcpdump", "-nr", cap, flt], capture_output=True, text=True)
    return len(cp.stdout.splitlines())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.environ.get("LINKWIDTH_BIN",
                                                    os.path.join(root, "build", "linkwidth")))
    a = ap.parse_args()
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)])
    rows = []
    with lab.Lab(spec) as L, tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        L.listen(443)
        L.set_target_open_only((443,))
        me = L.prober_ip
        for cmd in COMMANDS:
            before = nstat(L)
            cap = os.path.join(d, "run.pcap")
            p = L.run_in_prober([a.bin, cmd[0], L.target_ip, *cmd[1:], "--json",
                                 "--save-pcap", cap], timeout=120)
            doc = json.loads(p.stdout)
            after = nstat(L)
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS}
            rows.append({
                "command": " ".join(cmd), "exit": p.returncode,
                "marker_kind": doc.get("marker_kind"),
                "elapsed_s": doc.get("elapsed_s"),
                "synacks": count(cap, f"src host {L.target_ip} and tcp[13] & 0x12 == 0x12"),
                "embryonic_rsts": delta["TcpExtEmbryonicRsts"],
                "syncookies": delta["TcpExtSyncookiesSent"] + delta["TcpExtTCPReqQFullDoCookies"],
                "listen_overflows": delta["TcpExtListenOverflows"] + delta["TcpExtListenDrops"],
                "closers": count(cap, f"src host {me} and tcp[13] & 0x04 != 0 and ip[2:2] == 60"),
                "kernel_rsts": count(cap, f"src host {me} and tcp[13] & 0x04 != 0 and ip[2:2] == 40"),
                "half_open": len(L.half_open("target")),
            })
    print("| command | marker_kind | SYN/ACKs | reset by our RSTs (EmbryonicRsts) | SYN cookies "
          "| listen overflows | inserted closers | prober kernel RSTs | half-open left | time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['command']}` | {r['marker_kind']} | {r['synacks']} | {r['embryonic_rsts']} "
              f"| {r['syncookies']} | {r['listen_overflows']} | {r['closers']} "
              f"| {r['kernel_rsts']} | {r['half_open']} | {r['elapsed_s']:.1f} s |")


if __name__ == "__main__":
    main()
