"""Command line of scripts/lab.py (see ``lab.py --help``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import List, Optional

from . import util
from .topology import _NAME_RE, SAME, SHAPERS, Lab, Link, Spec
from .util import LabError, format_rate, parse_rate


def _split(text: Optional[str], n: int, what: str) -> List[Optional[str]]:
    """'a,b,c' -> list of n items; a single item is repeated n times."""
    if text is None:
        return [None] * n
    items = [s.strip() for s in text.split(",")]
    if len(items) == 1:
        items = items * n
    if len(items) != n or any(s == "" for s in items):
        raise LabError(f"--{what} needs 1 or {n} comma-separated values, got {text!r}")
    return items


def _int_list(text: Optional[str], what: str) -> List[int]:
    if not text:
        return []
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise LabError(f"--{what}: comma-separated integers expected, got {text!r}") from None


def _spec_from_args(a) -> Spec:
    rates = [s.strip() for s in a.links.split(",")]
    if not rates or any(s == "" for s in rates):
        raise LabError(f"--links: comma-separated rates expected, got {a.links!r}")
    n = len(rates)
    revs = _split(a.rev, n, "rev")
    shapers = _split(a.shaper, n, "shaper")
    limits = _split(a.limit, n, "limit")
    delays = _split(getattr(a, "delay", None), n, "delay")
    links = []
    for i in range(n):
        rev = SAME if revs[i] in (None, SAME) else revs[i]
        try:
            limit = None if limits[i] in (None, "auto") else int(float(limits[i]))
        except ValueError:
            raise LabError(f"--limit: bytes expected, got {limits[i]!r}") from None
        try:
            delay = float(delays[i]) if delays[i] is not None else None
        except ValueError:
            raise LabError(f"--delay: one-way ms expected, got {delays[i]!r}") from None
        links.append(Link(rate=parse_rate(rates[i]), rev_rate=rev,
                          shaper=shapers[i] or "tbf", limit=limit, burst=a.burst,
                          delay_ms=delay))
    return Spec(links=links, silent_routers=_int_list(a.silent, "silent"),
                cross_links=_int_list(a.cross, "cross"), ipv6=getattr(a, "ipv6", False))


def cmd_up(a) -> int:
    lab = Lab(_spec_from_args(a), name=a.name, keep=True)
    lab.start()
    print(json.dumps(lab.info(), indent=1))
    return 0


def cmd_info(a) -> int:
    print(json.dumps(Lab.attach(a.name).info(), indent=1))
    return 0


def cmd_list(a) -> int:
    names = sorted(fn[:-5] for fn in os.listdir(util.STATE_DIR)
                   if fn.endswith(".json")) if os.path.isdir(util.STATE_DIR) else []
    for name in names:
        print(name)
    orphans = [ns for ns in util.list_namespaces()
               if not any(ns.startswith(f"{util.PREFIX}{n}-") for n in names)]
    if orphans:
        print("namespaces without state (lab.py cleanup removes them): " + " ".join(orphans),
              file=sys.stderr)
    return 0


def cmd_exec(a) -> int:
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        raise LabError("exec: no command given (lab.py exec NAME NODE -- CMD ...)")
    ns = Lab.attach(a.name).ns(a.node)
    sys.stdout.flush()
    os.execvp("ip", ["ip", "netns", "exec", ns] + cmd)
    return 127  # not reached


def cmd_cross(a) -> int:
    lab = Lab.attach(a.name)
    if a.udp is not None:
        x = lab.cross(a.link, "udp", rate=a.udp, size=a.size, duration=a.duration)
    elif a.tcp is not None:
        x = lab.cross(a.link, "tcp", flows=a.tcp, duration=a.duration)
    else:
        x = lab.cross(a.link, "poisson", rate=a.poisson, duration=a.duration)
    print(f"cross traffic on link {a.link}: {json.dumps(x.describe())} "
          f"({'Ctrl-C to stop' if a.duration is None else f'{a.duration} s'})", file=sys.stderr)
    try:
        w = lab.cross_window(a.link)
        next_print = time.monotonic() + 1.0
        while x.running:
            if a.duration is not None and time.monotonic() - x.started_at >= a.duration - 0.1:
                x.window.stop()        # measure only while it surely runs
                try:
                    x.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                break
            time.sleep(0.05)
            if time.monotonic() >= next_print:
                w.stop()
                print(f"  link {a.link}: {format_rate(w.bps)}bit/s IP-layer "
                      f"({w.pps:.0f} pkt/s)", file=sys.stderr)
                w = lab.cross_window(a.link)
                next_print += 1.0
    except KeyboardInterrupt:
        pass
    finally:
        x.stop()
    out = x.describe() | {"measured_bps": x.measured_bps(), "seconds": x.window.seconds}
    print(json.dumps(out))
    return 0


def cmd_firewall(a) -> int:
    lab = Lab.attach(a.name)
    lab.set_target_firewall(drop_syn=a.drop_syn, reject=a.reject, port=a.port)
    lab.save_state()
    print(json.dumps(lab.firewall))
    return 0


def cmd_middlebox(a) -> int:
    lab = Lab.attach(a.name)
    lab.set_middlebox(a.router, None if a.off else "reset" if a.reset else "drop_rst",
                      limit=a.limit)
    lab.save_state()
    print(json.dumps(lab.middlebox))
    return 0


def cmd_loss(a) -> int:
    lab = Lab.attach(a.name)
    d = "rev" if a.rev else "fwd"
    before = lab.random_loss_drops(a.link, d)  # under the setting it replaces
    lab.set_random_loss(a.link, a.fraction, d)
    print(json.dumps({"link": a.link, "direction": d, "fraction": a.fraction,
                      "dropped_before": before}))
    return 0


def cmd_rate(a) -> int:
    lab = Lab.attach(a.name)
    lab.set_rate(a.link, a.rate, "rev" if a.rev else "fwd")
    print(json.dumps(lab.info()["links"][a.link - 1]))
    return 0


def cmd_down(a) -> int:
    if not _NAME_RE.match(a.name):
        raise LabError(f"bad lab name {a.name!r}: 1-10 chars of [a-z0-9]")
    prefix = f"{util.PREFIX}{a.name}-"
    before = util.list_namespaces(prefix)
    if os.path.exists(os.path.join(util.STATE_DIR, f"{a.name}.json")):
        try:
            Lab.attach(a.name).destroy()
        except LabError:
            pass
    util.cleanup_all(prefix)
    if not a.quiet:
        print(f"lab {a.name!r}: removed {len(before)} namespace(s)", file=sys.stderr)
    return 0


def cmd_cleanup(a) -> int:
    gone = util.cleanup_all()
    print(f"removed {len(gone)} namespace(s)" + (": " + " ".join(gone) if gone else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lab.py", description="linkwidth network-namespace test lab "
        "(prober - r1 - ... - target chain, addresses in 198.18.0.0/15)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    s = sub.add_parser("up", help="build a lab and leave it running")
    s.add_argument("--name", required=True, help="lab name: 1-10 chars [a-z0-9]")
    s.add_argument("--links", required=True,
                   help="forward rates prober->target, e.g. 1000M,50M,1000M ('none' = unshaped)")
    s.add_argument("--rev", help="reverse rates (1 or one per link; 'same' = forward rate, default)")
    s.add_argument("--shaper", help=f"{'|'.join(SHAPERS)} (1 or one per link; default tbf)")
    s.add_argument("--limit", help="queue limit bytes (1 or one per link; default max(2MB,100ms*rate))")
    s.add_argument("--burst", type=int, default=util.DEFAULT_BURST, help="bucket bytes (default 3028)")
    s.add_argument("--delay", help="one-way delay in ms, both directions (1 or one per link; "
                   "0 = none; a delay node lw_delay in the link's wire)")
    s.add_argument("--silent", help="routers sending no ICMP errors, e.g. 1,2")
    s.add_argument("--cross", help="links whose cross hosts are built now, e.g. 2")
    s.add_argument("--ipv6", action="store_true",
                   help="dual-stack: IPv6 addresses in 2001:2::/48 beside the IPv4 ones")
    s.set_defaults(func=cmd_up)

    s = sub.add_parser("info", help="print a lab's description as JSON")
    s.add_argument("name")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("list", help="list labs with state files")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("exec", help="run a command in a node: exec NAME NODE -- CMD ...")
    s.add_argument("name")
    s.add_argument("node", help="prober, r1.., target, xs2, xr2, or a node index")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_exec)

    s = sub.add_parser("cross", help="run cross traffic on a link (foreground)")
    s.add_argument("name")
    s.add_argument("--link", type=int, required=True)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--udp", metavar="RATE", help="iperf3 UDP at RATE (UDP payload bit/s, like iperf3 -b)")
    g.add_argument("--tcp", metavar="N", type=int, help="iperf3 TCP (cubic), N parallel flows")
    g.add_argument("--poisson", metavar="RATE", help="bursty Poisson UDP at RATE (IP-layer bit/s)")
    s.add_argument("--size", type=int, default=None,
                   help="UDP payload bytes for --udp (default: 1500-byte IP packets, 1472 over IPv4)")
    s.add_argument("--duration", type=float, help="seconds (default: until Ctrl-C/SIGTERM)")
    s.set_defaults(func=cmd_cross)

    s = sub.add_parser("firewall", help="target firewall for TCP SYNs")
    s.add_argument("name")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--drop-syn", action="store_true", help="silently drop SYNs (filtered target)")
    g.add_argument("--reject", action="store_true", help="answer ICMP admin-prohibited (nftables)")
    g.add_argument("--off", action="store_true", help="remove the firewall")
    s.add_argument("--port", type=int, help="only SYNs to this TCP port")
    s.set_defaults(func=cmd_firewall)

    s = sub.add_parser("middlebox", help="make a router a middlebox on the path (nftables)")
    s.add_argument("name")
    s.add_argument("--router", type=int, required=True, help="router index k (r1 = 1)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--reset", action="store_true",
                   help="answer SYNs towards the target with a TCP reset itself")
    g.add_argument("--drop-rst", action="store_true",
                   help="stateful firewall: drop RSTs not in an established connection")
    g.add_argument("--off", action="store_true", help="remove the middlebox")
    s.add_argument("--limit", help="act on at most this nft rate, e.g. '40/second burst 5 packets'")
    s.set_defaults(func=cmd_middlebox)

    s = sub.add_parser("loss", help="drop a random share of what crosses a link (nftables)")
    s.add_argument("name")
    s.add_argument("--link", type=int, required=True)
    s.add_argument("--rev", action="store_true", help="reverse direction")
    s.add_argument("fraction", type=float, help="0..0.5 (0: no loss)")
    s.set_defaults(func=cmd_loss)

    s = sub.add_parser("rate", help="change a link's rate live")
    s.add_argument("name")
    s.add_argument("--link", type=int, required=True)
    s.add_argument("--rev", action="store_true", help="reverse direction")
    s.add_argument("rate", help="new rate, or 'none'")
    s.set_defaults(func=cmd_rate)

    s = sub.add_parser("down", help="tear a lab down")
    s.add_argument("name")
    s.add_argument("-q", "--quiet", action="store_true")
    s.set_defaults(func=cmd_down)

    s = sub.add_parser("cleanup", help=f"remove every {util.PREFIX}* namespace, its processes "
                       "and all state files")
    s.set_defaults(func=cmd_cleanup)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if os.geteuid() != 0:
        print("lab.py: error: must run as root", file=sys.stderr)
        return 1
    try:
        return args.func(args) or 0
    except LabError as e:
        print(f"lab.py: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
