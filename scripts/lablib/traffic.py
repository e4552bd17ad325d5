"""Counter-based rate measurement and pluggable cross-traffic generators.

A cross-traffic generator on link i sends from host xs{i} (behind node i-1)
to host xr{i} (behind node i), so it crosses exactly link i.  Its rate is
*measured* from xr{i}'s eth0 receive counters (CounterWindow), never taken
from what the generator was asked for.

veth byte counters include the 14-byte Ethernet header (verified: 10 pings
of 1000-byte IP packets add 10 x 1014 bytes), so the IP-layer rate is
``(dbytes - 14 * dpackets) * 8 / dt``.

Adding a generator: subclass CrossTraffic, implement ``_launch()`` (start
processes with ``self.lab.popen`` and append them to ``self.procs``), then
``register_cross_kind("name", Class)``; ``Lab.cross(link, "name", **params)``
passes ``params`` to the constructor.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Dict, List, Optional, Type

from .util import ETH_HDR, LabError, parse_rate

IPERF_FOREVER = 86400   # iperf3's maximum -t; the process is killed at stop()


class CounterWindow:
    """Byte/packet counter delta of one interface over a time window.

    ``start()`` snapshots, ``stop()`` snapshots again (if never stopped, the
    properties use a fresh "now" snapshot).  ``bps`` is the IP-layer bit/s
    (Ethernet header removed), ``frame_bps`` the on-wire (L2) bit/s."""

    def __init__(self, lab, node, ifname: str, direction: str = "rx"):
        if direction not in ("rx", "tx"):
            raise LabError("direction must be rx or tx")
        self.lab, self.node, self.ifname, self.direction = lab, node, ifname, direction
        self.t0 = self.t1 = None
        self.c0: Dict[str, int] = {}
        self.c1: Dict[str, int] = {}

    def _snap(self):
        a = time.monotonic()
        c = self.lab.iface_stats(self.node, self.ifname)
        b = time.monotonic()
        return (a + b) / 2, c

    def start(self) -> "CounterWindow":
        self.t0, self.c0 = self._snap()
        self.t1, self.c1 = None, {}
        return self

    def stop(self) -> "CounterWindow":
        if self.t0 is None:
            raise LabError("CounterWindow.stop() before start()")
        self.t1, self.c1 = self._snap()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.t1 is None:
            self.stop()

    def _end(self):
        if self.t0 is None:
            raise LabError("CounterWindow not started")
        return (self.t1, self.c1) if self.t1 is not None else self._snap()

    def delta(self) -> Dict[str, float]:
        t1, c1 = self._end()
        d = self.direction
        return {"seconds": t1 - self.t0,
                "bytes": c1[f"{d}_bytes"] - self.c0[f"{d}_bytes"],
                "packets": c1[f"{d}_packets"] - self.c0[f"{d}_packets"]}

    @property
    def seconds(self) -> float:
        return self.delta()["seconds"]

    @property
    def bps(self) -> float:
        """IP-layer bit/s: (dbytes - 14*dpackets)*8/dt."""
        d = self.delta()
        return (d["bytes"] - ETH_HDR * d["packets"]) * 8 / d["seconds"] if d["seconds"] > 0 else 0.0

    @property
    def frame_bps(self) -> float:
        d = self.delta()
        return d["bytes"] * 8 / d["seconds"] if d["seconds"] > 0 else 0.0

    @property
    def pps(self) -> float:
        d = self.delta()
        return d["packets"] / d["seconds"] if d["seconds"] > 0 else 0.0


def measure(lab, link: int, seconds: float) -> float:
    """IP-layer bit/s of cross traffic arriving at xr{link} over ``seconds``."""
    return lab.measure_cross(link, seconds)


# --------------------------------------------------------------------------
# generators
# --------------------------------------------------------------------------

class CrossTraffic:
    """Base class: lifecycle, process tracking and counter measurement.

    ``duration``: seconds, or None = until stop().  The counter window starts
    once the generator runs (after ``warmup`` seconds, default 0.3 s) so
    start-up is not averaged in."""
    kind = "base"

    def __init__(self, lab, link: int, duration: Optional[float] = None,
                 warmup: float = 0.3, cpu: Optional[int] = None, family: int = 4):
        lab._check_link(link)
        # 6: between the cross hosts' IPv6 addresses (dual-stack labs only).
        if family not in (4, 6):
            raise LabError("cross traffic family must be 4 or 6")
        if family == 6:
            lab._need_v6()
        self.family = family
        # Pin the sending process to this CPU (taskset): on a small VM the
        # generator otherwise competes with the prober for the same cores.
        self.cpu = None if cpu is None else int(cpu)
        self.lab, self.link = lab, int(link)
        self.duration = None if duration is None else float(duration)
        if self.duration is not None and self.duration <= 0:
            raise LabError("duration must be > 0")
        self.warmup = warmup
        self.procs: List[subprocess.Popen] = []
        self.window: Optional[CounterWindow] = None
        self.started_at: Optional[float] = None
        self._stopped = False

    @property
    def src(self) -> str:
        return f"xs{self.link}"

    @property
    def dst(self) -> str:
        return f"xr{self.link}"

    @property
    def dst_ip(self) -> str:
        return self.lab.xr_ip6(self.link) if self.family == 6 else self.lab.xr_ip(self.link)

    @property
    def udp_overhead(self) -> int:
        """IP + UDP header bytes: 28 over IPv4, 48 over IPv6."""
        return 48 if self.family == 6 else 28

    def _launch(self) -> None:          # pragma: no cover - abstract
        raise NotImplementedError

    def _pin(self) -> List[str]:
        return ["taskset", "-c", str(self.cpu)] if self.cpu is not None else []

    def start(self) -> "CrossTraffic":
        self.lab.ensure_cross_hosts(self.link)
        self.lab._cross.append(self)
        try:
            self._launch()
            self.started_at = time.monotonic()
            if self.warmup:
                time.sleep(self.warmup)
            for p in self.procs:
                if p.poll() is not None and self.duration is None:
                    raise LabError(f"{self.kind} cross traffic on link {self.link} exited "
                                   f"early ({p.returncode}): {' '.join(map(str, p.args))}")
            self.window = self.lab.cross_window(self.link)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def running(self) -> bool:
        return not self._stopped and any(p.poll() is None for p in self.procs)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Wait for a fixed-duration generator to finish on its own."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for p in self.procs:
            p.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self.window is not None and self.window.t1 is None:
            self.window.stop()

    def stop(self) -> "CrossTraffic":
        if self._stopped:
            return self
        if self.window is not None and self.window.t1 is None:
            self.window.stop()
        for p in reversed(self.procs):      # clients (appended last) first
            self.lab.stop_process(p)
        self._stopped = True
        if self in self.lab._cross:
            self.lab._cross.remove(self)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def measured_bps(self) -> float:
        """IP-layer bit/s that crossed the link since start (until stop)."""
        if self.window is None:
            raise LabError("cross traffic not started")
        return self.window.bps

    def measure(self, seconds: float) -> float:
        """IP-layer bit/s over a fresh window of ``seconds``."""
        return self.lab.measure_cross(self.link, seconds)

    def describe(self) -> dict:
        return {"kind": self.kind, "link": self.link, "duration": self.duration}


def _wait_listen(lab, node, port: int, proto: str = "t", timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cp = lab.exec(node, ["ss", f"-Hl{proto}n", f"sport = :{port}"])
        if cp.stdout.strip():
            return
        time.sleep(0.05)
    raise LabError(f"server on {node}:{port} did not start listening")


class _Iperf(CrossTraffic):
    def _iperf_client_args(self) -> List[str]:    # pragma: no cover - abstract
        raise NotImplementedError

    def _launch(self) -> None:
        port = self.lab.alloc_port()
        self.port = port
        log = self.lab.log_path(f"iperf3-l{self.link}-{port}")
        self.procs.append(self.lab.popen(self.dst, ["iperf3", "-s", "-1", "-p", str(port)],
                                         log=log + ".server"))
        _wait_listen(self.lab, self.dst, port)
        t = IPERF_FOREVER if self.duration is None else max(1, int(round(self.duration)))
        self.procs.append(self.lab.popen(
            self.src, self._pin() + ["iperf3", "-c", self.dst_ip, "-p", str(port), "-t", str(t)] +
            (["-6"] if self.family == 6 else []) +
            self._iperf_client_args(), log=log + ".client"))


class IperfUDP(_Iperf):
    """iperf3 UDP at a fixed rate.  ``rate``: bit/s of UDP *payload* (that is
    what iperf3 -b counts); ``size``: UDP payload bytes (default: 1500-byte
    IP packets, 1472 over IPv4 and 1452 over IPv6; 1472 over IPv6 made
    1520-byte packets that the 1500-byte links fragmented).  The IP-layer
    rate crossing the link is therefore rate*(size+28)/size (+48 over IPv6)."""
    kind = "udp"

    def __init__(self, lab, link, rate, size: Optional[int] = None, **kw):
        super().__init__(lab, link, **kw)
        self.rate = parse_rate(rate)
        if self.rate is None:
            raise LabError("udp cross traffic needs a rate")
        top = 1500 - self.udp_overhead
        size = top if size is None else int(size)
        if not 16 <= size <= top:
            raise LabError(f"udp payload size must be 16..{top} (1500-byte IP packets at most)")
        self.size = size

    def expected_ip_bps(self) -> float:
        return self.rate * (self.size + self.udp_overhead) / self.size

    def _iperf_client_args(self) -> List[str]:
        return ["-u", "-b", str(int(self.rate)), "-l", str(self.size)]

    def describe(self) -> dict:
        return super().describe() | {"rate": self.rate, "size": self.size,
                                     "expected_ip_bps": self.expected_ip_bps()}


class IperfTCP(_Iperf):
    """iperf3 TCP, ``flows`` parallel flows, congestion control ``cc``
    (default cubic: this VM's default is BBR).  ``rate`` (optional): iperf3's
    ``-b`` for all flows together, in bit/s of TCP payload (iperf3 throttles
    the application's writes, so the flow is a rate-limited cubic flow, as a
    streaming server sends; with 1448-byte segments the IP-layer rate is
    about rate x 1500/1448).  Without it the flows are greedy."""
    kind = "tcp"

    def __init__(self, lab, link, flows: int = 1, cc: str = "cubic", rate=None, **kw):
        super().__init__(lab, link, **kw)
        if not 1 <= int(flows) <= 128:
            raise LabError("tcp flows must be 1..128")
        self.flows, self.cc = int(flows), cc
        self.rate = parse_rate(rate)

    def _iperf_client_args(self) -> List[str]:
        rate = ["-b", str(int(self.rate))] if self.rate else []
        return ["-P", str(self.flows), "-C", self.cc] + rate

    def describe(self) -> dict:
        return super().describe() | {"flows": self.flows, "cc": self.cc, "rate": self.rate}


_POISSON = r"""
import random, socket, sys, time
dst, rate, dur, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
sizes = [(int(a), float(b)) for a, b in (x.split(":") for x in sys.argv[5].split(","))]
rng = random.Random(seed)
tot = sum(w for _, w in sizes)
mean = sum(s * w for s, w in sizes) / tot
lam = rate / (mean * 8.0)             # packets per second (IP-layer rate)
pop, wts = [s for s, _ in sizes], [w for _, w in sizes]
buf = bytes(1500)
v6 = ":" in dst                       # IPv6: 48 bytes of IP + UDP headers
hdr = 48 if v6 else 28
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic(); nxt = t0
end = t0 + dur if dur > 0 else float("inf")
while True:
    nxt += rng.expovariate(lam)
    if nxt > end:
        break
    d = nxt - time.monotonic()
    if d > 0.0002:
        time.sleep(d)
    ip_len = rng.choices(pop, wts)[0]
    try:
        s.sendto(buf[:max(0, ip_len - hdr)], (dst, 9))
    except OSError:
        pass
"""

_SINK = r"""
import socket, sys
v6 = len(sys.argv) > 1 and sys.argv[1] == "6"
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(("::" if v6 else "0.0.0.0", 9))
while True:
    s.recv(2048)
"""


class PoissonUDP(CrossTraffic):
    """Bursty UDP: exponential inter-arrivals (Poisson process) and a mix of
    IP packet sizes.  ``rate``: IP-layer bit/s (mean); ``sizes``: list of
    (ip_len, weight), default 40 % 1500 B, 20 % 576 B, 40 % 64 B.  A small
    Python sender (fine up to a few tens of Mbit/s on this VM; timer
    granularity adds extra burstiness) and a sink on UDP port 9."""
    kind = "poisson"

    def __init__(self, lab, link, rate, sizes=((1500, 0.4), (576, 0.2), (64, 0.4)),
                 seed: int = 1, **kw):
        super().__init__(lab, link, **kw)
        self.rate = parse_rate(rate)
        if self.rate is None:
            raise LabError("poisson cross traffic needs a rate")
        self.sizes = [(int(s), float(w)) for s, w in sizes]
        hdr = self.udp_overhead
        if not self.sizes or any(not hdr < s <= 1500 or w < 0 for s, w in self.sizes):
            raise LabError(f"poisson sizes: (ip_len {hdr + 1}..1500, weight >= 0) pairs")
        self.seed = int(seed)

    def _launch(self) -> None:
        self.procs.append(self.lab.popen(self.dst, [sys.executable, "-c", _SINK,
                                                          str(self.family)]))
        _wait_listen(self.lab, self.dst, 9, proto="u")
        sizes = ",".join(f"{s}:{w}" for s, w in self.sizes)
        self.procs.append(self.lab.popen(self.src, self._pin() + [
            sys.executable, "-c", _POISSON, self.dst_ip, str(self.rate),
            str(self.duration or 0), str(self.seed), sizes]))

    def describe(self) -> dict:
        return super().describe() | {"rate": self.rate, "sizes": self.sizes}


def tool_path(name: str, env: str) -> str:
    """build/NAME of this checkout (a lab tool from tools/), or $ENV."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get(env, os.path.join(root, "build", name))


def crossgen_path() -> str:
    """build/lw_crossgen (tools/crossgen.cpp), or $LINKWIDTH_CROSSGEN."""
    return tool_path("lw_crossgen", "LINKWIDTH_CROSSGEN")


class BurstyUDP(PoissonUDP):
    """The same bursty traffic as ``poisson`` (exponential inter-departures, a
    mix of IP sizes), from the compiled generator ``lw_crossgen``: accurate
    up to hundreds of Mbit/s on this VM.  (D-ITG from Debian was tried first:
    here it sent at most about 6000 packets/s whatever it was asked.)"""
    kind = "bursty"

    def _launch(self) -> None:
        import os
        gen = crossgen_path()
        if not os.access(gen, os.X_OK):
            raise LabError(f"{gen} not built (cmake --build build --target lw_crossgen)")
        self.procs.append(self.lab.popen(self.dst, [sys.executable, "-c", _SINK,
                                                          str(self.family)]))
        _wait_listen(self.lab, self.dst, 9, proto="u")
        sizes = ",".join(f"{s}:{w}" for s, w in self.sizes)
        self.procs.append(self.lab.popen(self.src, self._pin() + [
            gen, self.dst_ip, "9", str(self.rate), str(self.duration or 0), str(self.seed),
            sizes]))


class OnOffUDP(BurstyUDP):
    """On/off bursts with heavy-tailed periods, from ``lw_crossgen``'s on/off
    mode: on and off periods Pareto-distributed with shape ``alpha`` (default
    1.5: infinite variance before the truncation at 10 x the mean) and means
    ``on_s`` and ``off_s`` seconds; during an on period Poisson departures at
    the peak rate ``rate`` x (on_s + off_s) / on_s, so ``rate`` (IP-layer
    bit/s) is the long-run mean.  ``sizes`` as for ``poisson`` (default: all
    1500 B, bulk-transfer bursts).  Over a window of a few seconds the rate
    varies a lot (that is the point): measure it on the counters."""
    kind = "onoff"

    def __init__(self, lab, link, rate, on_s: float = 0.05, off_s: float = 0.05,
                 alpha: float = 1.5, sizes=((1500, 1.0),), **kw):
        super().__init__(lab, link, rate, sizes=sizes, **kw)
        self.on_s, self.off_s, self.alpha = float(on_s), float(off_s), float(alpha)
        if not (0 < self.on_s <= 3600 and 0 <= self.off_s <= 3600):
            raise LabError("onoff: on_s must be in (0, 3600] s and off_s in [0, 3600] s")
        if not 1.0 < self.alpha <= 3.0:
            raise LabError("onoff: alpha must be in (1, 3]")

    def peak_bps(self) -> float:
        return self.rate * (self.on_s + self.off_s) / self.on_s

    def _launch(self) -> None:
        import os
        gen = crossgen_path()
        if not os.access(gen, os.X_OK):
            raise LabError(f"{gen} not built (cmake --build build --target lw_crossgen)")
        self.procs.append(self.lab.popen(self.dst, [sys.executable, "-c", _SINK]))
        _wait_listen(self.lab, self.dst, 9, proto="u")
        sizes = ",".join(f"{s}:{w}" for s, w in self.sizes)
        self.procs.append(self.lab.popen(self.src, self._pin() + [
            gen, self.dst_ip, "9", str(self.rate), str(self.duration or 0), str(self.seed),
            sizes, f"{self.on_s:g}:{self.off_s:g}:{self.alpha:g}"]))

    def describe(self) -> dict:
        return super().describe() | {"on_s": self.on_s, "off_s": self.off_s,
                                     "alpha": self.alpha, "peak_bps": self.peak_bps()}


class HttpCross(CrossTraffic):
    """Short-lived elastic TCP: httperf opening ``rate`` connections per
    second, one GET of a ``size``-byte file each (HTTP/1.0, one request per
    connection), against Python's ``http.server``.  The server runs on
    xs{link} and httperf on xr{link}, so the responses (the bulk of the
    bytes) cross link i in the forward direction, the one linkwidth probes.
    ``timeout``: httperf gives up on a connection after this many seconds
    (under overload connections pile up until then)."""
    kind = "http"

    def __init__(self, lab, link, rate, size: int = 65536, timeout: float = 10.0, **kw):
        super().__init__(lab, link, **kw)
        self.rate = float(rate)
        if not 0 < self.rate <= 1000:
            raise LabError("http cross traffic: rate must be 0 < conn/s <= 1000")
        self.size, self.timeout = int(size), float(timeout)
        if not 1 <= self.size <= 1 << 30:
            raise LabError("http cross traffic: size must be 1 B .. 1 GiB")

    def _launch(self) -> None:
        import os
        port = self.lab.alloc_port()
        root = self.lab.log_path(f"www-l{self.link}")
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "file.bin"), "wb") as f:
            f.write(os.urandom(self.size))
        server_ip = self.lab.xs_ip(self.link)
        self.procs.append(self.lab.popen(self.src, self._pin() + [
            sys.executable, "-m", "http.server", str(port), "--bind", server_ip,
            "--directory", root]))
        _wait_listen(self.lab, self.src, port)
        seconds = self.duration or IPERF_FOREVER
        self.procs.append(self.lab.popen(self.dst, self._pin() + [
            "httperf", "--hog", "--server", server_ip, "--port", str(port),
            "--uri", "/file.bin", "--rate", f"{self.rate:g}", "--num-calls", "1",
            "--num-conns", str(max(1, int(self.rate * seconds))),
            "--timeout", f"{self.timeout:g}"],
            log=self.lab.log_path(f"httperf-l{self.link}-{port}")))

    def describe(self) -> dict:
        return super().describe() | {"rate": self.rate, "size": self.size,
                                     "timeout": self.timeout}


CROSS_KINDS: Dict[str, Type[CrossTraffic]] = {
    "udp": IperfUDP, "tcp": IperfTCP, "poisson": PoissonUDP, "bursty": BurstyUDP,
    "onoff": OnOffUDP, "http": HttpCross,
}


def register_cross_kind(name: str, cls: Type[CrossTraffic]) -> None:
    """Make ``Lab.cross(link, name, ...)`` use ``cls``."""
    if not (isinstance(cls, type) and issubclass(cls, CrossTraffic)):
        raise LabError("cross kind must be a CrossTraffic subclass")
    CROSS_KINDS[name] = cls
