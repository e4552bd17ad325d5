"""Pieces the lab benchmark scripts share (bench_capacity.py, bench_availbw.py,
compare.py): a lock around a condition, cross traffic at an IP-layer rate,
one `linkwidth measure` run and one iperf3 TCP run, each with the cross
traffic measured on the link's counters over that run's own interval.
Reads only linkwidth's and iperf3's JSON output."""
import contextlib
import fcntl
import json
import os
import time

# The prober (linkwidth, the iperf3 client) runs on CPU 0, cross-traffic
# generators on CPU 1: on this 2-core VM they otherwise compete and the
# generator stalls while the prober sends.
PROBER_CPU, CROSS_CPU = 0, 1


@contextlib.contextmanager
def held(lock_path):
    """Holds an exclusive flock on lock_path (if given) for one condition, so
    other lab users on a shared machine do not run at the same time."""
    if not lock_path:
        yield
        return
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pinned(cmd, cpu):
    return cmd if cpu is None else ["taskset", "-c", str(cpu), *cmd]


def start_cross(L, kind, ip_bps, cpu, link=2, family=4):
    """Cross traffic of `kind` at `ip_bps` IP-layer bit/s on `link`, over
    IPv4 or IPv6 (`family`)."""
    if kind == "udp":
        # iperf3 -b counts UDP payload: 1472 of every 1500 IP bytes (IPv6: 1452).
        payload = 1452 if family == 6 else 1472
        return L.cross(link, "udp", rate=ip_bps * payload / 1500, cpu=cpu, family=family,
                       size=payload)
    return L.cross(link, kind, rate=ip_bps, cpu=cpu, family=family)


def measure_run(L, binary, args, cpu=None, cross_link=2, timeout=180, target=None):
    """One `linkwidth measure TARGET --json ARGS` (TARGET: `target`, default
    the lab target's IPv4 address): (exit code, JSON document, IP-layer bit/s
    of cross traffic that crossed `cross_link` meanwhile)."""
    w = L.cross_window(cross_link)
    p = L.run_in_prober(pinned([binary, "measure", target or L.target_ip, "--json", *args], cpu),
                        timeout=timeout)
    cross = w.stop().bps
    # Debugging aid: LW_BENCH_STDERR=DIR keeps each run's stderr (with
    # --tool-args=-v, the tool's trace).
    if os.environ.get("LW_BENCH_STDERR"):
        d = os.environ["LW_BENCH_STDERR"]
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"measure-{time.time():.3f}.txt"), "w") as f:
            f.write(p.stderr or "")
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {"error": {"code": "no_json", "message": (p.stderr or "").strip()[:200]}}
    return p.returncode, doc, cross


def iperf3_run(L, seconds, cpu=None, cross_link=None, port=5299, target=None):
    """One iperf3 TCP flow (cubic: this VM defaults to BBR) prober -> target
    (`target`: an address of it, default its IPv4 one) for `seconds`: {"bps" (receiver goodput), "bytes", "seconds", "cross_bps"
    (cross traffic on `cross_link` during the client's run, or None)}."""
    srv = L.popen("target", ["iperf3", "-s", "-1", "-p", str(port)])
    time.sleep(1.0)  # let the server listen
    out = {"bps": float("nan"), "bytes": None, "seconds": None, "cross_bps": None}
    try:
        w = L.cross_window(cross_link) if cross_link else None
        dst = target or L.target_ip
        p = L.exec("prober", pinned(["iperf3", "-c", dst, "-p", str(port), "-t",
                                     str(seconds), "-C", "cubic", "-J"] +
                                    (["-6"] if ":" in dst else []), cpu),
                   timeout=seconds + 30)
        if w:
            out["cross_bps"] = w.stop().bps
        s = json.loads(p.stdout)["end"]["sum_received"]
        out.update(bps=s["bits_per_second"], bytes=s["bytes"], seconds=s["seconds"])
    except (ValueError, KeyError):
        pass
    finally:
        L.stop_process(srv)
    return out


def iperf3_tcp(L, seconds, target=None):
    """iperf3 TCP cubic goodput in bit/s (nan on failure)."""
    return iperf3_run(L, seconds, target=target)["bps"]


def fmt(x, scale=1e6, digits=1):
    return "" if x in ("", None) else f"{x / scale:.{digits}f}"
