"""The lab itself: Link/Spec description and the Lab object that builds,
drives and tears down a chain of network namespaces.

Topology (N = len(spec.links), node 0 = prober, node N = target)::

    prober --link1-- r1 --link2-- r2 ... r(N-1) --linkN-- target
      |dn         up|  |dn      up|                    up|
      xs1           xr1,xs2      xr2 ...                xrN     (cross hosts, on demand)

Interface names inside every chain node: ``up`` (towards the prober, end of
link k), ``dn`` (towards the target, end of link k+1), ``xs{i}``/``xr{i}``
(veth to cross host).  Cross hosts have a single ``eth0``.

Addresses (all inside 198.18.0.0/15):
  link i          198.18.i.0/24      node i-1 (dev dn) = .1, node i (dev up) = .2
  xs{i} segment   198.19.i.0/24      node i-1 (dev xs{i}) = .1, host xs{i} = .2
  xr{i} segment   198.19.(100+i).0/24 node i (dev xr{i}) = .1, host xr{i} = .2

With ``Spec(ipv6=True)`` the lab is dual-stack, IPv6 only inside 2001:2::/48
(RFC 5180), DAD off so addresses work at once, forwarding on the routers:
  link i          2001:2:0:<i>::/64   node i-1 (dev dn) = ::1, node i (dev up) = ::2
  xs{i} segment   2001:2:0:a<ii>::/64 node i-1 = ::1, host xs{i} = ::2
  xr{i} segment   2001:2:0:b<ii>::/64 node i = ::1, host xr{i} = ::2
(<i> and <ii> are the decimal link number written as hex digits: link 12 is
2001:2:0:12::/64, its xs segment 2001:2:0:a12::/64.)

Shaping: forward direction of link i on egress of node i-1 ``dn``, reverse
direction on egress of node i ``up``.  tbf/htb count whole frames (14 bytes
of Ethernet header plus the IP datagram) whatever the IP version.

Delay (``Link(delay_ms=...)``): a link with a delay gets a namespace ``d{i}``
in the middle of its wire, ``node i-1 dn -- d0 [d{i}] d1 -- up node i``, where
``lw_delay`` (tools/delay.cpp) bridges ``d0`` and ``d1`` at layer 2 and holds
each frame for the one-way delay of its direction.  It has no IP address: no
extra hop, TTLs and hop counts are unchanged.  The shapers stay where they
are, so a frame is shaped first and delayed after (dispersion is kept).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import util
from .util import (DEFAULT_BURST, ETH_HDR, MTU, PREFIX, STATE_DIR, LabError, LabUnsupported,
                   default_limit, ip_capacity, ns_exec_cmd, ns_script,
                   parse_rate, run)

SAME = "same"          # Link.rev_rate default: reverse shaped like forward
MAX_LINKS = 99
MAX_DELAY_MS = 1000.0
# "police": no queue at all; nftables drops what exceeds a token bucket of
# ``rate`` (IP bytes) and ``burst`` bytes (a policer, as ISPs and cloud
# firewalls run them: nothing is delayed, the excess is lost).
SHAPERS = ("tbf", "htb", "police")
_NAME_RE = re.compile(r"^[a-z0-9]{1,10}$")

# Small TCP listener run inside a namespace by Lab.listen().
_LISTENER = r"""
import socket, sys
try:  # dual-stack: IPv4 and IPv6 (where the namespace has it) on one socket
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", int(sys.argv[1])))
except OSError:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1024)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.close()
"""


# --------------------------------------------------------------------------
# description
# --------------------------------------------------------------------------

@dataclass
class Link:
    """One hop.  ``rate``: forward bit/s (None = unshaped).  ``rev_rate``:
    reverse bit/s, ``SAME`` (default) = same as ``rate``, None = unshaped.
    ``shaper``: "tbf" (default), "htb" or "police" (nftables drops beyond a
    token bucket of ``rate`` counted in IP bytes and ``burst``: no queue; the
    link runs at veth speed below it).  ``limit``: queue limit in bytes
    (None = max(2 MB, 100 ms x rate), per direction).  ``burst``: bucket bytes
    (a token-bucket shaper: e.g. 300_000 lets 300 KB pass at line rate, then
    ``rate``).  ``peakrate``: tbf only, a second bucket that limits the burst
    to this rate (bit/s, None = line rate), with ``minburst`` bytes (default
    one frame)."""
    rate: Optional[float] = None
    rev_rate: Union[None, float, str] = SAME
    shaper: str = "tbf"
    limit: Optional[int] = None
    burst: int = DEFAULT_BURST
    # One-way delay in ms added by a delay node in the middle of the link
    # (None/0 = none); rev_delay_ms: the reverse direction, SAME = delay_ms.
    delay_ms: Optional[float] = None
    rev_delay_ms: Union[None, float, str] = SAME
    peakrate: Optional[float] = None
    minburst: Optional[int] = None

    def __post_init__(self):
        self.rate = parse_rate(self.rate)
        for d in (self.delay_ms, None if self.rev_delay_ms == SAME else self.rev_delay_ms):
            if d is not None and not 0 <= float(d) <= MAX_DELAY_MS:
                raise LabError(f"bad delay {d!r} ms: must be 0..{MAX_DELAY_MS}")
        if not (isinstance(self.rev_rate, str) and self.rev_rate == SAME):
            self.rev_rate = parse_rate(self.rev_rate)
        if self.shaper not in SHAPERS:
            raise LabError(f"bad shaper {self.shaper!r}: choose from {', '.join(SHAPERS)}")
        if self.limit is not None and int(self.limit) < 2 * (MTU + ETH_HDR):
            raise LabError(f"queue limit {self.limit} too small (min {2 * (MTU + ETH_HDR)} bytes)")
        if int(self.burst) < MTU + ETH_HDR:
            raise LabError(f"burst {self.burst} smaller than one frame ({MTU + ETH_HDR})")
        if self.peakrate is not None:
            self.peakrate = parse_rate(self.peakrate)
            if self.shaper != "tbf":
                raise LabError("peakrate needs the tbf shaper")
            if self.rate is None or self.peakrate <= self.rate:
                raise LabError(f"peakrate {self.peakrate} must exceed the rate {self.rate}")
        if self.minburst is not None and int(self.minburst) < MTU + ETH_HDR:
            raise LabError(f"minburst {self.minburst} smaller than one frame ({MTU + ETH_HDR})")

    def fwd(self) -> Optional[float]:
        return self.rate

    def rev(self) -> Optional[float]:
        return self.rate if self.rev_rate == SAME else self.rev_rate

    def delay(self, direction: str = "fwd") -> float:
        """One-way delay in ms added to this link in ``direction`` (0 = none)."""
        d = self.delay_ms if direction == "fwd" or self.rev_delay_ms == SAME else self.rev_delay_ms
        return float(d or 0.0)

    def delayed(self) -> bool:
        return self.delay("fwd") > 0 or self.delay("rev") > 0

    def queue_limit(self, direction: str = "fwd") -> int:
        if self.limit is not None:
            return int(self.limit)
        return default_limit(self.fwd() if direction == "fwd" else self.rev())


@dataclass
class Spec:
    """Whole lab.  ``links``: prober->target hops (>= 1).  ``silent_routers``:
    1-based router indices that send no ICMP errors (time exceeded,
    unreachable).  ``cross_links``: links whose cross hosts are built at start
    (others are built on first use)."""
    links: List[Link]
    silent_routers: Sequence[int] = ()
    cross_links: Sequence[int] = ()
    mtu: int = MTU
    # Dual-stack: IPv6 addresses and routes beside the IPv4 ones (see module doc).
    ipv6: bool = False
    # If set, packets arriving at routers and the target are processed on this
    # CPU (RPS) and run_in_prober() pins the prober to the other CPUs. On a
    # veth lab the whole path otherwise runs in the sender's own softirq, which
    # caps what one process can offer (about 0.5 Gbit/s here); a real NIC does
    # that work in hardware.
    network_cpu: Optional[int] = None
    # CPU for the delay nodes (lw_delay, SCHED_FIFO: it preempts whatever
    # runs there while it spins before a departure). Default: unpinned. On a
    # CPU the prober does not use, the prober's pacing is safe from it; but
    # its two directions then share that CPU, which costs spacing fidelity
    # under heavy traffic both ways (results/delay_fidelity.md is unpinned).
    delay_cpu: Optional[int] = None

    def __post_init__(self):
        self.links = [l if isinstance(l, Link) else Link(rate=l) for l in self.links]
        n = len(self.links)
        if not 1 <= n <= MAX_LINKS:
            raise LabError(f"need 1..{MAX_LINKS} links, got {n}")
        for r in self.silent_routers:
            if not 1 <= int(r) <= n - 1:
                raise LabError(f"silent router r{r} does not exist (routers are r1..r{n - 1})")
        for i in self.cross_links:
            if not 1 <= int(i) <= n:
                raise LabError(f"cross link {i} does not exist (links are 1..{n})")
        self.silent_routers = tuple(sorted({int(r) for r in self.silent_routers}))
        self.cross_links = tuple(sorted({int(i) for i in self.cross_links}))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Spec":
        return cls(links=[Link(**l) for l in d["links"]],
                   silent_routers=d.get("silent_routers", ()),
                   cross_links=d.get("cross_links", ()), mtu=d.get("mtu", MTU),
                   network_cpu=d.get("network_cpu"), delay_cpu=d.get("delay_cpu"),
                   ipv6=d.get("ipv6", False))


# --------------------------------------------------------------------------
# teardown safety net: atexit + SIGTERM/SIGHUP -> SystemExit
# --------------------------------------------------------------------------

_LIVE: List["Lab"] = []
_TEARDOWN = threading.Lock()
_PENDING: List[int] = []     # signals that arrived during a teardown

# While a lab runs, the CPUs stay out of deep idle states: a PM QoS request of
# 0 us on /dev/cpu_dma_latency (released when the file closes, also when the
# process dies). On this VM (cpuidle haltpoll) an idle vCPU that halts wakes up
# late, by hundreds of us to ms: the delay element's frames then leave late
# (lw_delay counted 9.6% of forward frames over 100 us late during two
# `measure` runs at 300 ms, 1.4% in three runs with it) and the routers' timers fire
# late. Lab timing, not the tool's: labs only.
_CPU_LATENCY = {"file": None, "users": 0}


def _hold_cpu_latency() -> None:
    _CPU_LATENCY["users"] += 1
    if _CPU_LATENCY["file"] is None and os.environ.get("LW_LAB_CPU_LATENCY", "0") != "off":
        try:
            f = open("/dev/cpu_dma_latency", "wb", buffering=0)
            f.write((0).to_bytes(4, sys.byteorder, signed=True))
            _CPU_LATENCY["file"] = f
        except OSError:
            pass  # no PM QoS here: the lab runs, with the timing it has


def _release_cpu_latency() -> None:
    _CPU_LATENCY["users"] = max(0, _CPU_LATENCY["users"] - 1)
    if _CPU_LATENCY["users"] == 0 and _CPU_LATENCY["file"] is not None:
        _CPU_LATENCY["file"].close()
        _CPU_LATENCY["file"] = None


def _teardown_all() -> None:
    for lab in reversed(list(_LIVE)):
        try:
            lab.close()
        except Exception as e:  # pragma: no cover - best effort at exit
            print(f"lab: teardown of {lab.id} failed: {e}", file=sys.stderr)


atexit.register(_teardown_all)


def _on_signal(signum, frame):
    if _TEARDOWN.locked():      # tearing down: finish first, exit right after
        _PENDING.append(signum)
        return
    raise SystemExit(128 + signum)


def _install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_signal)
    if signal.getsignal(signal.SIGINT) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)


# --------------------------------------------------------------------------
# the lab
# --------------------------------------------------------------------------


_kept = [0]


def keep_document(p) -> Optional[str]:
    """With LW_LAB_DOCS set (the CTest lab suite sets it to build/lab-docs),
    write a JSON document a command printed there, named after the pytest
    test running (PYTEST_CURRENT_TEST): a failure in CI can then be read in
    full, not only in the assertion's shortened message. Returns the path."""
    folder = os.environ.get("LW_LAB_DOCS")
    out = getattr(p, "stdout", None)
    if not folder or not isinstance(out, str) or not out.lstrip().startswith("{"):
        return None
    test = os.environ.get("PYTEST_CURRENT_TEST", "script").split(" ")[0]
    _kept[0] += 1
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test.split("/")[-1])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}-{os.getpid()}-{_kept[0]}.json")
    with open(path, "w") as f:
        f.write(out)
    return path

class Lab:
    """A running (after start()/``with``) namespace chain.  See module doc."""

    def __init__(self, spec: Union[Spec, Sequence], name: Optional[str] = None,
                 keep: bool = False):
        self.spec = spec if isinstance(spec, Spec) else Spec(links=list(spec))
        if name is not None and not _NAME_RE.match(name):
            raise LabError(f"bad lab name {name!r}: 1-10 chars of [a-z0-9]")
        self.id = name or secrets.token_hex(2)
        self.prefix = f"{PREFIX}{self.id}-"
        self.keep = keep            # leave namespaces up at close() (CLI 'up')
        self.n = len(self.spec.links)
        self.cross_hosts: set = set()
        self.silent: set = set(self.spec.silent_routers)
        self.firewall: dict = {}
        self.middlebox: dict = {}    # router index (str) -> mode, see set_middlebox()
        self._procs: List[subprocess.Popen] = []
        self._cross: list = []
        self._next_port = 5201
        self._started = False
        self._closed = False
        self._tmp: Optional[str] = None
        self._delays: Dict[int, Tuple[subprocess.Popen, str]] = {}

    # ---- naming / addressing ------------------------------------------------
    def node_name(self, k: int) -> str:
        if not 0 <= k <= self.n:
            raise LabError(f"node index {k} out of range 0..{self.n}")
        return "prober" if k == 0 else "target" if k == self.n else f"r{k}"

    @property
    def nodes(self) -> List[str]:
        return [self.node_name(k) for k in range(self.n + 1)]

    def node_index(self, node: Union[int, str]) -> int:
        if isinstance(node, int):
            self.node_name(node)
            return node
        if node in ("prober", "target"):
            return 0 if node == "prober" else self.n
        m = re.match(r"^r(\d+)$", str(node))
        if m and 1 <= int(m.group(1)) < self.n:
            return int(m.group(1))
        raise LabError(f"no chain node {node!r} (have {', '.join(self.nodes)})")

    def ns(self, node: Union[int, str]) -> str:
        """Namespace name of a chain node (index or name) or cross host
        (``xs2``/``xr2``)."""
        if isinstance(node, str) and re.match(r"^x[sr]\d+$", node):
            i = int(node[2:])
            if not 1 <= i <= self.n:
                raise LabError(f"no link {i} for cross host {node}")
            return self.prefix + node
        return self.prefix + self.node_name(self.node_index(node))

    def node_ns(self, k: int) -> str:
        return self.ns(k)

    @staticmethod
    def link_ip(i: int, end: str = "down", family: int = 4) -> str:
        """Address of link i's ``up``stream (node i-1) or ``down``stream end:
        198.18.i.1/.2, or over IPv6 2001:2:0:i::1/::2."""
        host = 1 if end == "up" else 2
        return f"2001:2:0:{i}::{host}" if family == 6 else f"198.18.{i}.{host}"

    def node_ip(self, k, family: int = 4) -> str:
        """Address identifying node k: its end of link k (the address a router
        uses for ICMP towards the prober); the prober's is 198.18.1.1
        (2001:2:0:1::1; IPv6 needs Spec.ipv6)."""
        if family == 6:
            self._need_v6()
        k = self.node_index(k)
        return self.link_ip(1, "up", family) if k == 0 else self.link_ip(k, "down", family)

    def ip_of(self, node, family: int = 4) -> str:
        """Address of any node: chain node (see node_ip) or cross host."""
        if isinstance(node, str) and re.match(r"^x[sr]\d+$", node):
            if family == 6:
                self._need_v6()
            self.ns(node)
            i = int(node[2:])
            return self.xs_ip(i, family) if node[1] == "s" else self.xr_ip(i, family)
        return self.node_ip(node, family)

    @property
    def prober_ns(self) -> str:
        return self.ns(0)

    @property
    def target_ns(self) -> str:
        return self.ns(self.n)

    @property
    def prober_ip(self) -> str:
        return self.node_ip(0)

    @property
    def target_ip(self) -> str:
        return self.node_ip(self.n)

    # IPv6 twins of the accessors above (they need Spec.ipv6).
    @staticmethod
    def link_ip6(i: int, end: str = "down") -> str:
        return Lab.link_ip(i, end, 6)

    def node_ip6(self, k) -> str:
        return self.node_ip(k, 6)

    def ip6_of(self, node) -> str:
        return self.ip_of(node, 6)

    @property
    def prober_ip6(self) -> str:
        return self.node_ip(0, 6)

    @property
    def target_ip6(self) -> str:
        return self.node_ip(self.n, 6)

    @staticmethod
    def xs_ip6(i: int) -> str:
        return Lab.xs_ip(i, 6)

    @staticmethod
    def xr_ip6(i: int) -> str:
        return Lab.xr_ip(i, 6)

    def link_local6(self, node, dev: str) -> str:
        """The fe80::/64 address the kernel gave ``node``'s interface ``dev``
        (needs Spec.ipv6; the lab's veths only), without a zone."""
        self._need_v6()
        cp = self.exec(node, ["ip", "-j", "-6", "addr", "show", "dev", dev, "scope", "link"],
                       check=True)
        for iface in json.loads(cp.stdout or "[]"):
            for a in iface.get("addr_info", []):
                if a.get("family") == "inet6" and a.get("local", "").startswith("fe80:"):
                    return a["local"]
        raise LabError(f"{node} has no link-local address on {dev}")

    def _need_v6(self) -> None:
        if not self.spec.ipv6:
            raise LabError("this lab has no IPv6 (build it with Spec(ipv6=True))")

    def add_host_name(self, name: str, node="target", v4: bool = True, v6: bool = True,
                      v6_first: bool = False) -> None:
        """Make ``name`` resolve inside the prober's namespace to ``node``'s
        addresses: /etc/netns/<prober ns>/hosts, which ``ip netns exec``
        bind-mounts over /etc/hosts (glibc's files backend). The order of the
        lines is the order getaddrinfo returns (``v6_first``). Removed with
        the namespace."""
        if not re.match(r"^[a-z][a-z0-9.-]{0,60}$", name):
            raise LabError(f"bad host name {name!r}")
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
        entries = []
        if v4:
            entries.append(f"{self.node_ip(node)} {name}")
        if v6:
            entries.append(f"{self.node_ip6(node)} {name}")
        if v6_first:
            entries.reverse()
        d = os.path.join("/etc/netns", self.prober_ns)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("\n".join(lines + entries) + "\n")

    @staticmethod
    def xs_ip(i: int, family: int = 4) -> str:
        """Cross-traffic sender on link i: 198.19.i.2 (2001:2:0:aNN::2)."""
        return f"2001:2:0:a{i:02d}::2" if family == 6 else f"198.19.{i}.2"

    @staticmethod
    def xr_ip(i: int, family: int = 4) -> str:
        """Cross-traffic receiver on link i: 198.19.(100+i).2 (2001:2:0:bNN::2)."""
        return f"2001:2:0:b{i:02d}::2" if family == 6 else f"198.19.{100 + i}.2"

    def link_iface(self, i: int, direction: str = "fwd") -> Tuple[str, str]:
        """(node name, interface) whose egress shapes link i in ``direction``."""
        self._check_link(i)
        if direction not in ("fwd", "rev"):
            raise LabError(f"bad direction {direction!r}: fwd or rev")
        return (self.node_name(i - 1), "dn") if direction == "fwd" else (self.node_name(i), "up")

    def _check_link(self, i: int) -> None:
        if not 1 <= int(i) <= self.n:
            raise LabError(f"no link {i} (links are 1..{self.n})")

    # ---- ground truth ---------------------------------------------------------
    def link_rate(self, i: int, direction: str = "fwd") -> Optional[float]:
        self._check_link(i)
        l = self.spec.links[i - 1]
        return l.fwd() if direction == "fwd" else l.rev()

    def link_capacity(self, i: int, ip_len: int = 1500, direction: str = "fwd") -> Optional[float]:
        if self.spec.links[i - 1].shaper == "police":
            return self.link_rate(i, direction)  # nftables counts IP bytes
        return ip_capacity(self.link_rate(i, direction), ip_len)

    def narrow_link(self, direction: str = "fwd") -> Optional[int]:
        """Index of the lowest-rate shaped link (first one on ties), or None."""
        rated = [(self.link_rate(i, direction), i) for i in range(1, self.n + 1)
                 if self.link_rate(i, direction) is not None]
        return min(rated)[1] if rated else None

    def ground_truth_capacity(self, ip_len: int = 1500, direction: str = "fwd") -> Optional[float]:
        """End-to-end IP-layer capacity for ``ip_len``-byte packets: min over
        shaped links of R*L/(L+14).  None if nothing is shaped."""
        i = self.narrow_link(direction)
        return None if i is None else self.link_capacity(i, ip_len, direction)

    # ---- lifecycle ------------------------------------------------------------
    def __enter__(self) -> "Lab":
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "Lab":
        if self._started:
            return self
        if os.geteuid() != 0:
            raise LabError("the lab needs root (network namespaces, tc)")
        if util.list_namespaces(self.prefix):
            raise LabError(f"lab {self.id!r} already exists (namespaces {self.prefix}*); "
                           f"use 'lab.py down {self.id}' or 'lab.py cleanup'")
        _install_signal_handlers()
        _LIVE.append(self)
        self._started = True
        _hold_cpu_latency()
        try:
            self._build()
        except BaseException:
            self.destroy()
            raise
        if self.keep:
            self.save_state()
        return self

    def close(self) -> None:
        """Stop cross traffic and tracked processes; unless ``keep``, delete
        every namespace of this lab and its state file.  Idempotent."""
        with _TEARDOWN:
            for x in list(self._cross):
                try:
                    x.stop()
                except Exception:
                    pass
            self._cross.clear()
            util.kill_pids([p.pid for p in self._procs if p.poll() is None])
            for p in self._procs:
                try:
                    p.wait(timeout=1)
                except Exception:
                    pass
            self._procs.clear()
            if not self.keep:
                for ns in util.list_namespaces(self.prefix):
                    util.delete_namespace(ns)
                self._remove_state()
            if self._tmp:                   # generator logs of this process
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
            if self in _LIVE:
                _LIVE.remove(self)
                _release_cpu_latency()
            self._closed = True
        if _PENDING:
            raise SystemExit(128 + _PENDING.pop())

    def destroy(self) -> None:
        """close() and delete the namespaces even for a ``keep`` lab."""
        self.keep = False
        self.close()

    # ---- building ---------------------------------------------------------------
    def _base_lines(self, forward: bool) -> List[str]:
        p = "/proc/sys/net"
        if self.spec.ipv6:
            # Dual-stack: no DAD (addresses usable at once), no router
            # advertisements or solicitations (static routes only), no MLD
            # reports beyond the kernel's minimum, forwarding on routers.
            v6 = [f"echo 0 > {p}/ipv6/conf/all/disable_ipv6",
                  f"echo 0 > {p}/ipv6/conf/default/disable_ipv6",
                  f"echo 0 > {p}/ipv6/conf/all/accept_dad",
                  f"echo 0 > {p}/ipv6/conf/default/accept_dad",
                  f"echo 0 > {p}/ipv6/conf/all/accept_ra",
                  f"echo 0 > {p}/ipv6/conf/default/accept_ra",
                  f"echo 0 > {p}/ipv6/conf/default/router_solicitations",
                  f"echo {1 if forward else 0} > {p}/ipv6/conf/all/forwarding"]
        else:
            v6 = [f"echo 1 > {p}/ipv6/conf/all/disable_ipv6",
                  f"echo 1 > {p}/ipv6/conf/default/disable_ipv6"]
        return [
            "ip link set lo up",
            *v6,
            f"for f in {p}/ipv4/conf/*/rp_filter; do echo 0 > $f; done",
            f"for f in {p}/ipv4/conf/*/send_redirects; do echo 0 > $f; done",
            f"echo {1 if forward else 0} > {p}/ipv4/ip_forward",
        ]

    def _iface_lines(self, dev: str, cidr: str, cidr6: Optional[str] = None) -> List[str]:
        v6 = ([f"ip -6 addr add {cidr6} dev {dev} nodad"]
              if self.spec.ipv6 and cidr6 else [])
        return v6 + [
            f"ip link set dev {dev} mtu {self.spec.mtu}",
            # every frame meets the shaper as itself; software checksums so
            # captured frames carry correct checksums
            f"ethtool -K {dev} tso off gso off gro off tx off rx off >/dev/null",
            f"echo 0 > /proc/sys/net/ipv4/conf/{dev}/rp_filter",
            f"ip addr add {cidr} dev {dev}",
            f"ip link set dev {dev} up",
        ]

    def _shaper_lines(self, i: int, direction: str) -> List[str]:
        _, dev = self.link_iface(i, direction)
        link = self.spec.links[i - 1]
        rate = self.link_rate(i, direction)
        if rate is None:
            return [f"tc qdisc del dev {dev} root 2>/dev/null || true"]
        r, lim, b = int(round(rate)), link.queue_limit(direction), int(link.burst)
        if link.shaper == "police":
            # postrouting sees forwarded and locally sent packets alike; one
            # chain per device, replaced whole when the link is reshaped.
            chain = f"po_{dev}"
            return [f"tc qdisc del dev {dev} root 2>/dev/null || true",
                    "nft add table inet lwpol",
                    f"nft flush chain inet lwpol {chain} 2>/dev/null || true",
                    f"nft delete chain inet lwpol {chain} 2>/dev/null || true",
                    f"nft add chain inet lwpol {chain} "
                    "'{ type filter hook postrouting priority 0; }'",
                    f"nft add rule inet lwpol {chain} oifname {dev} "
                    f"limit rate over {r // 8} bytes/second burst {b} bytes drop"]
        if link.shaper == "tbf":
            peak = ""
            if link.peakrate is not None and direction == "fwd":
                mb = int(link.minburst or (self.spec.mtu + ETH_HDR))
                peak = f" peakrate {int(round(link.peakrate))}bit minburst {mb}"
            return [f"tc qdisc del dev {dev} root 2>/dev/null || true",
                    f"tc qdisc add dev {dev} root handle 1: tbf rate {r}bit burst {b} limit {lim}"
                    + peak]
        q = self.spec.mtu + ETH_HDR
        return [f"tc qdisc del dev {dev} root 2>/dev/null || true",
                f"tc qdisc add dev {dev} root handle 1: htb default 1",
                f"tc class add dev {dev} parent 1: classid 1:1 htb rate {r}bit ceil {r}bit "
                f"burst {b} cburst {b} quantum {q}",
                f"tc qdisc add dev {dev} parent 1:1 handle 10: bfifo limit {lim}"]

    def _route_lines(self, k: int, subnet: str, attach: int, connected: bool,
                     subnet6: Optional[str] = None) -> List[str]:
        """Route on chain node k to ``subnet`` (and ``subnet6``, IPv6 labs)
        hanging off chain node ``attach``."""
        if connected:
            return []
        v6 = self.spec.ipv6 and subnet6
        if attach < k:
            return ([f"ip route add {subnet} via {self.link_ip(k, 'up')} dev up"] +
                    ([f"ip -6 route add {subnet6} via {self.link_ip6(k, 'up')} dev up"]
                     if v6 else []))
        return ([f"ip route add {subnet} via {self.link_ip(k + 1, 'down')} dev dn"] +
                ([f"ip -6 route add {subnet6} via {self.link_ip6(k + 1, 'down')} dev dn"]
                 if v6 else []))

    def node_ifaces(self, k: int, family: int = 4) -> List[Tuple[str, str]]:
        """(interface, address) pairs of chain node k; IPv6 (family 6): none
        unless the lab has IPv6.  A router's side of a cross host's link has
        host 1 of the cross host's subnet (xs_ip / xr_ip end in 2)."""
        if family == 6 and not self.spec.ipv6:
            return []
        out = []
        if k >= 1:
            out.append(("up", self.link_ip(k, "down", family)))
        if k < self.n:
            out.append(("dn", self.link_ip(k + 1, "up", family)))
        if k + 1 in self.cross_hosts:
            out.append((f"xs{k + 1}", self.xs_ip(k + 1, family)[:-1] + "1"))
        if k in self.cross_hosts:
            out.append((f"xr{k}", self.xr_ip(k, family)[:-1] + "1"))
        return out

    def node_ifaces6(self, k: int) -> List[Tuple[str, str]]:
        return self.node_ifaces(k, 6)

    @staticmethod
    def _blackhole_lines(dev: str = "bh") -> List[str]:
        # "drop" without act_gact (not in this kernel): tc mirred redirect to
        # an ifb whose root qdisc is a 0-packet pfifo; its drop counter counts.
        return [f"if ! ip link show {dev} >/dev/null 2>&1; then ip link add {dev} type ifb; "
                f"tc qdisc replace dev {dev} root pfifo limit 0; ip link set {dev} up; fi"]

    def _icmp_lines(self, k: int, silent: bool, devs: Optional[Sequence[str]] = None) -> List[str]:
        # Silent node: every ICMP packet whose source is one of the node's own
        # addresses (errors such as time exceeded/unreachable, echo replies)
        # is dropped on egress of each of its interfaces (clsact egress, u32,
        # prio 2; ICMPv6 errors in IPv6 labs at prio 3: one prio holds one
        # protocol).  Forwarded ICMP from other nodes passes.  The sysctls
        # icmp_msgs_per_sec/burst=0 were tried first: they do NOT silence
        # ICMP errors on this kernel.
        ifaces = self.node_ifaces(k)
        devs = [d for d, _ in ifaces] if devs is None else list(devs)
        lines = self._blackhole_lines() if silent else []
        for dev in devs:
            lines.append(f"tc filter del dev {dev} egress prio 2 2>/dev/null || true")
            if self.spec.ipv6:
                lines.append(f"tc filter del dev {dev} egress prio 3 2>/dev/null || true")
            if silent:
                lines.append(f"tc qdisc add dev {dev} clsact 2>/dev/null || true")
                lines += [f"tc filter add dev {dev} egress protocol ip prio 2 u32 "
                          f"match ip protocol 1 0xff match ip src {a}/32 "
                          f"action mirred egress redirect dev bh" for _, a in ifaces]
                # ICMPv6 errors only (type < 128 at the byte after the fixed
                # header): neighbour discovery from these addresses must pass
                # or the node's neighbours could not resolve it.
                lines += [f"tc filter add dev {dev} egress protocol ipv6 prio 3 u32 "
                          f"match ip6 protocol 58 0xff match ip6 src {a}/128 "
                          f"match u8 0x00 0x80 at 40 "
                          f"action mirred egress redirect dev bh"
                          for _, a in self.node_ifaces6(k)]
        return lines

    def _build(self) -> None:
        n = self.n
        for k in range(n + 1):
            run(["ip", "netns", "add", self.ns(k)])
        for k in range(n + 1):
            ns_script(self.ns(k), self._base_lines(forward=True))
        for i in range(1, n + 1):
            if self.spec.links[i - 1].delayed():
                self._add_delay_wires(i)
            else:
                run(["ip", "-n", self.ns(i - 1), "link", "add", "dn", "type", "veth",
                     "peer", "name", "up", "netns", self.ns(i)])
        for k in range(n + 1):
            lines: List[str] = []
            if k >= 1:
                lines += self._iface_lines("up", f"{self.link_ip(k, 'down')}/24",
                                           f"{self.link_ip6(k, 'down')}/64")
                lines += self._shaper_lines(k, "rev")
            if k < n:
                lines += self._iface_lines("dn", f"{self.link_ip(k + 1, 'up')}/24",
                                           f"{self.link_ip6(k + 1, 'up')}/64")
                lines += self._shaper_lines(k + 1, "fwd")
            for i in range(1, n + 1):
                lines += self._route_lines(k, f"198.18.{i}.0/24",
                                           i if i > k else i - 1, k in (i - 1, i),
                                           f"2001:2:0:{i}::/64")
            if k in self.silent:
                lines += self._icmp_lines(k, True)
            if k >= 1 and self.spec.network_cpu is not None:
                mask = format(1 << int(self.spec.network_cpu), "x")
                for dev in (("up",) if k >= 1 else ()) + (("dn",) if k < n else ()):
                    lines.append(f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus")
            ns_script(self.ns(k), lines)
        for i in range(1, n + 1):
            if self.spec.links[i - 1].delayed():
                self._start_delay(i)
        for i in self.spec.cross_links:
            self.ensure_cross_hosts(i)

    # ---- delay nodes ------------------------------------------------------------
    def delay_ns(self, i: int) -> str:
        """Namespace of link i's delay node (exists only if the link has a delay)."""
        self._check_link(i)
        return f"{self.prefix}d{i}"

    def _add_delay_wires(self, i: int) -> None:
        d = self.delay_ns(i)
        run(["ip", "netns", "add", d])
        run(["ip", "-n", self.ns(i - 1), "link", "add", "dn", "type", "veth",
             "peer", "name", "d0", "netns", d])
        run(["ip", "-n", d, "link", "add", "d1", "type", "veth",
             "peer", "name", "up", "netns", self.ns(i)])

    def _start_delay(self, i: int) -> None:
        """Configure link i's delay node (no addresses, no IPv6, no offloads)
        and start lw_delay in it; waits for its "ready"."""
        from .traffic import tool_path
        link, d = self.spec.links[i - 1], self.delay_ns(i)
        tool = tool_path("lw_delay", "LINKWIDTH_DELAY")
        if not os.access(tool, os.X_OK):
            raise LabError(f"{tool} not built (cmake --build build --target lw_delay)")
        lines = self._base_lines(forward=False)
        for dev in ("d0", "d1"):
            lines += [f"ip link set dev {dev} mtu {self.spec.mtu}",
                      f"ethtool -K {dev} tso off gso off gro off tx off rx off >/dev/null",
                      f"ip link set dev {dev} promisc on",
                      f"ip link set dev {dev} up"]
        ns_script(d, lines)
        # Queue memory per direction: twice what the link can have in flight
        # over the delay (1 Gbit/s when unshaped), at least 4 MB.
        rate = max(r or 1e9 for r in (link.fwd(), link.rev()))
        limit = max(4 << 20, int(2 * rate / 8 * max(link.delay("fwd"), link.delay("rev")) / 1000))
        cmd = [tool, "d0", "d1", f"{link.delay('fwd'):g}", f"{link.delay('rev'):g}",
               "--limit", str(limit), "--max-frame", str(self.spec.mtu + ETH_HDR + 4)]
        if self.spec.delay_cpu is not None:
            cmd = ["taskset", "-c", str(int(self.spec.delay_cpu)), *cmd]
        log = self.log_path(f"delay{i}.log")
        p = subprocess.Popen(ns_exec_cmd(d, cmd), stdout=open(log, "ab"),
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        if not self.keep:           # a kept lab's delay nodes outlive this process
            self._procs.append(p)
        self._delays[i] = (p, log)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with open(log, "rb") as f:
                if b"ready" in f.read():
                    return
            if p.poll() is not None:
                break
            time.sleep(0.01)
        with open(log, "rb") as f:
            out = f.read().decode(errors="replace").strip()
        raise LabError(f"lw_delay on link {i} did not start: {out}")

    def stop_delays(self) -> Dict[int, dict]:
        """Stop every delay node (the links are cut after this) and return
        its counters (lw_delay's exit JSON) by link index."""
        out: Dict[int, dict] = {}
        for i, (p, log) in sorted(self._delays.items()):
            self.stop_process(p)
            with open(log, "rb") as f:
                for line in f.read().decode(errors="replace").splitlines():
                    if line.startswith("{"):
                        out[i] = json.loads(line)
        self._delays.clear()
        return out

    def base_rtt_ms(self) -> float:
        """Sum of the delay nodes' one-way delays, both directions (ms)."""
        return sum(l.delay("fwd") + l.delay("rev") for l in self.spec.links)

    def ensure_cross_hosts(self, i: int) -> None:
        """Create cross-traffic hosts xs{i} (on node i-1) and xr{i} (on node i)
        for link i unless they exist; routes make xs{i}->xr{i} cross exactly
        link i."""
        self._check_link(i)
        if i in self.cross_hosts:
            return
        if not self._started:
            raise LabError("lab not started")
        xs, xr = self.ns(f"xs{i}"), self.ns(f"xr{i}")
        run(["ip", "netns", "add", xs])
        run(["ip", "netns", "add", xr])
        self.cross_hosts.add(i)
        for host in (xs, xr):
            ns_script(host, self._base_lines(forward=False))
        run(["ip", "-n", self.ns(i - 1), "link", "add", f"xs{i}", "type", "veth",
             "peer", "name", "eth0", "netns", xs])
        run(["ip", "-n", self.ns(i), "link", "add", f"xr{i}", "type", "veth",
             "peer", "name", "eth0", "netns", xr])
        xs_net, xr_net = f"198.19.{i}.0/24", f"198.19.{100 + i}.0/24"
        xs_net6, xr_net6 = f"2001:2:0:a{i:02d}::/64", f"2001:2:0:b{i:02d}::/64"
        for host, net, ip, net6, ip6 in ((xs, xs_net, self.xs_ip(i), xs_net6, self.xs_ip6(i)),
                                         (xr, xr_net, self.xr_ip(i), xr_net6, self.xr_ip6(i))):
            gw = net.replace(".0/24", ".1")
            gw6 = net6.replace("::/64", "::1")
            ns_script(host, self._iface_lines("eth0", f"{ip}/24", f"{ip6}/64") +
                      [f"ip route add {util.LAB_NET} via {gw} dev eth0"] +
                      ([f"ip -6 route add {util.LAB_NET6} via {gw6} dev eth0"]
                       if self.spec.ipv6 else []))
        for k in range(self.n + 1):
            lines: List[str] = []
            if k == i - 1:
                lines += self._iface_lines(f"xs{i}", xs_net.replace(".0/24", ".1/24"),
                                           xs_net6.replace("::/64", "::1/64"))
            if k == i:
                lines += self._iface_lines(f"xr{i}", xr_net.replace(".0/24", ".1/24"),
                                           xr_net6.replace("::/64", "::1/64"))
            lines += self._route_lines(k, xs_net, i - 1, k == i - 1, xs_net6)
            lines += self._route_lines(k, xr_net, i, k == i, xr_net6)
            if k in self.silent and k in (i - 1, i):   # new iface, new address
                lines += self._icmp_lines(k, True)
            ns_script(self.ns(k), lines)
        if self.keep:
            self.save_state()

    # ---- runtime changes ------------------------------------------------------
    def set_rate(self, i: int, rate, direction: str = "fwd") -> None:
        """Change link i's rate in one direction (None = unshaped) live."""
        self._check_link(i)
        link = self.spec.links[i - 1]
        rate = parse_rate(rate)
        if direction == "fwd":
            if link.rev_rate == SAME:
                link.rev_rate = link.rate
            link.rate = rate
        else:
            link.rev_rate = rate
        node, _ = self.link_iface(i, direction)
        ns_script(self.ns(node), self._shaper_lines(i, direction))
        if self.keep:
            self.save_state()

    def set_router_icmp(self, k: int, enabled: bool) -> None:
        """Make chain node k send (True) or suppress (False) ICMP errors."""
        k = self.node_index(k)
        ns_script(self.ns(k), self._icmp_lines(k, not enabled))
        (self.silent.discard if enabled else self.silent.add)(k)
        if self.keep:
            self.save_state()

    def set_target_firewall(self, drop_syn: bool = False, reject: bool = False,
                            port: Optional[int] = None, drop_tcp: bool = False) -> None:
        """Firewall on the target for TCP SYNs to the target address (optionally
        only to ``port``).  ``drop_syn``: silently drop them (tc ingress u32 +
        mirred to a blackhole ifb with a 0-packet pfifo; IPv4 without options);
        bare ACKs still pass, so linkwidth's ACK markers work (a host without a
        stateful firewall).  ``drop_tcp``: the same for every TCP packet (a
        filtered host).  ``reject``: answer ICMP admin-prohibited instead (needs
        nftables).  All False: remove the firewall."""
        if drop_tcp:
            drop_syn = True
        if drop_syn and reject:
            raise LabError("choose drop_syn or reject, not both")
        ns = self.target_ns
        ns_script(ns, ["tc filter del dev up ingress prio 1 2>/dev/null || true",
                       "nft delete table ip lwfw 2>/dev/null || true",
                       "nft delete table ip6 lwfw6 2>/dev/null || true"])
        self.firewall = {}
        if self.spec.ipv6 and (drop_syn or reject):
            # IPv6 (dual-stack labs): the same rule in nftables, for SYNs to
            # the target's IPv6 address: dropped, or answered with ICMPv6
            # destination unreachable code 1 (administratively prohibited).
            if subprocess.run(ns_exec_cmd(ns, ["sh", "-c", "command -v nft"]),
                              capture_output=True).returncode != 0:
                raise LabError("an IPv6 firewall needs nftables: run scripts/install-deps.sh")
            dport6 = f" tcp dport {int(port)}" if port else ""
            verdict = "drop" if drop_syn else "reject with icmpv6 type admin-prohibited"
            ns_script(ns, [
                "nft add table ip6 lwfw6",
                "nft add chain ip6 lwfw6 input '{ type filter hook input priority 0; }'",
                f"nft add rule ip6 lwfw6 input ip6 daddr {self.target_ip6}{dport6} "
                f"{'meta l4proto tcp' if drop_tcp else chr(39) + 'tcp flags & (syn|ack) == syn' + chr(39)}"
                f" counter {verdict}",
            ])
        if drop_syn:
            ports = f"match u16 {int(port)} 0xffff at 22 " if port else ""
            ns_script(ns, self._blackhole_lines("fwbh") + [
                "tc qdisc add dev up clsact 2>/dev/null || true",
                # IHL=5, proto TCP, dst = target, flags & (SYN|ACK) == SYN
                f"tc filter add dev up ingress protocol ip prio 1 u32 "
                f"match u8 0x05 0x0f at 0 match ip protocol 6 0xff "
                f"match ip dst {self.target_ip}/32 "
                f"{'' if drop_tcp else 'match u8 0x02 0x12 at 33 '}{ports}"
                f"action mirred egress redirect dev fwbh",
            ])
        elif reject:
            if subprocess.run(ns_exec_cmd(ns, ["sh", "-c", "command -v nft"]),
                              capture_output=True).returncode != 0:
                raise LabError("reject needs nftables: run scripts/install-deps.sh")
            dport = f" tcp dport {int(port)}" if port else ""
            ns_script(ns, [
                "nft add table ip lwfw",
                "nft add chain ip lwfw input '{ type filter hook input priority 0; }'",
                f"nft add rule ip lwfw input ip daddr {self.target_ip}{dport} "
                f"'tcp flags & (syn|ack) == syn' reject with icmp type admin-prohibited",
            ])
        if drop_syn or reject:
            self.firewall = {"drop_syn": drop_syn, "reject": reject, "port": port,
                             "drop_tcp": drop_tcp}

    def set_target_open_only(self, ports: Optional[Sequence[int]] = (443,),
                             stateful: bool = False) -> None:
        """A server behind a firewall that drops every TCP packet to the target
        except those to ``ports`` (nftables on the target, table ``inet
        lwop``; in dual-stack labs for its IPv4 and IPv6 addresses alike): its
        closed ports never answer.  ``stateful``: a cloud security group
        (conntrack: established/related accepted, invalid dropped, new only to
        ``ports``).  Open the ports with ``listen``.  ``ports=None`` removes it."""
        rules = []
        if ports:
            allowed = ", ".join(str(int(p)) for p in ports)
            dsts = [f"ip daddr {self.target_ip}"] + \
                ([f"ip6 daddr {self.target_ip6}"] if self.spec.ipv6 else [])
            for dst in dsts:
                if stateful:
                    rules += [f"{dst} ct state established,related accept",
                              f"{dst} ct state invalid counter drop"]
                rules += [f"{dst} tcp dport {{ {allowed} }} accept",
                          f"{dst} meta l4proto tcp counter drop"]
        self._nft_table("target", "inet lwop", "input", rules, "an open-ports-only firewall")

    def set_reply_routing_header(self, on: bool = True) -> None:
        """Make the target's IPv6 packets to the prober's subnet carry a
        segment routing header (RFC 8754, next header 43) all the way:
        the target inserts it (seg6 lwtunnel, inline mode) with the router
        before it as the one segment; that router (seg6 enabled on its ``dn``)
        moves the packet on to the prober with segments left 0, header kept.
        Needs Spec.ipv6 and a router before the target (N >= 2).
        ``on=False``: the plain route again."""
        self._need_v6()
        if self.n < 2:
            raise LabError("a routing header on the replies needs a router before the target")
        hop = self.link_ip6(self.n, "up")
        encap = f" encap seg6 mode inline segs {hop}" if on else ""
        for dev in ("all", "dn"):
            ns_script(self.ns(self.n - 1),
                      [f"echo {int(on)} > /proc/sys/net/ipv6/conf/{dev}/seg6_enabled"])
        try:
            ns_script(self.target_ns,
                      [f"ip -6 route replace 2001:2:0:1::/64{encap} via {hop} dev up"])
        except LabError as e:
            # Kernels built without CONFIG_IPV6_SEG6_LWTUNNEL (this VM's
            # 6.18 of 2026-12-04) refuse the encap.
            if "encapsulation type not supported" in str(e):
                raise LabUnsupported("this kernel cannot insert a segment routing header "
                                     "(no seg6 lwtunnel: 'ip -6 route ... encap seg6' says "
                                     "'lwt encapsulation type not supported')") from e
            raise

    def half_open(self, node="target") -> List[str]:
        """Half-open TCP connections in ``node``: sockets in SYN-RECV (``ss``;
        request sockets are listed there) and conntrack entries in SYN_SENT or
        SYN_RECV (/proc/net/nf_conntrack, when conntrack runs in the node)."""
        out = []
        cp = self.exec(node, ["ss", "-Htan", "state", "syn-recv"])
        out += [f"ss: {l.strip()}" for l in cp.stdout.splitlines() if l.strip()]
        cp = self.exec(node, ["sh", "-c", "cat /proc/net/nf_conntrack 2>/dev/null || true"])
        out += [f"conntrack: {l.strip()}" for l in cp.stdout.splitlines()
                if " SYN_SENT " in l or " SYN_RECV " in l]
        return out

    def conntrack_entries(self, node="target") -> List[str]:
        """Every conntrack entry of ``node`` (empty when conntrack is not in use)."""
        cp = self.exec(node, ["sh", "-c", "cat /proc/net/nf_conntrack 2>/dev/null || true"])
        return [l.strip() for l in cp.stdout.splitlines() if l.strip()]

    def drop_kernel_resets(self, on: bool = True, node="prober") -> None:
        """Drop the TCP RSTs ``node``'s kernel sends (nftables output, table
        ``inet lwkr``): its answers to SYN/ACKs it has no socket for.  IPv4:
        the 40-byte ones (linkwidth's own closers are longer,
        plan/target_marker.hpp).  IPv6: a closer is 60 bytes as the kernel's
        RST is, so they are told apart by their socket: every packet of
        linkwidth leaves through its raw socket, opened by root before the
        privilege drop (``meta skuid 0``), while the kernel's come from no
        user's socket.  A lab test then shows that no half-open connection
        depends on the kernel's resets.  ``kernel_resets`` counts what was
        dropped."""
        rst = "'tcp flags & (syn|rst) == rst'"
        rules = [f"{rst} ip length 40 counter drop",
                 f"meta nfproto ipv6 {rst} meta skuid 0 accept",
                 f"meta nfproto ipv6 {rst} counter drop"] if on else []
        self._nft_table(node, "inet lwkr", "out", rules, "dropping kernel resets", hook="output")

    def kernel_resets(self, node="prober") -> int:
        return self._nft_counted(node, "inet lwkr")

    def _nft_table(self, node, table: str, chain: str, rules: Sequence[str], what: str,
                   hook: str = "input") -> None:
        """Replace nftables table ``table`` ("family name") in ``node`` by one
        with a filter chain ``chain`` on ``hook`` (priority 0) holding
        ``rules`` (rule bodies, shell-quoted where they need it).  No rules:
        the table is only removed.  ``what`` names the feature for the error
        when nft is missing."""
        ns = self.ns(node)
        ns_script(ns, [f"nft delete table {table} 2>/dev/null || true"])
        if not rules:
            return
        if subprocess.run(ns_exec_cmd(ns, ["sh", "-c", "command -v nft"]),
                          capture_output=True).returncode != 0:
            raise LabError(f"{what} needs nftables: run scripts/install-deps.sh")
        ns_script(ns, [f"nft add table {table}",
                       f"nft add chain {table} {chain} "
                       f"'{{ type filter hook {hook} priority 0; }}'",
                       *[f"nft add rule {table} {chain} {r}" for r in rules]])

    def _nft_counted(self, node, table: str) -> int:
        """Packets counted so far by the ``counter`` rules of ``table``
        ("family name") in ``node``; 0 when it does not exist."""
        cp = self.exec(node, ["nft", "-j", "list", "table", *table.split()])
        try:
            items = json.loads(cp.stdout)["nftables"]
        except (ValueError, KeyError):
            return 0
        return sum(int(e["counter"].get("packets", 0))
                   for it in items for e in it.get("rule", {}).get("expr", [])
                   if "counter" in e)

    def set_target_rst_limit(self, per_s: Optional[float], burst: int = 5) -> None:
        """Make the target limit the TCP RSTs it sends, as FreeBSD and macOS do
        (net.inet.icmp.icmplim): at most ``per_s`` per second with a bucket of
        ``burst`` (nftables ``limit`` in the output hook; the rest is dropped and
        counted).  ``per_s`` None: remove the limit."""
        rst = "'tcp flags & rst == rst'"
        rules = [f"{rst} limit rate {int(per_s)}/second burst {int(burst)} packets accept",
                 f"{rst} counter drop"] if per_s is not None else []
        self._nft_table("target", "ip lwrl", "out", rules, "an RST limit", hook="output")

    def rst_limit_drops(self) -> int:
        """RSTs the target's RST limit has dropped so far."""
        return self._nft_counted("target", "ip lwrl")

    MIDDLEBOX_MODES = ("reset", "drop_rst")

    def set_middlebox(self, router: int, mode: Optional[str], limit: Optional[str] = None,
                      every: Optional[int] = None) -> None:
        """Make router ``router`` (1..N-1) a middlebox on the path (nftables
        forward chain, table ``lwmb``):

        * ``"reset"``: it answers every SYN towards the target itself with a
          TCP reset (``reject with tcp reset``: an RST/ACK that carries the
          target's address, sent with the router's own initial TTL), so the
          SYN never reaches the target.
        * ``"drop_rst"``: a stateful firewall that drops TCP RSTs coming from
          the prober's side unless they belong to an established (conntrack
          "assured") connection; SYNs and the target's replies pass.  Our RST
          load then never reaches the links after it.
        * ``None``: remove it.

        ``limit`` (nft rate, e.g. ``"20/second burst 2 packets"``): the box acts
        on at most that many packets; the rest pass as if it were not there
        (with ``"reset"``: some replies from the box, some from the target).
        ``every`` (N >= 2): the box acts on every N-th such packet only
        (``numgen inc mod N == 0``), whatever the timing: a mix that does not
        depend on how fast the prober sends."""
        k = self.node_index(router)
        if not 1 <= k <= self.n - 1:
            raise LabError(f"middlebox must be a router (r1..r{self.n - 1}), got {router!r}")
        if mode is not None and mode not in self.MIDDLEBOX_MODES:
            raise LabError(f"bad middlebox mode {mode!r}: {', '.join(self.MIDDLEBOX_MODES)}")
        self.middlebox.pop(str(k), None)
        rules = []
        if mode is not None:
            if every is not None and (not isinstance(every, int) or every < 2):
                raise LabError(f"middlebox every must be an integer >= 2, got {every!r}")
            lim = (f" numgen inc mod {every} == 0" if every else "") + \
                (f" limit rate {limit}" if limit else "")
            rst = "iifname up 'tcp flags & rst == rst'"
            rules = ([f"ip daddr {self.target_ip} "
                      f"'tcp flags & (syn|ack) == syn'{lim} counter reject with tcp reset"]
                     if mode == "reset" else
                     [f"{rst} ct status assured accept", f"{rst}{lim} counter drop"])
            self.middlebox[str(k)] = mode + (f" limit {limit}" if limit else "") + \
                (f" every {every}" if every else "")
        self._nft_table(k, "ip lwmb", "path", rules, "a middlebox", hook="forward")
        if self.keep:
            self.save_state()

    def set_duplicate_replies(self, router: int, on: bool = True) -> None:
        """Make router ``router`` (1..N-1) send every TCP packet it forwards
        towards the prober twice (nftables ``dup`` in the forward chain, table
        ``lwdup``): duplicated replies, as a misbehaving path or a mirror port
        produces them."""
        k = self.node_index(router)
        if not 1 <= k <= self.n - 1:
            raise LabError(f"duplication must be on a router (r1..r{self.n - 1}), got {router!r}")
        # The copy goes out of `up` to the next hop towards the prober.
        rules = [f"ip daddr {self.prober_ip} oifname up ip protocol tcp "
                 f"counter dup to {self.link_ip(k, 'up')} device up"] if on else []
        self._nft_table(k, "ip lwdup", "path", rules, "duplicating replies", hook="forward")

    def set_random_loss(self, link: int, fraction: Optional[float],
                        direction: str = "fwd") -> None:
        """Drop a random ``fraction`` (0..0.5) of every packet that crossed
        link ``link`` in ``direction``, after its shaper (a lossy wire: radio,
        a bad cable, an overloaded switch port).  nftables ``numgen random``
        in the prerouting hook of the node the link leads to (table
        ``lwloss`` "fwd" or "rev" chain), so forwarded and delivered packets
        alike; probes, replies and cross traffic all lose.  ``fraction`` None
        or 0: no loss in that direction."""
        self._check_link(link)
        if direction not in ("fwd", "rev"):
            raise LabError(f"bad direction {direction!r}: fwd or rev")
        if fraction is not None and not 0 <= fraction <= 0.5:
            raise LabError(f"loss fraction must lie in [0, 0.5], got {fraction!r}")
        node, dev = (link, "up") if direction == "fwd" else (link - 1, "dn")
        per_10k = int(round((fraction or 0) * 10000))
        rules = [f"iifname {dev} 'numgen random mod 10000 < {per_10k}' counter drop"] \
            if per_10k > 0 else []
        self._nft_table(node, f"inet lwloss{direction}", "lossy", rules, "random loss",
                        hook="prerouting")

    def random_loss_drops(self, link: int, direction: str = "fwd") -> int:
        """Packets set_random_loss has dropped on ``link`` in ``direction``."""
        node = link if direction == "fwd" else link - 1
        return self._nft_counted(node, f"inet lwloss{direction}")

    def middlebox_hits(self, router: int) -> int:
        """Packets the middlebox on ``router`` has reset or dropped so far."""
        return self._nft_counted(router, "ip lwmb")

    def firewall_drops(self) -> int:
        """Packets dropped so far by the target's SYN-drop firewall."""
        cp = self.exec("target", ["tc", "-s", "-j", "qdisc", "show", "dev", "fwbh"])
        try:
            return int(json.loads(cp.stdout)[0].get("drops", 0))
        except (ValueError, IndexError):
            return 0

    # ---- processes ------------------------------------------------------------
    def exec(self, node, cmd: Sequence, check: bool = False, timeout: Optional[float] = None,
             input: Optional[str] = None, capture: bool = True) -> subprocess.CompletedProcess:
        """Run ``cmd`` in a node's namespace and wait; text output captured
        unless capture=False."""
        kw = dict(capture_output=True, text=True) if capture else {}
        return subprocess.run(ns_exec_cmd(self.ns(node), cmd), check=check,
                              timeout=timeout, input=input, **kw)

    def prober_cpus(self) -> Optional[str]:
        """CPU list for the prober when the network has a CPU of its own."""
        if self.spec.network_cpu is None:
            return None
        others = [c for c in range(os.cpu_count() or 1) if c != int(self.spec.network_cpu)]
        return ",".join(map(str, others)) if others else None

    def run_in_prober(self, cmd: Sequence, timeout: Optional[float] = None,
                      check: bool = False, **kw) -> subprocess.CompletedProcess:
        cpus = self.prober_cpus()
        if cpus:
            cmd = ["taskset", "-c", cpus, *cmd]
        p = self.exec(0, cmd, check=check, timeout=timeout, **kw)
        keep_document(p)
        return p

    def log_path(self, name: str) -> str:
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix=f"lw-{self.id}-")
        return os.path.join(self._tmp, name)

    def popen(self, node, cmd: Sequence, log: Optional[str] = None, **kw) -> subprocess.Popen:
        """Start a tracked background process in a node (killed at close()).
        Output goes to file ``log`` (see log_path) or /dev/null."""
        if "stdout" not in kw:
            kw["stdout"] = open(log, "ab") if log else subprocess.DEVNULL
            kw.setdefault("stderr", subprocess.STDOUT)
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(ns_exec_cmd(self.ns(node), cmd), start_new_session=True, **kw)
        if log and hasattr(kw["stdout"], "close"):
            kw["stdout"].close()
        self._procs.append(p)
        return p

    def stop_process(self, p: subprocess.Popen, grace: float = 1.0) -> None:
        if p.poll() is None:
            util.kill_pids([p.pid], grace)
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        if p in self._procs:
            self._procs.remove(p)

    def alloc_port(self) -> int:
        self._next_port += 1
        return self._next_port - 1

    def listen(self, port: int, node="target", timeout: float = 5) -> subprocess.Popen:
        """Open TCP ``port`` on ``node`` (a listener that accepts and closes)."""
        p = self.popen(node, [sys.executable, "-c", _LISTENER, str(int(port))],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        line = p.stdout.readline().decode(errors="replace").strip()
        if line != "ready":
            self.stop_process(p)
            raise LabError(f"listener on {node}:{port} failed: {line}")
        return p

    # ---- counters ---------------------------------------------------------------
    def iface_stats(self, node, ifname: str) -> Dict[str, int]:
        """Raw interface counters (rx/tx bytes, packets, dropped) of ``ifname``
        in ``node``.  veth byte counters include the 14-byte Ethernet header."""
        cp = run(["ip", "-n", self.ns(node), "-s", "-j", "link", "show", "dev", ifname])
        st = json.loads(cp.stdout)[0]["stats64"]
        return {f"{d}_{k}": int(st[d][k]) for d in ("rx", "tx")
                for k in ("bytes", "packets", "dropped")}

    def link_counters(self, i: int, direction: str = "fwd") -> Dict[str, int]:
        """Counters of the shaped interface of link i (tx_* = everything that
        left through the shaper: probes + cross traffic)."""
        node, dev = self.link_iface(i, direction)
        return self.iface_stats(node, dev)

    def qdisc_stats(self, i: int, direction: str = "fwd") -> Dict[str, int]:
        """Root qdisc stats of link i's shaper: bytes, packets, drops,
        overlimits, backlog (bytes), qlen.  Empty dict if unshaped."""
        node, dev = self.link_iface(i, direction)
        cp = run(["ip", "netns", "exec", self.ns(node), "tc", "-s", "-j", "qdisc",
                  "show", "dev", dev, "root"])
        for q in json.loads(cp.stdout or "[]"):
            if q.get("kind") in SHAPERS:
                return {k: int(q.get(k, 0)) for k in
                        ("bytes", "packets", "drops", "overlimits", "backlog", "qlen")}
        return {}

    # ---- cross traffic ----------------------------------------------------------
    def cross(self, link: int, kind: str = "udp", **params):
        """Start cross traffic on ``link`` and return the (running) generator;
        use as a context manager or call .stop().  Kinds: see traffic.CROSS_KINDS
        ("udp": rate, size; "tcp": flows; "poisson": rate, sizes)."""
        from .traffic import CROSS_KINDS
        if kind not in CROSS_KINDS:
            raise LabError(f"unknown cross-traffic kind {kind!r}: {', '.join(CROSS_KINDS)}")
        x = CROSS_KINDS[kind](self, link, **params)
        x.start()
        return x

    def cross_window(self, link: int):
        """CounterWindow (started) on xr{link}'s interface: IP-layer rate of
        cross traffic that actually crossed ``link``."""
        from .traffic import CounterWindow
        self.ensure_cross_hosts(link)
        return CounterWindow(self, f"xr{link}", "eth0", "rx").start()

    def measure_cross(self, link: int, seconds: float) -> float:
        """IP-layer bit/s arriving at xr{link} over the next ``seconds``."""
        w = self.cross_window(link)
        time.sleep(seconds)
        return w.stop().bps

    # ---- description / state ------------------------------------------------------
    def info(self) -> dict:
        links = []
        for i in range(1, self.n + 1):
            l = self.spec.links[i - 1]
            links.append({
                "index": i, "upstream": self.node_name(i - 1), "downstream": self.node_name(i),
                "subnet": f"198.18.{i}.0/24", "up_ip": self.link_ip(i, "up"),
                "down_ip": self.link_ip(i, "down"), "shaper": l.shaper, "burst": l.burst, "peakrate": l.peakrate,
                "fwd_rate": l.fwd(), "rev_rate": l.rev(),
                "fwd_limit": l.queue_limit("fwd"), "rev_limit": l.queue_limit("rev"),
                "fwd_delay_ms": l.delay("fwd"), "rev_delay_ms": l.delay("rev"),
                "fwd_iface": "%s:%s" % self.link_iface(i, "fwd"),
                "rev_iface": "%s:%s" % self.link_iface(i, "rev"),
                "fwd_ip_capacity_1500": ip_capacity(l.fwd()),
                "rev_ip_capacity_1500": ip_capacity(l.rev()),
            })
        return {
            "name": self.id, "prefix": self.prefix,
            "namespaces": {node: self.ns(node) for node in self.nodes} |
                          {f"x{t}{i}": self.ns(f"x{t}{i}") for i in sorted(self.cross_hosts)
                           for t in "sr"},
            "addresses": {node: self.node_ip(k) for k, node in enumerate(self.nodes)} |
                         {f"x{t}{i}": (self.xs_ip(i) if t == "s" else self.xr_ip(i))
                          for i in sorted(self.cross_hosts) for t in "sr"},
            "prober_ip": self.prober_ip, "target_ip": self.target_ip,
            **({"ipv6": True,
                "addresses6": {node: self.node_ip6(k) for k, node in enumerate(self.nodes)},
                "prober_ip6": self.prober_ip6, "target_ip6": self.target_ip6}
               if self.spec.ipv6 else {}),
            "links": links,
            "silent_routers": sorted(self.silent), "firewall": self.firewall,
            "middlebox": self.middlebox,
            "cross_hosts": sorted(self.cross_hosts),
            "truth": {
                "narrow_link_fwd": self.narrow_link("fwd"),
                "narrow_link_rev": self.narrow_link("rev"),
                "capacity_fwd_ip1500": self.ground_truth_capacity(1500, "fwd"),
                "capacity_rev_ip1500": self.ground_truth_capacity(1500, "rev"),
                "capacity_fwd_ip40": self.ground_truth_capacity(40, "fwd"),
                "capacity_rev_ip40": self.ground_truth_capacity(40, "rev"),
                "added_rtt_ms": self.base_rtt_ms(),
            },
        }

    def state_path(self) -> str:
        return os.path.join(STATE_DIR, f"{self.id}.json")

    def save_state(self) -> None:
        os.makedirs(STATE_DIR, exist_ok=True)
        state = {"name": self.id, "spec": self.spec.to_dict(),
                 "cross_hosts": sorted(self.cross_hosts), "silent": sorted(self.silent),
                 "firewall": self.firewall, "middlebox": self.middlebox,
                 "saved": time.time()}
        tmp = self.state_path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, self.state_path())

    def _remove_state(self) -> None:
        try:
            os.unlink(self.state_path())
        except FileNotFoundError:
            pass

    @classmethod
    def attach(cls, name: str) -> "Lab":
        """Lab object for a lab left up by the CLI (``keep``: close() leaves
        the namespaces; destroy() removes them)."""
        path = os.path.join(STATE_DIR, f"{name}.json")
        try:
            with open(path) as f:
                st = json.load(f)
        except FileNotFoundError:
            raise LabError(f"no lab {name!r} (no {path}); see 'lab.py list'") from None
        lab = cls(Spec.from_dict(st["spec"]), name=name, keep=True)
        lab.cross_hosts = set(st.get("cross_hosts", ()))
        lab.silent = set(st.get("silent", ()))
        lab.firewall = st.get("firewall", {})
        lab.middlebox = st.get("middlebox", {})
        lab._started = True
        _install_signal_handlers()
        _LIVE.append(lab)
        _hold_cpu_latency()
        if not util.list_namespaces(lab.prefix):
            raise LabError(f"lab {name!r} has a state file but no namespaces; "
                           f"run 'lab.py down {name}'")
        return lab
