"""Open-port and bare-ACK markers (issue 13, part 2).

A target whose closed ports never answer and which serves on 443 (nftables on
the target drops every other TCP packet: a cloud security group, a typical web
server): linkwidth finds no closed port, uses SYNs to 443, resets every
half-open connection it causes at once, and measures as against a closed port.
A host whose firewall drops SYNs but keeps no state answers bare ACKs with an
RST: the third marker kind. Ground truth as in test_capacity / test_availbw.
"""
import json
import os
import statistics
import subprocess
import tempfile
import time

import pytest

from labtest import BIN, LAB_MARKS, ROOT, lab  # noqa: F401

pytestmark = LAB_MARKS

PIN = (os.cpu_count() or 1) >= 2
CROSS_CPU = 1 if PIN else None


def run_tool(L, *args, timeout=90):
    t0 = time.monotonic()
    cmd = [BIN, *args, "--json"]
    p = L.run_in_prober((["taskset", "-c", "0"] if PIN else []) + cmd, timeout=timeout)
    elapsed = time.monotonic() - t0
    return p.returncode, json.loads(p.stdout), elapsed, p.stderr


def open_only(L, stateful=False):
    L.listen(443)
    L.set_target_open_only((443,), stateful=stateful)


def tcp_counters(L):
    """The target's SYN-cookie and embryonic-reset counters (nstat, absolute)."""
    cp = L.exec("target", ["nstat", "-az", "TcpExtEmbryonicRsts", "TcpExtSyncookiesSent",
                           "TcpExtListenOverflows"])
    return {l.split()[0]: int(l.split()[1]) for l in cp.stdout.splitlines()
            if l and not l.startswith("#")}


def no_half_open(L):
    """No half-open connection in the target, now and a moment later (a
    request socket would stay for a minute of SYN/ACK retries)."""
    for _ in range(2):
        left = L.half_open("target")
        assert left == [], left
        time.sleep(0.3)


def capacity_against_only_443_open(L, target, stateful):
    """Three capacity runs against `target` (either of the target's
    addresses) behind open_only(L, stateful): open-port markers on 443, the
    estimate within 3 %, no half-open connection left on the target."""
    truth = L.ground_truth_capacity(ip_len=1500)
    # The prober kernel answers each SYN/ACK with an RST (it has no socket
    # for our flow); dropping those shows that linkwidth's own closers leave
    # nothing behind, and counting them that the kernel indeed sends them.
    L.drop_kernel_resets(True)
    before = tcp_counters(L)
    estimates = []
    for _ in range(3):
        code, doc, elapsed, err = run_tool(L, "capacity", target)
        assert code == 0, (doc, err)
        assert doc["target_addr"] == target
        assert doc["marker_kind"] == "open_syn"
        assert doc["port"] == 443
        assert doc["rtt_s"] > 0
        assert elapsed < 20
        estimates.append(doc["capacity_bps"])
        no_half_open(L)
    assert L.kernel_resets() > 0
    # Our closers reset the requests (embryonic resets); the SYN queue
    # never filled: no SYN cookies, no overflow.
    after = tcp_counters(L)
    assert after["TcpExtEmbryonicRsts"] - before["TcpExtEmbryonicRsts"] >= 3 * 3
    assert after["TcpExtSyncookiesSent"] == before["TcpExtSyncookiesSent"]
    assert after["TcpExtListenOverflows"] == before["TcpExtListenOverflows"]
    est = statistics.median(estimates)
    assert abs(est / truth - 1) <= 0.03, f"truth {truth:.0f}, estimates {estimates}"
    if stateful:
        # conntrack saw every connection attempt of our family, and each one was reset.
        family = "ipv6" if ":" in target else "ipv4"
        entries = L.conntrack_entries("target")
        assert any(e.startswith(family) and "dport=443" in e for e in entries), entries
    # Nothing was ever accepted: no connection reached the listener.
    est_cp = L.exec("target", ["ss", "-Htan", "state", "established"])
    assert est_cp.stdout.strip() == ""


@pytest.mark.parametrize("stateful", [False, True])
def test_capacity_against_only_443_open(stateful):
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6), lab.Link(rate=None)])
    with lab.Lab(spec) as L:
        open_only(L, stateful)
        capacity_against_only_443_open(L, L.target_ip, stateful)


def test_measure_avail_bw_against_only_443_open():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)])
    with lab.Lab(spec) as L:
        open_only(L)
        x = L.cross(2, "udp", rate=20e6, cpu=CROSS_CPU)
        try:
            time.sleep(0.5)
            results = []
            for _ in range(3):
                w = L.cross_window(2)
                code, doc, _, err = run_tool(L, "measure", L.target_ip, "--no-hops")
                cross = w.stop().bps
                assert code == 0, (doc, err)
                results.append((doc, L.ground_truth_capacity(ip_len=1500) - cross))
        finally:
            x.stop()
        no_half_open(L)
        cap_truth = L.ground_truth_capacity(ip_len=1500)
        caps = [doc["capacity_bps"] for doc, _ in results]
        for doc, truth in results:
            assert doc["marker_kind"] == "open_syn"
        # The capacity as in the capacity test above and test_capacity_paths:
        # the median within 3%. One run alone reads a few % off under 40% CBR
        # now and then (issue 11, open: -7.9% in the fresh-clone CI at
        # f66249c, +7.6% in one of 7 runs of this test here, none in 33 other
        # runs on this path; -10.3% with send_stalls in the fresh-clone CI at
        # 04a22a1: open-port markers have no reply-gap check to correct the
        # trains); within 15% each.
        assert abs(statistics.median(caps) / cap_truth - 1) <= 0.03, (caps, cap_truth)
        assert all(abs(c / cap_truth - 1) <= 0.15 for c in caps), (caps, cap_truth)
        # The bar of test_availbw.py's closed-port runs: the median within 10%,
        # the reported range holding the truth in 2 of 3 runs.
        errors = [doc["availbw_bps"] / truth - 1 for doc, truth in results]
        summary = [f"{e:+.1%}" for e in errors]
        assert abs(statistics.median(errors)) <= 0.10, summary
        held = sum(doc["availbw_low_bps"] <= truth <= doc["availbw_high_bps"]
                   for doc, truth in results)
        assert held >= 2, f"range held the truth in {held} of 3 runs; errors {summary}"


def test_hops_and_analyze_with_open_port_markers():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=150e6), lab.Link(rate=40e6),
                           lab.Link(rate=None)])
    with lab.Lab(spec) as L, tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        open_only(L)
        code, doc, _, err = run_tool(L, "hops", L.target_ip)
        assert code == 0, (doc, err)
        assert doc["marker_kind"] == "open_syn"
        assert doc["target_reached"]
        assert doc["bottleneck_hop"] == 3, doc["hops"]
        no_half_open(L)
        # A measure run (capacity, hops' target markers, avail-bw) replays
        # offline into the same document.
        cap = os.path.join(d, "m.pcap")
        code, live, _, err = run_tool(L, "measure", L.target_ip, "--max-time", "10",
                                      "--save-pcap", cap)
        assert code in (0, 1), err
        assert live["marker_kind"] == "open_syn"
        a = subprocess.run([BIN, "analyze", cap, "--json"], capture_output=True, text=True,
                           timeout=30)
        assert a.returncode == code, a.stderr
        off = json.loads(a.stdout)
        assert off.pop("offline") == {"pcap": cap}
        assert off == live
        no_half_open(L)


def test_bare_ack_markers_on_a_syn_dropping_host():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)])
    with lab.Lab(spec) as L, tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        L.set_target_firewall(drop_syn=True)  # stateless: bare ACKs pass
        truth = L.ground_truth_capacity(ip_len=1500)
        estimates = []
        for i in range(3):
            cap = os.path.join(d, f"c{i}.pcap")
            code, doc, _, err = run_tool(L, "capacity", L.target_ip, "--save-pcap", cap)
            assert code == 0, (doc, err)
            assert doc["marker_kind"] == "ack"
            estimates.append(doc["capacity_bps"])
            if i == 0:  # the ACK markers' tags come back from the capture
                a = subprocess.run([BIN, "analyze", cap, "--json"], capture_output=True,
                                   text=True, timeout=30)
                assert a.returncode == 0, a.stderr
                off = json.loads(a.stdout)
                assert off.pop("offline") == {"pcap": cap}
                assert off == doc
        est = statistics.median(estimates)
        assert abs(est / truth - 1) <= 0.03, f"truth {truth:.0f}, estimates {estimates}"
        # measure: the hops phase's target markers and the avail-bw trains are ACKs too
        # (an idle link: the avail-bw is the capacity).
        code, doc, _, err = run_tool(L, "measure", L.target_ip, "--max-time", "10")
        assert code == 0, (doc, err)
        assert doc["marker_kind"] == "ack"
        assert doc["bottleneck_hop"] == 2, doc.get("hops")
        assert abs(doc["availbw_bps"] / truth - 1) <= 0.10, doc["availbw_bps"]
        # Every SYN discovery sent was dropped before the target: nothing half-open.
        no_half_open(L)


def test_closed_ports_still_preferred_and_filtered_still_filtered():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)])
    with lab.Lab(spec) as L:
        L.listen(443)
        code, doc, _, err = run_tool(L, "capacity", L.target_ip, "--max-time", "5")
        assert code == 0, (doc, err)
        assert doc["marker_kind"] == "closed_syn"
        assert doc["port"] != 443
        # The user's --port on a listening port: open-port markers there.
        code, doc, _, err = run_tool(L, "capacity", L.target_ip, "--port", "443",
                                     "--max-time", "5")
        assert code == 0, (doc, err)
        assert doc["marker_kind"] == "open_syn" and doc["port"] == 443
        no_half_open(L)
        # Nothing answers at all: still target_filtered, within the rounds' timeouts.
        L.set_target_firewall(drop_tcp=True)
        code, doc, elapsed, _ = run_tool(L, "capacity", L.target_ip)
        assert code == 1
        assert doc["error"]["code"] == "target_filtered"
        assert "bare ACKs" in doc["error"]["message"]
        assert elapsed < 8
