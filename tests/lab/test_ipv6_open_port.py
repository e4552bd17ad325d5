"""Open-port and bare-ACK markers over IPv6 (issue 14 with issue 13 part 2):
the cases of test_open_port.py on a dual-stack lab, against the target's IPv6
address (2001:2::/48), within the same bounds.

A target with only 443 open (nftables on the target drops every other TCP
packet to it, stateless or as a stateful security group): linkwidth uses SYNs
to 443 and resets each half-open connection at once with its own closers.
Over IPv6 a closer is as long as the kernel's RST (60 bytes), so the prober
kernel's resets are told apart by their socket (Lab.drop_kernel_resets): they
are dropped, and still nothing half-open stays on the target. A host whose
firewall drops SYNs but keeps no state answers bare ACKs with an RST.
"""
import statistics

import pytest

from labtest import LAB_MARKS, lab  # noqa: F401
from test_open_port import capacity_against_only_443_open, no_half_open, open_only, run_tool

pytestmark = LAB_MARKS


def v6lab(rates):
    return lab.Lab(lab.Spec(links=[lab.Link(rate=r) for r in rates], ipv6=True))


@pytest.mark.parametrize("stateful", [False, True])
def test_capacity_over_ipv6_against_only_443_open(stateful):
    with v6lab([None, 50e6, None]) as L:
        open_only(L, stateful)
        capacity_against_only_443_open(L, L.target_ip6, stateful)


def test_closed_ports_dropped_over_ipv4_too_on_a_dual_stack_target():
    """The dual-stack firewall holds for both families: IPv4 finds the same
    open-port markers (the table is one inet table)."""
    with v6lab([None, 50e6]) as L:
        open_only(L)
        code, doc, _, err = run_tool(L, "capacity", L.target_ip, "--max-time", "5")
        assert code == 0, (doc, err)
        assert doc["marker_kind"] == "open_syn" and doc["port"] == 443
        no_half_open(L)


def test_bare_ack_markers_over_ipv6_on_a_syn_dropping_host():
    with v6lab([None, 50e6]) as L:
        L.set_target_firewall(drop_syn=True)  # stateless: bare ACKs pass
        truth = L.ground_truth_capacity(ip_len=1500)
        estimates = []
        for _ in range(3):
            code, doc, _, err = run_tool(L, "capacity", L.target_ip6)
            assert code == 0, (doc, err)
            assert doc["marker_kind"] == "ack"
            estimates.append(doc["capacity_bps"])
        est = statistics.median(estimates)
        assert abs(est / truth - 1) <= 0.03, f"truth {truth:.0f}, estimates {estimates}"
        no_half_open(L)


def test_hops_over_ipv6_with_open_port_markers():
    with v6lab([None, 150e6, 40e6, None]) as L:
        open_only(L)
        code, doc, _, err = run_tool(L, "hops", L.target_ip6)
        assert code == 0, (doc, err)
        assert doc["marker_kind"] == "open_syn"
        assert doc["target_reached"]
        assert doc["bottleneck_hop"] == 3, doc["hops"]
        no_half_open(L)
