"""A small reader of classic pcap files (what tcpdump and linkwidth --save-pcap write).

It returns the IPv4 packets only, as (timestamp in ns, IP bytes); the callers
pick their own fields. Ethernet (linktype 1), Linux cooked (113) and raw IP captures,
microsecond or nanosecond timestamps, little-endian files (this VM's).
"""

from __future__ import annotations

import struct
from typing import List, Tuple

_NANOS_MAGIC = 0xA1B23C4D
_MICROS_MAGIC = 0xA1B2C3D4
_LINK_HEADER = {1: 14, 113: 16, 12: 0, 101: 0, 228: 0}  # Ethernet, cooked, raw IP


def read_ipv4(path: str, need_nanos: bool = False) -> List[Tuple[int, bytes]]:
    """[(ts_ns, ip_bytes)] of every IPv4 packet in the capture at `path`.

    Raises RuntimeError for a file that is no pcap of a known link type, or,
    with need_nanos, one whose timestamps are only microseconds."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise RuntimeError(f"{path}: too short for a pcap file")
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (_NANOS_MAGIC, _MICROS_MAGIC):
        raise RuntimeError(f"{path}: not a little-endian pcap file (magic {magic:#x})")
    nanos = magic == _NANOS_MAGIC
    if need_nanos and not nanos:
        raise RuntimeError(f"{path}: not a nanosecond pcap (magic {magic:#x})")
    linktype = struct.unpack("<I", data[20:24])[0]
    if linktype not in _LINK_HEADER:
        raise RuntimeError(f"{path}: link type {linktype} not read (Ethernet, Linux cooked or raw IP)")
    skip = _LINK_HEADER[linktype]
    scale = 1 if nanos else 1000
    out = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        ip = pkt[skip:]
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        out.append((sec * 1_000_000_000 + frac * scale, ip))
    return out
