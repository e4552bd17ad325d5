"""Replies behind an IPv6 extension header (issue 14): the target sends
everything to the prober with a segment routing header (next header 43, the
kernel's seg6 inline mode). libpcap's `tcp` and `port` read only the fixed
header's next-header field, so a filter built from them alone drops every
such reply; linkwidth's filter lets packets to us that start with an extension
header through and the decoder walks the chain. The capacity must come out
as without the header (3 %, the bound of test_ipv6.py)."""
import json
import os
import statistics
import struct

import pytest

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS


def ipv6_next_headers(pcap_path, src):
    """Next-header values of the fixed IPv6 header of every Ethernet frame
    from `src` in a pcap file."""
    import ipaddress
    want = ipaddress.ip_address(src).packed
    out = []
    with open(pcap_path, "rb") as f:
        magic = f.read(24)[:4]
        endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        while True:
            h = f.read(16)
            if len(h) < 16:
                break
            _, _, caplen, _ = struct.unpack(endian + "IIII", h)
            frame = f.read(caplen)
            if len(frame) >= 54 and frame[12:14] == b"\x86\xdd" and frame[22:38] == want:
                out.append(frame[20])
    return out


def test_capacity_with_a_routing_header_on_every_reply():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)], ipv6=True)
    with lab.Lab(spec) as L:
        d = os.path.dirname(L.log_path("x"))
        os.chmod(d, 0o777)
        try:
            L.set_reply_routing_header(True)
        except lab.LabUnsupported as e:
            # (The decoder's walk over extension headers is unit-tested on
            # synthetic packets: tests/unit/test_ipv6.cpp.)
            pytest.skip(str(e))
        truth = L.ground_truth_capacity(ip_len=1500)
        est = []
        for i in range(3):
            cap = os.path.join(d, f"c{i}.pcap")
            p = L.run_in_prober([BIN, "capacity", L.target_ip6, "--json", "--save-pcap", cap],
                                timeout=60)
            assert p.returncode == 0, p.stderr
            doc = json.loads(p.stdout)
            assert doc["marker_kind"] == "closed_syn"
            est.append(doc["capacity_bps"])
            # The replies did carry the header: the capture holds them.
            nhs = ipv6_next_headers(cap, L.target_ip6)
            assert nhs and set(nhs) == {43}, nhs
        med = statistics.median(est)
        assert abs(med / truth - 1) <= 0.03, f"truth {truth:.0f}, estimates {est}"
        # hops reads the target's markers the same way.
        p = L.run_in_prober([BIN, "hops", L.target_ip6, "--json"], timeout=60)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["target_reached"] and doc["bottleneck_hop"] == 2, doc["hops"]
