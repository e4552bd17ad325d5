#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_decode into tests/fuzz/corpus/ (committed).

Input format (see fuzz_decode.cpp): first byte even = a frame, its second byte
picks the link type (0 Ethernet, 1 Linux cooked, 2 raw IP, 3 IPv4); odd = a
pcap or pcapng savefile. The packets are real reply shapes: RST/ACK from a
closed port, an ICMP time-exceeded quoting our SYN, a fragmentation-needed,
their IPv6 twins (RST/ACK, ICMPv6 time exceeded);
one seed is the start of a recorded --save-pcap run (run records included),
for the `linkwidth analyze` path.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

ETH = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00])
RST_ACK = bytes([0x45, 0, 0, 0x28, 0, 0, 0x40, 0, 0x40, 6, 0, 0,
                 0xc6, 0x12, 2, 2, 0xc6, 0x12, 1, 1,
                 0xb9, 0x1f, 0x9c, 0x40, 0, 0, 0, 0, 0x89, 0xab, 0xcd, 0xf0,
                 0x50, 0x14, 0, 0, 0, 0, 0, 0])
SYN = bytes([0x45, 0, 0, 0x28, 0, 1, 0x40, 0, 0x40, 6, 0, 0,
             0xc6, 0x12, 1, 1, 0xc6, 0x12, 2, 2,
             0x9c, 0x40, 0xb9, 0x1f, 0x89, 0xab, 0xcd, 0xef, 0, 0, 0, 0,
             0x50, 0x02, 4, 0, 0, 0, 0, 0])
ICMP_TE = bytes([0x45, 0xc0, 0, 0x3c, 0x12, 0x34, 0, 0, 0x40, 1, 0, 0,
                 0xc6, 0x12, 1, 2, 0xc6, 0x12, 1, 1,
                 11, 0, 0, 0, 0, 0, 0, 0,
                 0x46, 0, 0, 0x2c, 0x4c, 0x57, 0x40, 0, 1, 6, 0, 0,
                 0xc6, 0x12, 1, 1, 0xc6, 0x12, 2, 2, 1, 0, 0, 0,
                 0x9c, 0x40, 0xb9, 0x1f, 0x89, 0xab, 0xcd, 0xef])
FRAG_NEEDED = bytes([0x45, 0, 0, 0x38, 0, 2, 0, 0, 0x40, 1, 0, 0,
                     0xc6, 0x12, 1, 2, 0xc6, 0x12, 1, 1,
                     3, 4, 0, 0, 0, 0, 0x05, 0x78,
                     0x45, 0, 0x05, 0xdc, 0, 3, 0x40, 0, 0x3f, 6, 0, 0,
                     0xc6, 0x12, 1, 1, 0xc6, 0x12, 2, 2,
                     0x9c, 0x40, 0xb9, 0x1f, 0x89, 0xab, 0xcd, 0xf1])
SLL = bytes([0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 2, 0, 0, 0x08, 0x00])

# IPv6 (the lab's 2001:2::/48): our SYN (flow label 0xabcde, hop limit 64),
# the target's RST/ACK, and an ICMPv6 time exceeded from a router quoting the
# SYN as it expired there (quoted with hop limit 1, as Linux routers quote it).
ETH6 = ETH[:12] + bytes([0x86, 0xdd])
SELF6 = bytes.fromhex("20010002000000010000000000000001")
TARGET6 = bytes.fromhex("20010002000000030000000000000002")
ROUTER6 = bytes.fromhex("20010002000000020000000000000001")


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ip6(src, dst, nh, payload, hlim=64, flow=0):
    return struct.pack("!IHBB", (6 << 28) | flow, len(payload), nh, hlim) + src + dst + payload


def with_l4_csum(pkt, nh, at):
    seg = bytearray(pkt[40:])
    ph = pkt[8:40] + struct.pack("!IxxxB", len(seg), nh)
    struct.pack_into("!H", seg, at, csum(ph + bytes(seg)))
    return pkt[:40] + bytes(seg)


SYN6 = with_l4_csum(ip6(SELF6, TARGET6, 6, struct.pack("!HHIIBBHHH", 0x9c40, 0xb91f, 0x89abcdef,
                                                           0, 0x50, 0x02, 1024, 0, 0),
                        flow=0xabcde), 6, 16)
RST_ACK6 = with_l4_csum(ip6(TARGET6, SELF6, 6, struct.pack("!HHIIBBHHH", 0xb91f, 0x9c40, 0,
                                                               0x89abcdf0, 0x50, 0x14, 0, 0, 0)),
                        6, 16)
ICMP6_TE = with_l4_csum(ip6(ROUTER6, SELF6, 58, struct.pack("!BBHI", 3, 0, 0, 0) +
                            SYN6[:7] + b"\x01" + SYN6[8:]), 58, 2)
VLAN = ETH[:12] + bytes([0x81, 0, 0, 5, 0x08, 0])


def pcap(dlt, packets, nano=False, big=False):
    e = ">" if big else "<"
    magic = 0xa1b23c4d if nano else 0xa1b2c3d4
    out = struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, dlt)
    for i, p in enumerate(packets):
        out += struct.pack(e + "IIII", 1700000000 + i, 123456 + i, len(p), len(p)) + p
    return out


def pcapng(dlt, packets):
    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", dlt, 0, 65535))
    for i, p in enumerate(packets):
        ts = (1700000000 + i) * 1000000
        out += block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xffffffff, len(p), len(p)) + p)
    return out


def recorded_run_head(name="clean_10m", limit=6000):
    """The start of a --save-pcap capture in tests/data (with run records):
    its first notes, send records and replies, cut at the first packet
    record that would pass `limit` bytes."""
    data = open(os.path.join(HERE, "..", "data", name + ".pcap"), "rb").read()
    off = 24
    while off + 16 <= len(data):
        caplen = struct.unpack("<I", data[off + 8:off + 12])[0]
        if off + 16 + caplen > limit:
            break
        off += 16 + caplen
    return data[:off]


SEEDS = {
    "frame_eth_rst_ack": b"\0\0" + ETH + RST_ACK,
    "frame_eth_vlan_syn": b"\0\0" + VLAN + SYN,
    "frame_sll_rst_ack": b"\0\1" + SLL + RST_ACK,
    "frame_raw_icmp_time_exceeded": b"\0\2" + ICMP_TE,
    "frame_ipv4_frag_needed": b"\0\3" + FRAG_NEEDED,
    "pcap_eth_us": b"\1" + pcap(1, [ETH + SYN, ETH + RST_ACK]),
    "pcap_raw_ns": b"\1" + pcap(101, [ICMP_TE, FRAG_NEEDED], nano=True),
    "pcap_sll_big_endian": b"\1" + pcap(113, [SLL + RST_ACK], big=True),
    "pcap_truncated": b"\1" + pcap(1, [ETH + SYN, ETH + RST_ACK])[:-10],
    "pcapng_eth": b"\1" + pcapng(1, [ETH + SYN, ETH + RST_ACK]),
    "pcap_run_records": b"\1" + recorded_run_head(),
    "pcap_hops_records": b"\1" + recorded_run_head("hops_50m", 8000),
    "frame_eth_ipv6_rst_ack": b"\0\0" + ETH6 + RST_ACK6,
    "frame_raw_icmp6_time_exceeded": b"\0\2" + ICMP6_TE,
    "pcap_eth_ipv6": b"\1" + pcap(1, [ETH6 + SYN6, ETH6 + RST_ACK6, ETH6 + ICMP6_TE], nano=True),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")
