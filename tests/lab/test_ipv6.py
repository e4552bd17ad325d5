"""Lab tests for IPv6 paths (issue 14): every command on a dual-stack lab
(Spec(ipv6=True): addresses in 2001:2::/48 only), within the IPv4 tests'
bounds.

Ground truth is the same as over IPv4: tbf counts whole frames, so 1500-byte
IP datagrams (the IPv6 header included) see R * 1500 / 1514.
"""
import ipaddress
import json
import os
import statistics
import time

import pytest

from labtest import BIN, LAB_MARKS, ROOT, lab  # noqa: E402,F401

pytestmark = LAB_MARKS

PIN = (os.cpu_count() or 1) >= 2
CROSS_CPU = 1 if PIN else None


def v6lab(rates, **kw):
    return lab.Lab(lab.Spec(links=[lab.Link(rate=r) for r in rates], ipv6=True, **kw))


def tool(L, *args, timeout=90):
    p = L.run_in_prober([BIN, *args, "--json"], timeout=timeout)
    return p.returncode, json.loads(p.stdout)


def family(addr):
    return ipaddress.ip_address(addr).version


def test_capacity_over_ipv6_within_3_percent():
    with v6lab([None, 50e6]) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        est = []
        for _ in range(3):
            code, doc = tool(L, "capacity", L.target_ip6)
            assert code == 0, doc
            assert doc["target_addr"] == L.target_ip6
            assert doc["source"] == L.prober_ip6
            assert doc["capacity_low_bps"] <= doc["capacity_bps"] <= doc["capacity_high_bps"]
            # Non-intrusive, as over IPv4.
            assert 8 * doc["probe_bytes"] / doc["elapsed_s"] < 0.15 * truth
            est.append(doc["capacity_bps"])
        med = statistics.median(est)
        assert abs(med / truth - 1) <= 0.03, f"truth {truth:.0f}, estimates {est}"


def test_ipv6_runs_save_pcap_and_analyze_agree():
    """capacity and hops over IPv6 with --save-pcap ('6' send records, the
    IPv6 replies): `linkwidth analyze` gives back the same documents."""
    with v6lab([None, 20e6, None]) as L:
        d = os.path.dirname(L.log_path("x"))
        os.chmod(d, 0o777)
        for args in (["capacity", "--trains", "12"], ["hops", "--trains", "4"]):
            cap = os.path.join(d, args[0] + "6.pcap")
            p = L.run_in_prober([BIN, args[0], L.target_ip6, *args[1:], "--json",
                                 "--save-pcap", cap], timeout=60)
            assert p.returncode == 0, p.stderr
            live = json.loads(p.stdout)
            assert live["target_addr"] == L.target_ip6
            a = L.run_in_prober([BIN, "analyze", cap, "--json"], timeout=60)
            assert a.returncode == 0, a.stderr
            off = json.loads(a.stdout)
            assert off.pop("offline") == {"pcap": cap}
            assert off == live


def test_availbw_over_ipv6_under_ipv6_cross_traffic():
    """measure --no-hops on a 50 Mbit/s link with 20 Mbit/s of UDP over IPv6:
    the IPv4 test's bound (median within 10 %) on three runs."""
    rate, cross = 50e6, 20e6
    with v6lab([None, rate]) as L:
        x = L.cross(2, "udp", rate=cross, cpu=CROSS_CPU, family=6)
        errors = []
        try:
            time.sleep(0.5)
            for _ in range(3):
                w = L.cross_window(2)
                cmd = [BIN, "measure", L.target_ip6, "--no-hops", "--json"]
                p = L.run_in_prober((["taskset", "-c", "0"] if PIN else []) + cmd, timeout=120)
                seen = w.stop().bps
                doc = json.loads(p.stdout)
                assert p.returncode == 0, doc
                assert doc["target_addr"] == L.target_ip6
                truth = L.ground_truth_capacity(ip_len=1500) - seen
                a, lo, hi = doc["availbw_bps"], doc["availbw_low_bps"], doc["availbw_high_bps"]
                assert lo <= a <= hi, doc
                errors.append(a / truth - 1)
        finally:
            x.stop()
        assert seen > 0.8 * cross * 1500 / 1452, seen  # the cross traffic did cross (1500-byte packets)
        summary = [f"{e:+.1%}" for e in errors]
        assert abs(statistics.median(errors)) <= 0.10, summary


def test_hops_over_ipv6_finds_the_bottleneck():
    with v6lab([None, "50M", "150M", None]) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        found = []
        for _ in range(3):
            code, doc = tool(L, "hops", L.target_ip6)
            assert code == 0, doc
            assert doc["target_reached"] is True
            assert [h["addr"] for h in doc["hops"]] == [L.node_ip6(k) for k in range(1, L.n + 1)]
            found.append(doc["bottleneck_hop"])
            if doc["bottleneck_hop"] == 2:
                assert doc["bottleneck_addr"] == L.node_ip6(2)
                assert abs(doc["bottleneck_rate_bps"] / truth - 1) <= 0.10
        assert found.count(2) >= 2, found


def test_hops_over_ipv6_with_ttl_markers_and_a_silent_router():
    """ICMPv6 time exceeded as markers (hop limit), paced by the routers'
    ICMPv6 budget; a router that sends no ICMPv6 errors is unknown and the
    rest works."""
    with v6lab([None, "50M", "150M", None]) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc = tool(L, "hops", L.target_ip6, "--hop-markers", "ttl", "--trains", "5")
        assert code == 0, doc
        assert [h["marker_kind"] for h in doc["hops"]] == ["ttl", "ttl", "ttl", "target"]
        assert doc["bottleneck_hop"] == 2
        assert abs(doc["bottleneck_rate_bps"] / truth - 1) <= 0.10
        assert all(h["replies"] >= 4 for h in doc["hops"]), doc["hops"]
    with v6lab([None, None, "50M", None], silent_routers=(1,)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc = tool(L, "hops", L.target_ip6)
        assert code == 0, doc
        assert doc["hops"][0]["addr"] is None and doc["hops"][0]["replies"] == 0
        assert "silent_hops" in [w["code"] for w in doc["warnings"]]
        assert [h["addr"] for h in doc["hops"][1:]] == [L.node_ip6(2), L.node_ip6(3),
                                                        L.target_ip6]
        assert doc["bottleneck_hop"] == 3
        assert abs(doc["hops"][2]["rate_bps"] / truth - 1) <= 0.10


def test_dual_stack_name_with_4_and_6():
    with v6lab([None, "50M"]) as L:
        L.add_host_name("dual.lab", v6_first=True)
        truth = L.ground_truth_capacity(ip_len=1500)
        for flag, want in (("-4", L.target_ip), ("-6", L.target_ip6)):
            code, doc = tool(L, "capacity", "dual.lab", flag)
            assert code == 0, doc
            assert doc["target"] == "dual.lab"
            assert doc["target_addr"] == want
            assert family(doc["source"]) == family(want)
            assert abs(doc["capacity_bps"] / truth - 1) <= 0.05, (flag, doc["capacity_bps"])
        # Without -4/-6: the resolver's first answer, as ping and curl take it.
        first = L.exec(0, ["getent", "ahosts", "dual.lab"]).stdout.split()[0]
        code, doc = tool(L, "capacity", "dual.lab", "--dry-run")
        assert code == 0, doc
        assert doc["target_addr"] == first
        # A name with no address of the asked family is not probed. (The lab
        # has no DNS server: after /etc/hosts the resolver fails with "temporary
        # failure", exit 1; a DNS answer without AAAA would be exit 2.)
        L.add_host_name("v4only.lab", v6=False)
        code, doc = tool(L, "capacity", "v4only.lab", "-6")
        assert code in (1, 2), doc
        assert doc["error"]["code"] == "unknown_host", doc
        assert "v4only.lab" in doc["error"]["message"]


def test_filtered_ipv6_target():
    with v6lab([None, "50M"]) as L:
        # SYNs answered with ICMPv6 admin-prohibited, bare ACKs let through (no
        # stateful firewall): the tool falls back to ACK markers (issue 13).
        L.set_target_firewall(reject=True)
        code, doc = tool(L, "capacity", L.target_ip6)
        assert code == 0, doc
        assert doc["marker_kind"] == "ack", doc
        # Every TCP packet dropped: filtered, over IPv6 and over IPv4.
        L.set_target_firewall(drop_tcp=True)
        code, doc = tool(L, "capacity", L.target_ip6, "--tries", "2")
        assert code == 1, doc
        assert doc["error"]["code"] == "target_filtered"
        # The IPv4 side of the same host is filtered too (one firewall call).
        code, doc = tool(L, "capacity", L.target_ip, "--tries", "2")
        assert code == 1 and doc["error"]["code"] == "target_filtered", doc


def test_ipv6_dry_run_and_forbidden_targets():
    with v6lab([None, "50M"]) as L:
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
        p = L.exec("prober", drop + [BIN, "capacity", L.target_ip6, "--dry-run", "--json",
                                     "-n", "8"], timeout=30)
        assert p.returncode == 0, p.stderr
        plan = json.loads(p.stdout)
        assert plan["target_addr"] == L.target_ip6 and plan["source"] == L.prober_ip6
        pk = plan["first_train"]["packets"]
        assert {q["ip_len"] for q in pk if q["role"] == "marker"} == {60}
        assert all(q["wire_bytes"] == q["ip_len"] for q in pk)
        for bad in ("::1", "ff02::1", "fe80::1", "2001:db8::1", L.prober_ip6):
            code, doc = tool(L, "capacity", bad)
            assert code == 2, (bad, doc)
            assert doc["error"]["code"] == "forbidden_target", (bad, doc)
