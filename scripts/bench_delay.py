#!/usr/bin/env python3
"""Fidelity of the lab's delay element (tools/delay.cpp, lw_delay).

For each one-way delay D (1, 100, 300 ms) and packet rate (1k, 8k, 20k
packets/s): a one-link lab prober --[lw_delay D/D]-- target, Poisson UDP from
lw_crossgen at that mean rate through the delay node, and tcpdump (nanosecond
timestamps) on both sides of it: the prober's ``dn`` (where a frame enters the
wire towards the delay node) and the target's ``up`` (where it comes out).
Frames are matched in order (the element is FIFO; the counts and the sequence
of sizes must agree or the case is marked unmatched). Per frame:

  delay error   = (t_out - t_in) - D
  spacing error = (t_out[k] - t_out[k-1]) - (t_in[k] - t_in[k-1])

Poisson arrivals include gaps far below 10 us, the hard case for spacing.
1k and 8k packets/s use 1500-byte packets (8k = ~98 Mbit/s: the forward path
at 100 Mbit/s); 20k packets/s uses 64-byte packets (replies and ACKs on the
reverse path), and the "+rev" cases run 8k forward and 20k reverse at once.
lw_delay runs unpinned (SCHED_FIFO); the routers and the target process arrivals on CPU 1
(network_cpu), the generators run on CPU 0.

    flock /tmp/lw-lab.lock python3 scripts/bench_delay.py [--seconds 3] [--out results/delay_fidelity]
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402
from lablib.pcap import read_ipv4  # noqa: E402
from lablib.traffic import crossgen_path  # noqa: E402

PORT = 9
DELAYS_MS = (1, 100, 300)
# (name, fwd packets/s, fwd IP size, rev packets/s, rev IP size)
RATES = (("1k", 1000, 1500, 0, 0), ("8k", 8000, 1500, 0, 0), ("20k", 20000, 64, 0, 0),
         ("8k+rev20k", 8000, 1500, 20000, 64))


def read_pcap(path):
    """[(ts_ns, src_ip_bytes, ip_len)] of a nanosecond pcap."""
    return [(ts, ip[12:16], struct.unpack(">H", ip[2:4])[0])
            for ts, ip in read_ipv4(path, need_nanos=True)]


def pct(xs, q):
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def errors(src, dst, delay_ns):
    """Per-frame delay and spacing errors (ns) of in-order matched frames."""
    if len(src) != len(dst) or any(a[2] != b[2] for a, b in zip(src, dst)):
        return None
    delay = [b[0] - a[0] - delay_ns for a, b in zip(src, dst)]
    spacing = [(dst[k][0] - dst[k - 1][0]) - (src[k][0] - src[k - 1][0])
               for k in range(1, len(src))]
    in_gap = [src[k][0] - src[k - 1][0] for k in range(1, len(src))]
    return delay, spacing, in_gap


def summary(delay, spacing, in_gap):
    us = lambda v: None if v is None else round(v / 1000, 2)  # noqa: E731
    a = [abs(x) for x in spacing]
    return {
        "frames": len(delay),
        "delay_err_us": {k: us(pct(delay, q)) for k, q in
                         (("min", 0), ("p50", .5), ("p99", .99), ("p999", .999), ("max", 1))},
        "spacing_abs_err_us": {k: us(pct(a, q)) for k, q in
                               (("p50", .5), ("p90", .9), ("p99", .99), ("p999", .999), ("max", 1))},
        "spacing_over_10us_frac": round(sum(x > 10_000 for x in a) / max(1, len(a)), 5),
        # pairs that arrived at least 20 us apart (a 1500-byte frame takes 12 us
        # at 1 Gbit/s): back-to-back arrivals wait for the previous send
        "spacing_gap20_abs_err_us": {k: us(pct(g, q)) for g in
                                     [[x for x, d in zip(a, in_gap) if d >= 20_000]]
                                     for k, q in (("p50", .5), ("p99", .99), ("p999", .999))},
        "spacing_gap20_over_10us_frac": round(
            sum(x > 10_000 for x, d in zip(a, in_gap) if d >= 20_000)
            / max(1, sum(d >= 20_000 for d in in_gap)), 5),
    }


def tcpdump(L, node, dev, path):
    p = L.popen(node, ["tcpdump", "-i", dev, "-n", "-s", "64", "-B", "65536", "-U", "--immediate-mode",
                       "--time-stamp-precision=nano", "-w", path, f"udp port {PORT}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    line = p.stderr.readline().decode(errors="replace")
    if "listening" not in line:
        raise RuntimeError(f"tcpdump on {node}:{dev}: {line.strip()}")
    return p


def stop_tcpdump(L, p):
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=10)[1].decode(errors="replace")
    L.stop_process(p)
    for line in err.splitlines():
        if "dropped by kernel" in line and not line.startswith("0 "):
            return line.strip()
    return None


def run_case(delay_ms, name, f_pps, f_size, r_pps, r_size, seconds, tmp):
    spec = lab.Spec(links=[lab.Link(rate=None, delay_ms=delay_ms)], network_cpu=1)
    with lab.Lab(spec) as L:
        for node in ("prober", "target"):
            L.exec(node, ["sh", "-c", "nft add table ip bd && nft add chain ip bd in "
                          "'{ type filter hook input priority 0; }' && "
                          f"nft add rule ip bd in udp dport {PORT} drop"], check=True)
        # resolve ARP through the delay node before the clocks start
        L.exec("prober", ["ping", "-c", "1", "-W", "2", L.target_ip])
        pin = os.path.join(tmp, "prober.pcap")
        pout = os.path.join(tmp, "target.pcap")
        dumps = [tcpdump(L, "prober", "dn", pin), tcpdump(L, "target", "up", pout)]
        gens = [L.popen("prober", ["taskset", "-c", "0", crossgen_path(), L.target_ip, str(PORT),
                                   str(f_pps * f_size * 8), str(seconds), "1", f"{f_size}:1"])]
        if r_pps:
            gens.append(L.popen("target", ["taskset", "-c", "0", crossgen_path(), L.prober_ip,
                                           str(PORT), str(r_pps * r_size * 8), str(seconds), "2",
                                           f"{r_size}:1"]))
        t0 = time.monotonic()
        for g in gens:
            g.wait(timeout=seconds + 10)
        time.sleep(delay_ms / 1000 * 2 + 0.3)
        elapsed = time.monotonic() - t0
        drops = [stop_tcpdump(L, p) for p in dumps]
        stats = L.stop_delays().get(1, {})
        a, b = read_pcap(pin), read_pcap(pout)
    pro, tgt = bytes(map(int, L.prober_ip.split("."))), bytes(map(int, L.target_ip.split(".")))
    res = {"delay_ms": delay_ms, "case": name, "fwd_pps": f_pps, "fwd_ip_bytes": f_size,
           "rev_pps": r_pps, "rev_ip_bytes": r_size, "seconds": seconds,
           "capture_drops": [d for d in drops if d],
           "lw_delay_cpu_frac": round((stats.get("cpu_user_s", 0) + stats.get("cpu_sys_s", 0))
                                      / elapsed, 3) if stats else None,
           "lw_delay": stats}
    for dirn, src, dst in (("fwd", [x for x in a if x[1] == pro], [x for x in b if x[1] == pro]),
                           ("rev", [x for x in b if x[1] == tgt], [x for x in a if x[1] == tgt])):
        if not src:
            continue
        e = errors(src, dst, delay_ms * 1_000_000)
        res[dirn] = summary(*e) if e else {"unmatched": True, "in": len(src), "out": len(dst)}
    return res


def markdown(rows, cmd, load):
    out = ["# Delay element fidelity (tools/delay.cpp, lw_delay)", "",
           f"Command: `{cmd}`", "",
           f"Machine load average (1 min) at start / end: {load[0]:.1f} / {load[1]:.1f} "
           f"on {os.cpu_count()} CPUs (other work shared the machine; the tails are where it "
           "shows).", "",
           "Per frame, from tcpdump nanosecond timestamps on both sides of the delay node "
           "(prober `dn` in, target `up` out; reverse the other way): delay error = "
           "(out - in) - D, spacing error = |out gap - in gap| of consecutive frames. "
           "Poisson arrivals (lw_crossgen). CPU = lw_delay's user+sys time over the case's "
           "wall time (both threads). See scripts/bench_delay.py for the setup.", "",
           "| D ms | traffic | dir | frames | delay err p50 / p99 / p99.9 / max us | "
           "spacing err p50 / p99 / p99.9 / max us | >10 us | "
           "in gap >= 20 us: spacing err p50 / p99 / p99.9 us | >10 us | lw_delay CPU |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for dirn in ("fwd", "rev"):
            s = r.get(dirn)
            if s is None:
                continue
            if s.get("unmatched"):
                out.append(f"| {r['delay_ms']} | {r['case']} | {dirn} | unmatched "
                           f"({s['in']} in, {s['out']} out) | | | | | | |")
                continue
            d, sp, g = s["delay_err_us"], s["spacing_abs_err_us"], s["spacing_gap20_abs_err_us"]
            out.append(f"| {r['delay_ms']} | {r['case']} | {dirn} | {s['frames']} | "
                       f"{d['p50']} / {d['p99']} / {d['p999']} / {d['max']} | "
                       f"{sp['p50']} / {sp['p99']} / {sp['p999']} / {sp['max']} | "
                       f"{100 * s['spacing_over_10us_frac']:.2f}% | "
                       f"{g['p50']} / {g['p99']} / {g['p999']} | "
                       f"{100 * s['spacing_gap20_over_10us_frac']:.2f}% | "
                       f"{100 * (r['lw_delay_cpu_frac'] or 0):.0f}% |")
    drops = [r for r in rows if r["capture_drops"]]
    if drops:
        out += ["", "Capture drops: " + "; ".join(f"{r['delay_ms']} ms {r['case']}: "
                                                  f"{r['capture_drops']}" for r in drops)]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--delays", default=",".join(map(str, DELAYS_MS)))
    ap.add_argument("--cases", default=",".join(r[0] for r in RATES))
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    a = ap.parse_args()
    import tempfile
    rows = []
    cases = [r for r in RATES if r[0] in a.cases.split(",")]
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lw-benchdelay-") as tmp:
        for d in (float(x) for x in a.delays.split(",")):
            for c in cases:
                r = run_case(d if d != int(d) else int(d), *c, a.seconds, tmp)
                rows.append(r)
                print(json.dumps({k: r[k] for k in ("delay_ms", "case", "lw_delay_cpu_frac")}
                                 | {k: r[k] for k in ("fwd", "rev") if k in r}), flush=True)
    cmd = "python3 scripts/bench_delay.py " + " ".join(sys.argv[1:])
    load = (load0, os.getloadavg()[0])
    if a.out:
        with open(a.out + ".json", "w") as f:
            json.dump({"command": cmd, "loadavg_start_end": load, "rows": rows}, f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write(markdown(rows, cmd, load))
    print(markdown(rows, cmd, load))


if __name__ == "__main__":
    main()
