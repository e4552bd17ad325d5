"""Scoped link-local IPv6 targets (issue 14): ``fe80::...%iface`` against the
first hop's link-local address on the lab's own veth (never anything outside
the lab's namespaces). The zone picks the interface for the raw socket, the
capture and the port reservation; the source is the prober's own link-local
address there. Ground truth as in test_ipv6.py: a shaped first link."""
import json
import statistics

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS


def tool(L, *args, timeout=60):
    p = L.run_in_prober([BIN, *args, "--json"], timeout=timeout)
    return p.returncode, json.loads(p.stdout), p.stderr


def test_capacity_to_the_first_hops_link_local_address():
    spec = lab.Spec(links=[lab.Link(rate=50e6), lab.Link(rate=None)], ipv6=True)
    with lab.Lab(spec) as L:
        hop = L.link_local6(1, "up")      # r1's end of link 1
        mine = L.link_local6(0, "dn")     # the prober's
        ifindex = json.loads(L.exec(0, ["ip", "-j", "link", "show", "dn"], check=True).stdout)[0]["ifindex"]
        truth = L.ground_truth_capacity(ip_len=1500)
        est = []
        for zone in ("dn", "dn", str(ifindex)):  # by name and by index
            code, doc, err = tool(L, "capacity", f"{hop}%{zone}")
            assert code == 0, (doc, err)
            # Both with their zone, by name even when the target gave an index.
            assert doc["target_addr"] == f"{hop}%dn"
            assert doc["source"] == f"{mine}%dn"
            assert doc["interface"] == "dn"
            assert doc["marker_kind"] == "closed_syn"
            est.append(doc["capacity_bps"])
        med = statistics.median(est)
        assert abs(med / truth - 1) <= 0.03, f"truth {truth:.0f}, estimates {est}"
        # hops: one hop, the target itself.
        code, doc, err = tool(L, "hops", f"{hop}%dn")
        assert code == 0, (doc, err)
        assert doc["target_addr"] == f"{hop}%dn" and doc["bottleneck_hop"] == 1
        # The plan names the zone's interface and the link-local source.
        code, plan, err = tool(L, "capacity", f"{hop}%dn", "--dry-run")
        assert code == 0, err
        assert plan["interface"] == "dn" and plan["source"] == f"{mine}%dn"
        # Without a zone, with an unknown one, or with --interface naming
        # another interface: one sentence, exit 2, nothing sent.
        before = L.iface_stats(0, "dn")["tx_packets"]
        for args, words in (([hop], "without a zone"),
                            ([f"{hop}%nosuch0"], "unknown zone 'nosuch0'"),
                            ([f"{hop}%dn", "--interface", "lo"], "name different interfaces")):
            p = L.run_in_prober([BIN, "capacity", *args], timeout=10)
            assert p.returncode == 2, (args, p.stderr)
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and words in lines[0], (args, p.stderr)
        assert L.iface_stats(0, "dn")["tx_packets"] - before <= 2  # ND at most, no probe
