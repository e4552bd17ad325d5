"""Low-level helpers: constants, rate parsing, subprocess and netns utilities.

Nothing in here touches the root network namespace: every network command is
run either with ``ip -n NS`` or ``ip netns exec NS``; the only root-namespace
operations are ``ip netns add/del/list/pids`` (which manage the namespace
objects themselves).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterable, List, Optional, Sequence

PREFIX = "lw-"                      # every lab namespace starts with this
STATE_DIR = "/run/linkwidth-lab"    # CLI state files: STATE_DIR/NAME.json
ETH_HDR = 14                        # Ethernet header bytes (counted by tbf/htb and veth counters)
MTU = 1500
DEFAULT_BURST = 2 * (MTU + ETH_HDR)  # 3028 bytes = two full frames
MIN_LIMIT = 2_000_000               # default queue limit floor (bytes)
LIMIT_SECONDS = 0.100               # default queue limit = max(MIN_LIMIT, 100 ms * rate)

# Only these two /16s are ever used (198.18.0.0/15, RFC 2544 benchmarking).
LAB_NET = "198.18.0.0/15"
# IPv6 (Spec.ipv6): only the benchmarking prefix 2001:2::/48 (RFC 5180).
LAB_NET6 = "2001:2::/48"


def delete_netns_etc(ns: str) -> None:
    """Remove /etc/netns/``ns`` (files ``ip netns exec`` bind-mounts over
    /etc, e.g. the dual-stack hosts file of Lab.add_host_name)."""
    d = os.path.join("/etc/netns", ns)
    if ns.startswith(PREFIX) and os.path.isdir(d):
        shutil.rmtree(d, ignore_errors=True)


class LabError(RuntimeError):
    """Any failure to build, drive or tear down a lab (bad input included)."""


class LabUnsupported(LabError):
    """The running kernel lacks a feature a lab set-up needs (its own words
    in the message); a test that needs it skips, naming it."""


# --------------------------------------------------------------------------
# rates
# --------------------------------------------------------------------------

_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)"
                      r"(?:bit|bps|b)?(?:/s)?\s*$")
_MULT = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_NONE_WORDS = {"none", "-", "inf", "unshaped", "off"}


def parse_rate(text) -> Optional[float]:
    """Parse a rate in bit/s: ``50M`` -> 50e6, ``1.5G``, ``800k``, ``1e9``,
    ``100Mbit``.  Suffixes are decimal SI (K=1e3, M=1e6, G=1e9).  ``none``,
    ``-``, ``inf`` or ``off`` mean unshaped and give ``None``.  Numbers pass
    through.  Raises LabError on anything else or on a rate <= 0."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        val = float(text)
    else:
        s = str(text).strip()
        if s.lower() in _NONE_WORDS:
            return None
        m = _RATE_RE.match(s)
        if not m:
            raise LabError(f"bad rate {text!r}: expected e.g. 50M, 1G, 800K, 1e9 or 'none'")
        val = float(m.group(1)) * _MULT[m.group(2).lower()]
    if not val > 0 or val != val or val == float("inf"):
        raise LabError(f"bad rate {text!r}: must be a positive number of bit/s")
    return val


def format_rate(bps: Optional[float]) -> str:
    """Human-readable rate (``50M``, ``1G``, ``none``)."""
    if bps is None:
        return "none"
    for suffix, mult in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if bps >= mult:
            v = bps / mult
            return (f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}") + suffix
    return f"{bps:g}"


def ip_capacity(rate_bps: Optional[float], ip_len: int = 1500) -> Optional[float]:
    """IP-layer capacity of a link shaped at ``rate_bps`` for L-byte IP packets.

    tbf and htb charge each packet its full frame length (IP length + 14-byte
    Ethernet header), so the IP-layer rate is ``R * L / (L + 14)``.
    ``None`` (unshaped) gives ``None``."""
    if rate_bps is None:
        return None
    return float(rate_bps) * ip_len / (ip_len + ETH_HDR)


def default_limit(rate_bps: Optional[float]) -> int:
    """Default queue limit in bytes: max(2 MB, 100 ms of traffic at the rate).
    Holds a whole ~1000 x 1514-byte probe train plus cross traffic."""
    if rate_bps is None:
        return MIN_LIMIT
    return max(MIN_LIMIT, int(rate_bps * LIMIT_SECONDS / 8))


# --------------------------------------------------------------------------
# subprocess helpers
# --------------------------------------------------------------------------

def run(cmd: Sequence[str], check: bool = True, timeout: Optional[float] = 30,
        input: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run a command, capturing text output.  With check=True a non-zero exit
    raises LabError carrying the command and its stderr."""
    try:
        cp = subprocess.run(list(cmd), capture_output=True, text=True,
                            timeout=timeout, input=input)
    except FileNotFoundError as e:
        raise LabError(f"command not found: {cmd[0]} (run scripts/install-deps.sh)") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"timeout after {timeout}s: {' '.join(cmd)}") from e
    if check and cp.returncode != 0:
        raise LabError(f"command failed ({cp.returncode}): {' '.join(cmd)}\n"
                       f"{(cp.stderr or cp.stdout).strip()}")
    return cp


def ns_exec_cmd(ns: str, cmd: Sequence[str]) -> List[str]:
    return ["ip", "netns", "exec", ns] + [str(c) for c in cmd]


def ns_script(ns: str, lines: Iterable[str], timeout: float = 60) -> None:
    """Run shell lines (``sh -e``) inside namespace ``ns``; one fork for many
    commands.  On failure the LabError names the namespace and the output."""
    script = "\n".join(lines)
    if not script.strip():
        return
    cp = run(ns_exec_cmd(ns, ["sh", "-ec", script]), check=False, timeout=timeout)
    if cp.returncode != 0:
        raise LabError(f"setup of namespace {ns} failed ({cp.returncode}):\n"
                       f"{(cp.stderr + cp.stdout).strip()}\n--- script ---\n{script}")


# --------------------------------------------------------------------------
# namespaces
# --------------------------------------------------------------------------

def list_namespaces(prefix: str = PREFIX) -> List[str]:
    """Names of existing network namespaces starting with ``prefix``."""
    cp = run(["ip", "-j", "netns", "list"], check=False)
    names: List[str] = []
    out = cp.stdout.strip()
    if out:
        try:
            names = [d["name"] for d in json.loads(out)]
        except (ValueError, KeyError, TypeError):
            names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(prefix))


def ns_pids(ns: str) -> List[int]:
    cp = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as dead; reap it if it is ours
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    return True


def kill_pids(pids: Iterable[int], grace: float = 1.0) -> None:
    """SIGTERM the pids, wait up to ``grace`` s, then SIGKILL survivors."""
    pids = [p for p in set(pids) if p > 1 and p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        if pids:
            time.sleep(0.02)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in pids:  # reap our own children
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass


def delete_namespace(ns: str) -> None:
    """Kill every process in ``ns`` and delete it (its veths go with it)."""
    for _ in range(3):
        pids = ns_pids(ns)
        if not pids:
            break
        kill_pids(pids)
    run(["ip", "netns", "del", ns], check=False)
    delete_netns_etc(ns)


def cleanup_all(prefix: str = PREFIX, state_dir: str = STATE_DIR) -> List[str]:
    """Remove every namespace named ``prefix*`` (killing its processes), the
    matching state files and /tmp/``prefix*`` log directories; returns the
    namespaces removed."""
    if not prefix.startswith(PREFIX):
        raise LabError(f"refusing to clean up namespaces outside {PREFIX}*")
    gone = list_namespaces(prefix)
    for ns in gone:
        delete_namespace(ns)
    if os.path.isdir(state_dir):
        lab_id = prefix[len(PREFIX):].rstrip("-")
        for fn in os.listdir(state_dir):
            if fn.endswith(".json") and (not lab_id or fn == f"{lab_id}.json"):
                try:
                    os.unlink(os.path.join(state_dir, fn))
                except OSError:
                    pass
    # generator-log directories (Lab.log_path) of labs that died uncleanly
    for d in glob.glob(os.path.join(tempfile.gettempdir(), prefix + "*")):
        if os.path.isdir(d) and not os.path.islink(d):
            shutil.rmtree(d, ignore_errors=True)
    left = list_namespaces(prefix)
    if left:
        raise LabError(f"could not delete namespaces: {' '.join(left)}")
    return gone
