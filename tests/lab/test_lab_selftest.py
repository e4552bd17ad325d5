"""Self-tests of the namespace lab (scripts/lab.py): topology, routing, ICMP,
shaping accuracy, counter-based cross-traffic measurement, firewall,
teardown and the CLI.  Needs root; ~30 s on a 2-core VM."""

import ipaddress
import json
import os
import re
import subprocess
import sys
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import lab  # noqa: E402
from labtest import StealMeter  # noqa: E402

LAB_PY = os.path.join(REPO, "scripts", "lab.py")

LAB_NET = ipaddress.ip_network("198.18.0.0/15")


def _alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _connect(L, node, ip, port, timeout=1.5):
    """Try a TCP connect from ``node``: 'open', 'refused', 'timeout' or the error."""
    code = ("import socket,sys\ns=socket.socket();s.settimeout(float(sys.argv[3]))\n"
            "try:\n s.connect((sys.argv[1],int(sys.argv[2])));print('open')\n"
            "except socket.timeout:print('timeout')\n"
            "except ConnectionRefusedError:print('refused')\n"
            "except OSError as e:print('error', e.errno)\n")
    cp = L.exec(node, [sys.executable, "-c", code, ip, str(port), str(timeout)],
                timeout=timeout + 10)
    return cp.stdout.strip()


def _lab_cli(*args, timeout=60, check=True):
    cp = subprocess.run([sys.executable, LAB_PY, *args], capture_output=True, text=True,
                        timeout=timeout)
    if check and cp.returncode != 0:
        raise AssertionError(f"lab.py {' '.join(args)} -> {cp.returncode}\n{cp.stderr}")
    return cp


# ---------------------------------------------------------------- pure helpers

@pytest.mark.noroot
def test_rates_and_truth():
    assert lab.parse_rate("50M") == 50e6
    assert lab.parse_rate("1.5G") == 1.5e9
    assert lab.parse_rate("800k") == 800e3
    assert lab.parse_rate("100Mbit") == 100e6
    assert lab.parse_rate("none") is None
    with pytest.raises(lab.LabError):
        lab.parse_rate("fast")
    with pytest.raises(lab.LabError):
        lab.parse_rate("-5M")
    assert lab.ip_capacity(50e6) == pytest.approx(50e6 * 1500 / 1514)
    assert lab.ip_capacity(1e9, 40) == pytest.approx(1e9 * 40 / 54)
    assert lab.default_limit(1e9) == 12_500_000 and lab.default_limit(10e6) == 2_000_000
    spec = lab.Spec(links=[lab.Link(rate=1e9), lab.Link(rate=50e6, rev_rate=None),
                           lab.Link(rate=1e9)])
    L = lab.Lab(spec)                       # not started: truth needs no root
    assert L.ground_truth_capacity() == pytest.approx(lab.ip_capacity(50e6))
    assert L.narrow_link() == 2 and L.narrow_link("rev") in (1, 3)
    assert L.target_ip == "198.18.3.2" and L.node_ip(1) == "198.18.1.2"
    assert L.ns("r2") == f"lw-{L.id}-r2" and L.ns("xs2") == f"lw-{L.id}-xs2"
    assert L.ip_of("xr2") == "198.19.102.2" and L.ip_of("prober") == "198.18.1.1"
    with pytest.raises(lab.LabError):
        lab.Spec(links=[lab.Link(rate=1e9)], silent_routers=(1,))


# ---------------------------------------------------------------- topology

def test_ping_and_addressing(chain3):
    L = chain3
    assert L.exec("prober", ["ping", "-c", "3", "-i", "0.2", "-W", "2", L.target_ip]).returncode == 0
    assert L.exec("target", ["ping", "-c", "1", "-W", "2", L.prober_ip]).returncode == 0
    # every address in every lab namespace is inside 198.18.0.0/15; no default route
    L.ensure_cross_hosts(2)
    for node in L.nodes + ["xs2", "xr2"]:
        addrs = json.loads(L.exec(node, ["ip", "-j", "-4", "addr", "show"]).stdout)
        for iface in addrs:
            for a in iface.get("addr_info", []):
                ip = ipaddress.ip_address(a["local"])
                assert ip.is_loopback or ip in LAB_NET, (node, iface["ifname"], ip)
            if iface["ifname"] != "lo":
                assert iface["mtu"] == 1500
        routes = L.exec(node, ["ip", "-4", "route", "show"]).stdout
        assert "default" not in routes
        # offloads off on every lab interface
        for iface in addrs:
            if iface["ifname"] in ("lo",):
                continue
            k = L.exec(node, ["ethtool", "-k", iface["ifname"]]).stdout
            for feat in ("tcp-segmentation-offload", "generic-segmentation-offload",
                         "generic-receive-offload", "tx-checksumming", "rx-checksumming"):
                assert re.search(rf"^{feat}: off", k, re.M), (node, iface["ifname"], feat)
    # cross host xs2 reaches xr2 (through link 2) and the prober
    assert L.exec("xs2", ["ping", "-c", "1", "-W", "2", L.xr_ip(2)]).returncode == 0
    assert L.exec("xr2", ["ping", "-c", "1", "-W", "2", L.prober_ip]).returncode == 0
    # nothing outside the lab range is routable from inside
    assert L.exec("prober", ["ping", "-c", "1", "-W", "1", "192.0.2.1"]).returncode != 0


def test_ttl_exceeded_and_silent_router(lab_factory):
    L = lab_factory(["1G", "50M", "1G"], silent_routers=(1,))
    hop1 = L.exec("prober", ["ping", "-c", "2", "-i", "0.2", "-W", "1", "-t", "1", L.target_ip])
    hop2 = L.exec("prober", ["ping", "-c", "2", "-i", "0.2", "-W", "1", "-t", "2", L.target_ip])
    assert "Time to live exceeded" not in hop1.stdout           # r1 silent
    assert f"From {L.node_ip(2)}" in hop2.stdout and "Time to live exceeded" in hop2.stdout
    L.set_router_icmp(1, True)
    hop1 = L.exec("prober", ["ping", "-c", "2", "-i", "0.2", "-W", "1", "-t", "1", L.target_ip])
    assert f"From {L.node_ip(1)}" in hop1.stdout and "Time to live exceeded" in hop1.stdout


def test_veth_counters_include_ethernet_header(chain3):
    """N pings of IP length 1000 add exactly N*(1000+14) rx bytes at the target."""
    L = chain3
    L.exec("prober", ["ping", "-c", "1", "-W", "1", L.target_ip])   # ARP settled
    before = L.iface_stats("target", "up")
    n = 20
    cp = L.exec("prober", ["ping", "-c", str(n), "-i", "0.01", "-s", "972", "-q", L.target_ip])
    assert cp.returncode == 0
    after = L.iface_stats("target", "up")
    dp = after["rx_packets"] - before["rx_packets"]
    db = after["rx_bytes"] - before["rx_bytes"]
    assert dp == n, (dp, db)
    assert db == n * (1000 + lab.ETH_HDR)


# ---------------------------------------------------------------- shaping

def test_tcp_throughput_matches_narrow_link(chain3):
    L = chain3
    rate = L.link_rate(2)
    L.popen("target", ["iperf3", "-s", "-1", "-p", "5299"])
    for _ in range(100):
        if L.exec("target", ["ss", "-Hltn", "sport = :5299"]).stdout.strip():
            break
        time.sleep(0.05)
    with StealMeter() as steal:
        cp = L.run_in_prober(["iperf3", "-c", L.target_ip, "-p", "5299", "-t", "3",
                              "-C", "cubic", "-J"], timeout=30)
    res = json.loads(cp.stdout)
    assert res["end"].get("sender_tcp_congestion", "cubic") == "cubic"
    goodput = res["end"]["sum_received"]["bits_per_second"]
    expected = rate * 1448 / 1514        # MSS 1448 (timestamps) per 1514-byte frame
    print(f"TCP goodput {goodput / 1e6:.2f} Mbit/s, R {rate / 1e6:.0f}, "
          f"expected ~{expected / 1e6:.2f} ({goodput / expected:.1%})")
    # (The fresh-clone CI at 4125a76: 42.6 of 47.8 Mbit/s, 89%, on a VM that
    # loses 3-8% of its CPU to the hypervisor.)
    steal.excuse(goodput >= 0.93 * expected,
                 f"one cubic flow filled {goodput / 1e6:.2f} of {expected / 1e6:.2f} Mbit/s")
    assert 0.85 * rate <= goodput <= 1.01 * rate
    assert goodput >= 0.93 * expected
    q = L.qdisc_stats(2)
    assert q["packets"] > 10000                  # it really went through the shaper


def test_udp_cross_measured_by_counters(chain3):
    """iperf3 -b counts UDP payload: 20 Mbit/s of 1472-byte payload is
    20e6*1500/1472 bit/s at the IP layer; counters must show that (+-5 %)."""
    L = chain3
    shaped0 = L.link_counters(2)
    with L.cross(2, "udp", rate="20M", size=1472) as x:
        w = L.cross_window(2)
        time.sleep(2.0)
        w.stop()
        mid = x.measured_bps()
    shaped1 = L.link_counters(2)
    expected = 20e6 * 1500 / 1472
    assert x.expected_ip_bps() == pytest.approx(expected)
    print(f"UDP cross: measured {w.bps / 1e6:.3f} Mbit/s IP-layer, expected {expected / 1e6:.3f}")
    assert w.bps == pytest.approx(expected, rel=0.05)
    assert x.measured_bps() == pytest.approx(expected, rel=0.05)
    assert mid == pytest.approx(expected, rel=0.05)
    # self-consistency: all packets are 1500-byte IP = 1514-byte frames
    d = w.delta()
    assert d["packets"] > 3000
    assert abs(d["bytes"] / d["packets"] - 1514) < 2          # +- a few ARPs
    assert w.frame_bps == pytest.approx(w.bps * 1514 / 1500, rel=0.002)
    # the shaped interface of link 2 carried at least the cross packets
    assert shaped1["tx_packets"] - shaped0["tx_packets"] >= d["packets"]
    assert not x.running
    assert all(not _alive(p.pid) for p in x.procs)


def test_tcp_and_poisson_cross(chain3):
    L = chain3
    with L.cross(2, "tcp", flows=2) as x, StealMeter() as steal:
        bps = x.measure(1.5)
    cap = L.link_capacity(2)
    print(f"2 cubic flows: {bps / 1e6:.2f} Mbit/s of {cap / 1e6:.2f}")
    steal.excuse(0.85 * cap <= bps, f"2 cubic flows filled {bps / 1e6:.2f} of {cap / 1e6:.2f} Mbit/s")
    assert 0.85 * cap <= bps <= 1.01 * cap
    with L.cross(2, "poisson", rate="5M") as x:
        bps = x.measure(1.5)
    print(f"poisson 5M: {bps / 1e6:.2f} Mbit/s")
    assert 3.5e6 <= bps <= 6.5e6


# ---------------------------------------------------------------- firewall

def test_firewall_drop_syn(chain3):
    L = chain3
    L.listen(8080)
    assert _connect(L, "prober", L.target_ip, 8080) == "open"
    assert _connect(L, "prober", L.target_ip, 8081) == "refused"
    L.set_target_firewall(drop_syn=True)
    assert _connect(L, "prober", L.target_ip, 8080) == "timeout"
    assert _connect(L, "prober", L.target_ip, 8081) == "timeout"
    assert L.firewall_drops() >= 2
    assert L.exec("prober", ["ping", "-c", "1", "-W", "2", L.target_ip]).returncode == 0
    L.set_target_firewall(drop_syn=True, port=8081)
    assert _connect(L, "prober", L.target_ip, 8080) == "open"
    assert _connect(L, "prober", L.target_ip, 8081) == "timeout"
    L.set_target_firewall()
    assert _connect(L, "prober", L.target_ip, 8081) == "refused"
    if L.exec("target", ["sh", "-c", "command -v nft"]).returncode == 0:
        L.set_target_firewall(reject=True)
        # ICMP admin-prohibited -> EHOSTUNREACH (113)
        assert _connect(L, "prober", L.target_ip, 8080) == "error 113"
        L.set_target_firewall()
    assert _connect(L, "prober", L.target_ip, 8080) == "open"


# ---------------------------------------------------------------- teardown / CLI

def test_teardown_after_with_block_and_exception():
    spec = lab.Spec(links=[lab.Link(rate="100M"), lab.Link(rate="20M")])
    with lab.Lab(spec) as L:
        x = L.cross(2, "udp", rate="5M")
        srv = L.popen("target", ["sleep", "60"])
        pids = [p.pid for p in x.procs] + [srv.pid]
        assert len(lab.list_namespaces(L.prefix)) == 5
    assert lab.list_namespaces(L.prefix) == []
    assert not any(_alive(p) for p in pids)
    with pytest.raises(RuntimeError):
        with lab.Lab(spec) as L2:
            p = L2.popen("prober", ["sleep", "60"])
            raise RuntimeError("boom")
    assert lab.list_namespaces(L2.prefix) == []
    assert not _alive(p.pid)


def test_cli_up_exec_cross_cleanup():
    name = "st" + os.urandom(3).hex()
    prefix = f"lw-{name}-"
    try:
        out = _lab_cli("up", "--name", name, "--links", "1000M,50M", "--rev", "same,10M")
        info = json.loads(out.stdout)
        assert info["target_ip"] == "198.18.2.2"
        assert info["links"][1]["rev_rate"] == 10e6
        assert info["truth"]["capacity_fwd_ip1500"] == pytest.approx(lab.ip_capacity(50e6))
        assert os.path.exists(f"/run/linkwidth-lab/{name}.json")
        assert json.loads(_lab_cli("info", name).stdout)["name"] == name
        cp = _lab_cli("exec", name, "prober", "--", "ping", "-c", "1", "-W", "2", "198.18.2.2")
        assert "1 received" in cp.stdout
        assert _lab_cli("exec", name, "r1", "--", "sh", "-c", "exit 3", check=False).returncode == 3
        cp = _lab_cli("cross", name, "--link", "2", "--udp", "10M", "--duration", "2")
        res = json.loads(cp.stdout.strip().splitlines()[-1])
        assert res["measured_bps"] == pytest.approx(10e6 * 1500 / 1472, rel=0.05)
        # bad input -> clear error, non-zero exit
        bad = _lab_cli("up", "--name", name + "x", "--links", "10Q", check=False)
        assert bad.returncode != 0 and "bad rate" in bad.stderr
        bad = _lab_cli("exec", name, "r9", "--", "true", check=False)
        assert bad.returncode != 0 and "no chain node" in bad.stderr
        # a process left running in the lab must die at cleanup
        stray = subprocess.Popen([sys.executable, LAB_PY, "exec", name, "target", "--",
                                  "sleep", "300"], start_new_session=True)
        time.sleep(0.5)
        assert lab.list_namespaces(prefix)
        foreign = [ns for ns in lab.list_namespaces() if not ns.startswith(prefix)]
        # plain 'cleanup' removes every lw-* lab: only run it if nothing else is up
        args = ["cleanup"] if not foreign else ["down", name]
        _lab_cli(*args)
        stray.wait(timeout=5)
        assert lab.list_namespaces(prefix) == []
        assert not os.path.exists(f"/run/linkwidth-lab/{name}.json")
    finally:
        lab.cleanup_all(prefix)
