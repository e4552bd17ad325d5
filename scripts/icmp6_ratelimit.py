#!/usr/bin/env python3
"""Measures how many ICMPv6 time-exceeded errors a Linux router of the lab
sends (the model of routers' ICMP rate limits in `linkwidth hops`).

Builds a dual-stack lab (prober - r1 - target), reads r1's
net.ipv6.icmp.ratelimit and the IPv4 twins, then from the prober sends UDP
datagrams with hop limit 1 (they expire at r1) and counts the time-exceeded
replies: one back-to-back burst (the bucket's depth), then a steady stream at
a rate well above the limit for a few seconds (the refill rate).  Prints JSON.

    flock /tmp/lw-lab.lock python3 scripts/icmp6_ratelimit.py [--family 6|4]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402

PROBE = r"""
import socket, sys, time
fam, dst, burst, rate, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
v6 = fam == "6"
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
if v6:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 1)
    r = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    te = 3
else:
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 1)
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    te = 11
r.setblocking(False)
def count(until):
    n = 0
    while time.monotonic() < until:
        try:
            b = r.recv(2000)
        except BlockingIOError:
            time.sleep(0.001)
            continue
        t = b[0] if v6 else b[(b[0] & 15) * 4]
        n += t == te
    return n
time.sleep(3)                          # let any bucket fill up
for _ in range(burst):
    s.sendto(b"x", (dst, 33434))
got_burst = count(time.monotonic() + 1.0)
time.sleep(2)
t0 = time.monotonic(); sent = 0
while time.monotonic() - t0 < secs:
    s.sendto(b"x", (dst, 33434)); sent += 1
    time.sleep(1.0 / rate)
got_stream = count(time.monotonic() + 0.5)
print(got_burst, sent, got_stream, round(time.monotonic() - t0, 3))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", type=int, choices=(4, 6), default=6)
    ap.add_argument("--burst", type=int, default=40)
    ap.add_argument("--rate", type=float, default=400.0, help="stream rate, packets/s")
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args()
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=None)], ipv6=True)
    with lab.Lab(spec) as L:
        sysctl = {}
        for key in ("net/ipv6/icmp/ratelimit", "net/ipv4/icmp_ratelimit",
                    "net/ipv4/icmp_msgs_per_sec", "net/ipv4/icmp_msgs_burst"):
            cp = L.exec("r1", ["cat", f"/proc/sys/{key}"])
            sysctl[key.replace("/", ".")] = cp.stdout.strip() or None
        dst = L.target_ip6 if a.family == 6 else L.target_ip
        cp = L.exec(0, [sys.executable, "-c", PROBE, str(a.family), dst, str(a.burst),
                        str(a.rate), str(a.seconds)], timeout=60)
        if cp.returncode != 0:
            sys.exit(f"probe failed: {cp.stderr}")
        burst_got, sent, stream_got, secs = cp.stdout.split()
        print(json.dumps({
            "family": a.family, "kernel": os.uname().release, "router_sysctls": sysctl,
            "burst_sent": a.burst, "burst_answered": int(burst_got),
            "stream_sent": int(sent), "stream_seconds": float(secs),
            "stream_answered": int(stream_got),
            "stream_answered_per_s": round(int(stream_got) / float(secs), 2),
        }, indent=1))


if __name__ == "__main__":
    main()
