#!/usr/bin/env python3
"""The queue-ceiling checks (src/estimate/queue_ceiling.cpp) replayed on a
`linkwidth measure --save-pcap F` capture, as numbers a reader can compare.

A diagnostic, not the tool: trains are told apart in the capture by gaps of
over 3 ms between our packets, avail-bw trains are those with 7 SYNs (the
warm-up and the default six markers), their markers from the second on (the
ratio's) with the capture's send times (the tool uses its offered schedule),
light trains those offered at a quarter of the fastest train's rate or less
(the tool: of C). IPv4 captures only. For each capture it prints the level
the first checks find (the highest level 3 trains end flat on, the outlier and
peak-share rules), or the highest plateau when they find none, and for that
level: the share of the markers risen to half of it that lie within
max(0.25 ms, 3%) of it (pile-up), the share of light trains risen to half of
it, and the trains whose delay rose by 70% of it between two markers.

    python3 scripts/ceiling_replay.py run1.pcap [run2.pcap ...]
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lablib.pcap import read_ipv4  # noqa: E402

TOL_FLOOR, TOL_SHARE = 0.0005, 0.12


def tol(level):
    return max(TOL_FLOOR, TOL_SHARE * level)


def read_pcap(path):
    packets = []
    for ts_ns, ip in read_ipv4(path):
        if ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        tcp = ip[ihl:]
        if len(tcp) < 14:
            continue
        _, _, seq, ack = struct.unpack("!HHII", tcp[:12])
        packets.append((ts_ns * 1e-9, ip[12:16], seq, ack, tcp[13], struct.unpack("!H", ip[2:4])[0]))
    return packets


def avail_trains(packets):
    """(rate bit/s, [(sent, reply), ...]) of each avail-bw train."""
    if not packets:
        return []
    prober = packets[0][1]
    ours = [p for p in packets if p[1] == prober]
    replies = {}
    for p in packets:
        if p[1] != prober and p[4] & 0x04:
            replies.setdefault(p[3], p[0])
    trains, cur = [], []
    for p in ours:
        if cur and p[0] - cur[-1][0] > 0.003:
            trains.append(cur)
            cur = []
        cur.append(p)
    trains.append(cur)
    out = []
    for tr in trains:
        syn = [p for p in tr if p[4] & 0x02]
        if len(syn) != 7:
            continue
        span = tr[-1][0] - tr[0][0]
        rate = sum(p[5] for p in tr[1:]) * 8 / span if span > 0 else 0
        m = []
        for p in syn[2:]:
            r = replies.get((p[2] + 1) & 0xFFFFFFFF)
            if r is not None and 0 <= r - p[0] < 2:
                m.append((p[0], r))
        if len(m) >= 2:
            out.append((rate, m))
    return out


def plateau(m, base):
    if len(m) < 3:
        return 0
    o = [r - s - base for s, r in m]
    level = (o[-1] + o[-2]) / 2
    if abs(o[-1] - o[-2]) > tol(level) or level - o[0] <= 2 * tol(level):
        return 0
    return level


def first_checks(trains, base):
    """The level of the checks before issue 11's burst checks, and why not."""
    levels = sorted((l for l in (plateau(m, base) for _, m in trains) if l > 0), reverse=True)
    on = []
    for top in levels:
        on = [l for l in levels if abs(l - top) <= tol(top)]
        if len(on) >= 3:
            break
    if len(on) < 3:
        return 0, levels[0] if levels else 0, "fewer than 3 plateaus on one level"
    on.sort()
    level = on[len(on) // 2]
    if level < 0.0025:
        return 0, level, "under 2.5 ms"
    owd = [r - s - base for _, m in trains for s, r in m]
    if sum(o > level + 2 * tol(level) for o in owd) > 0.02 * len(owd):
        return 0, level, "markers above it"
    peaks = [max(r - s for s, r in m) - base for _, m in trains]
    risen = [p for p in peaks if p >= level / 2]
    if sum(abs(p - level) <= tol(level) for p in risen) < 0.35 * len(risen):
        return 0, level, "peak share"
    return level, level, ""


def main(paths):
    for path in paths:
        trains = avail_trains(read_pcap(path))
        if not trains:
            print(f"{path}: no avail-bw trains")
            continue
        base = min(r - s for _, m in trains for s, r in m)
        found, level, why = first_checks(trains, base)
        if level <= 0:
            print(f"{path}: {len(trains)} trains, no plateau")
            continue
        owd = [r - s - base for _, m in trains for s, r in m]
        high = [o for o in owd if o >= level / 2]
        band = max(0.00025, 0.03 * level)
        pile = sum(abs(o - level) <= band for o in high) / len(high)
        top = max(rate for rate, _ in trains)
        light = [m for rate, m in trains if rate <= 0.25 * top]
        light_risen = sum(max(r - s for s, r in m) - base >= level / 2 for m in light)
        jumps = 0
        for _, m in trains:
            o = [r - s for s, r in m]
            jumps += any(o[k] - o[k - 1] >= 0.7 * level for k in range(1, len(o)))
        head = f"level {level * 1e3:.2f} ms" if found else f"no level ({why}; top {level * 1e3:.2f} ms)"
        print(f"{path}: {len(trains)} trains, {head}; pile-up {pile:.2f} of {len(high)} markers; "
              f"light risen {light_risen}/{len(light)}; jumps {jumps}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
