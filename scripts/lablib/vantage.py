"""A lab of several vantage points for the Ansible sweep (deploy/).

Topology (every node a network namespace ``lw-<id>-<name>`` but the
controller, which is this process in the root namespace)::

    root ns (ansible-playbook) --ctl-- hub --v1-- vantage v1 (sshd)
                                        |  --v2-- vantage v2 (sshd)
                                        |  ...
                                        |  --t1-- target t1   (shaped on hub's t1 egress)
                                        |  --t2-- target t2   ...

Addresses (all inside 198.18.0.0/15):
  controller link   198.19.250.0/30     root end .1, hub end .2
  vantage i         198.18.(100+i).0/24 hub .1, vantage .2
  target j          198.18.(110+j).0/24 hub .1, target .2
  unreachable       198.18.120.2        an ``unreachable`` route on the hub (ICMP
                                        host unreachable at once)

The only root-namespace state is the controller's veth end and one route to
the vantage subnets through it; both go away with the hub namespace (the veth
pair is deleted with it). Every vantage point runs its own OpenSSH server,
started for this lab with a host key and a client key made for the run,
listening only on the vantage point's lab address; ``inventory()`` writes an
Ansible inventory for it. ``close()`` stops every process and deletes every
namespace, also after a failure (context manager, atexit).
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from . import util
from .util import PREFIX, LabError, ip_capacity, ns_exec_cmd, ns_script, run

SSHD = "/usr/sbin/sshd"
CTL_ROOT_IP = "198.19.250.1"
CTL_HUB_IP = "198.19.250.2"
UNREACHABLE_IP = "198.18.120.2"


@dataclass
class TargetSpec:
    """One target host: ``rate`` (bit/s, hub -> target, tbf) or None
    (unshaped); ``kind``: "ok", "filtered" (drops every TCP packet) or
    "unreachable" (no host: the hub answers ICMP host unreachable)."""
    rate: Optional[float] = None
    kind: str = "ok"


class VantageLab:
    def __init__(self, vantage: int = 3, targets: Optional[List[TargetSpec]] = None,
                 name: Optional[str] = None):
        if not 1 <= vantage <= 9:
            raise LabError("vantage: 1..9 vantage points")
        self.targets = targets or [TargetSpec(rate=20e6)]
        if not 1 <= len(self.targets) <= 9:
            raise LabError("vantage: 1..9 targets")
        for t in self.targets:
            if t.kind not in ("ok", "filtered", "unreachable"):
                raise LabError(f"vantage: unknown target kind {t.kind!r}")
        self.n_vantage = vantage
        self.id = name or "v" + secrets.token_hex(3)
        self.prefix = f"{PREFIX}{self.id}-"
        self.ctl_dev = f"lwc{self.id}"[:15]
        self.tmp = tempfile.mkdtemp(prefix=f"{PREFIX}{self.id}-")
        self.sshd: Dict[int, subprocess.Popen] = {}
        self.key = os.path.join(self.tmp, "id_ed25519")
        self._started = False

    # ---- names and addresses ------------------------------------------------
    def ns(self, node: str) -> str:
        return self.prefix + node

    @staticmethod
    def vantage_ip(i: int) -> str:
        return f"198.18.{100 + i}.2"

    def target_ip(self, j: int) -> str:
        if self.targets[j - 1].kind == "unreachable":
            return UNREACHABLE_IP
        return f"198.18.{110 + j}.2"

    def vantage_names(self) -> List[str]:
        return [f"v{i}" for i in range(1, self.n_vantage + 1)]

    def truth(self, j: int) -> Optional[float]:
        """IP-layer capacity of target j's link (1500-byte packets)."""
        return ip_capacity(self.targets[j - 1].rate)

    # ---- life cycle ----------------------------------------------------------
    def __enter__(self) -> "VantageLab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "VantageLab":
        if os.geteuid() != 0:
            raise LabError("the vantage lab needs root")
        if util.list_namespaces(self.prefix):
            raise LabError(f"lab {self.id!r} already exists")
        if not os.path.exists(SSHD):
            raise LabError(f"{SSHD} not found (apt-get install openssh-server)")
        atexit.register(self.close)
        self._started = True
        try:
            self._build()
            self._keys()
            for i in range(1, self.n_vantage + 1):
                self.start_sshd(i)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if not self._started:
            return
        self._started = False
        for p in self.sshd.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(2)
                except subprocess.TimeoutExpired:
                    p.kill()
        for ns in util.list_namespaces(self.prefix):
            util.delete_namespace(ns)
        run(["ip", "link", "del", self.ctl_dev], check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)
        left = util.list_namespaces(self.prefix)
        if left:
            raise LabError(f"could not delete namespaces: {' '.join(left)}")

    # ---- building --------------------------------------------------------------
    def _add_ns(self, node: str) -> str:
        ns = self.ns(node)
        run(["ip", "netns", "add", ns])
        ns_script(ns, ["ip link set lo up", "sysctl -qw net.ipv6.conf.all.disable_ipv6=1"])
        return ns

    def _pair(self, a_ns: str, a_dev: str, b_ns: str, b_dev: str) -> None:
        tmp = "lwt" + secrets.token_hex(4)
        run(["ip", "link", "add", tmp, "type", "veth", "peer", "name", tmp + "p"])
        run(["ip", "link", "set", tmp, "netns", a_ns, "name", a_dev])
        run(["ip", "link", "set", tmp + "p", "netns", b_ns, "name", b_dev])

    def _build(self) -> None:
        hub = self._add_ns("hub")
        lines = ["sysctl -qw net.ipv4.ip_forward=1"]
        # the controller's link: one end moved to the root namespace
        run(["ip", "-n", hub, "link", "add", "ctl", "type", "veth", "peer", "name", self.ctl_dev])
        run(["ip", "-n", hub, "link", "set", self.ctl_dev, "netns", "1"])
        lines += [f"ip addr add {CTL_HUB_IP}/30 dev ctl", "ip link set ctl up"]
        run(["ip", "addr", "add", f"{CTL_ROOT_IP}/30", "dev", self.ctl_dev])
        run(["ip", "link", "set", self.ctl_dev, "up"])
        for i in range(1, self.n_vantage + 1):
            v = self._add_ns(f"v{i}")
            self._pair(hub, f"v{i}", v, "eth0")
            lines += [f"ip addr add 198.18.{100 + i}.1/24 dev v{i}", f"ip link set v{i} up"]
            ns_script(v, [f"ip addr add {self.vantage_ip(i)}/24 dev eth0", "ip link set eth0 up",
                          f"ip route add default via 198.18.{100 + i}.1"])
            # the controller reaches this vantage point through the hub
            run(["ip", "route", "add", f"198.18.{100 + i}.0/24", "via", CTL_HUB_IP])
        for j, t in enumerate(self.targets, start=1):
            if t.kind == "unreachable":
                continue
            tn = self._add_ns(f"t{j}")
            self._pair(hub, f"t{j}", tn, "eth0")
            lines += [f"ip addr add 198.18.{110 + j}.1/24 dev t{j}", f"ip link set t{j} up"]
            if t.rate:
                burst = util.DEFAULT_BURST
                limit = util.default_limit(t.rate)
                lines.append(f"tc qdisc add dev t{j} root tbf rate {int(t.rate)}bit "
                             f"burst {burst} limit {limit}")
            tl = [f"ip addr add {self.target_ip(j)}/24 dev eth0", "ip link set eth0 up",
                  f"ip route add default via 198.18.{110 + j}.1"]
            if t.kind == "filtered":
                tl += ["nft add table inet lwf",
                       "nft add chain inet lwf in '{ type filter hook input priority 0; }'",
                       "nft add rule inet lwf in meta l4proto tcp drop"]
            ns_script(tn, tl)
        if any(t.kind == "unreachable" for t in self.targets):
            lines.append("ip route add unreachable 198.18.120.0/24")
        ns_script(hub, lines)

    def _keys(self) -> None:
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key])
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
             os.path.join(self.tmp, "host_ed25519")])
        shutil.copy(self.key + ".pub", os.path.join(self.tmp, "authorized_keys"))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def start_sshd(self, i: int, timeout: float = 10) -> None:
        """(Re)start vantage point i's OpenSSH server and wait until it listens."""
        cfg = os.path.join(self.tmp, f"sshd_v{i}.conf")
        with open(cfg, "w") as f:
            f.write(f"ListenAddress {self.vantage_ip(i)}\nPort 22\n"
                    f"HostKey {self.tmp}/host_ed25519\nPidFile {self.tmp}/sshd_v{i}.pid\n"
                    f"AuthorizedKeysFile {self.tmp}/authorized_keys\n"
                    "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    "Subsystem sftp internal-sftp\nLogLevel ERROR\n")
        log = open(os.path.join(self.tmp, f"sshd_v{i}.log"), "a")
        # Each vantage point gets a home of its own: an empty tmpfs on /root
        # in a private mount namespace. Its sessions then start no shell rc
        # file of this machine's root (a `bash -c` under sshd reads
        # ~/.bashrc): here that ran `pyenv rehash`, whose lock a killed
        # vantage point left behind, and every later session waited on it
        # (the resume test's playbook hung 300 s in its first task).
        script = f'mount -t tmpfs -o mode=0700 lw-home /root && exec "$0" -D -e -f "$1"'
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, SSHD, cfg]
        self.sshd[i] = subprocess.Popen(ns_exec_cmd(self.ns(f"v{i}"), cmd),
                                        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cp = run(ns_exec_cmd(self.ns(f"v{i}"), ["ss", "-Hltn", "sport", "= :22"]), check=False)
            if cp.stdout.strip():
                return
            if self.sshd[i].poll() is not None:
                break
            time.sleep(0.05)
        raise LabError(f"sshd of v{i} did not start; see {log.name}")

    def kill_vantage(self, i: int) -> None:
        """Cut vantage point i off: every process in its namespace (its sshd,
        the sweep driver, a running measurement) is killed at once. Again
        until none is left: sshd may fork a session for a new connection
        between the listing and the kill, and that one would keep the
        connection alive."""
        for _ in range(50):
            pids = util.ns_pids(self.ns(f"v{i}"))
            if not pids:
                break
            util.kill_pids(pids, grace=0)
            time.sleep(0.05)
        p = self.sshd.get(i)
        if p is not None:
            try:
                p.wait(2)
            except subprocess.TimeoutExpired:
                pass

    def inventory(self, path: str, targets_per_host: Optional[Dict[str, List[str]]] = None) -> str:
        """Write an Ansible INI inventory for the vantage points; returns path."""
        lines = ["[vantage]"]
        for i in range(1, self.n_vantage + 1):
            lines.append(f"v{i} ansible_host={self.vantage_ip(i)}")
        lines += ["", "[vantage:vars]", "ansible_user=root",
                  f"ansible_ssh_private_key_file={self.key}",
                  "ansible_ssh_common_args='-o StrictHostKeyChecking=no "
                  "-o UserKnownHostsFile=/dev/null -o ConnectTimeout=5'",
                  "ansible_python_interpreter=/usr/bin/python3", ""]
        with open(path, "w") as f:
            f.write("\n".join(lines))
        return path
