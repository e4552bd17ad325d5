#!/usr/bin/env python3
"""Makes the edited captures of tests/data from recorded ones (see README.md there).

    transform_capture.py reorder  IN.pcap OUT.pcap [--every 3]
    transform_capture.py quantise IN.pcap OUT.pcap [--period-us 125] [--phase-us 37]

reorder:  in every --every'th measured capacity train (not sizing), the head
          marker's reply and the tail marker's reply swap places: each keeps
          its slot's timestamp but carries the other's bytes, as if the tail
          reply had overtaken the head reply on the way back.
quantise: every packet addressed to the prober (the replies) is re-stamped at
          the next tick of a free-running timer of --period-us (phase
          --phase-us), plus 0.5 us per packet already stamped at that tick (a
          coalescing NIC's batch); the "train_done" notes move by one period,
          since the live run could only have stopped waiting after a delayed
          reply.

Only the pcap (ns, little-endian, Ethernet) that linkwidth --save-pcap writes
is supported. The run records are read as src/capture/run_record.hpp documents.
"""
import argparse
import json
import struct
import sys

ETH_RECORD = b"\x88\xb5"


def read_pcap(path):
    data = open(path, "rb").read()
    head = data[:24]
    magic, = struct.unpack("<I", head[:4])
    if magic != 0xA1B23C4D:
        sys.exit(f"{path}: not a little-endian nanosecond pcap")
    if struct.unpack("<I", head[20:24])[0] != 1:
        sys.exit(f"{path}: not an Ethernet capture")
    recs, off = [], 24
    while off + 16 <= len(data):
        sec, frac, caplen, origlen = struct.unpack("<IIII", data[off:off + 16])
        off += 16
        recs.append([sec * 10**9 + frac, origlen, data[off:off + caplen]])
        off += caplen
    return head, recs


def write_pcap(path, head, recs):
    with open(path, "wb") as f:
        f.write(head)
        for ts, origlen, frame in recs:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(frame), origlen))
            f.write(frame)


def is_record(frame):
    return frame[12:14] == ETH_RECORD and frame[14:18] == b"LWR1"


def notes(recs):
    """(record index of the first chunk, JSON object) for every note, in order."""
    out, open_notes = [], {}
    for i, (_, _, fr) in enumerate(recs):
        if not is_record(fr) or fr[18:19] != b"N":
            continue
        nid, part, parts = struct.unpack(">IHH", fr[19:27])
        text = fr[27:]
        if part == 0:
            open_notes[nid] = [i, text, parts]
        else:
            open_notes[nid][1] += text
        if part + 1 == parts:
            first, body, _ = open_notes.pop(nid)
            out.append((first, json.loads(body)))
    return out


def send_records(recs):
    """record index -> (train, index, role, seq) of every send record."""
    out = {}
    for i, (_, _, fr) in enumerate(recs):
        if is_record(fr) and fr[18:19] == b"S":
            b = fr[19:]
            seq, = struct.unpack(">I", b[8:12])
            role = b[14]
            train, = struct.unpack(">I", b[19:23])
            index, = struct.unpack(">H", b[23:25])
            out[i] = (train, index, role, seq)
    return out


def prober_addr(recs):
    for first, note in notes(recs):
        if note.get("kind") == "run":
            return bytes(int(x) for x in note["head"]["source"].split("."))
    sys.exit("no run note in the capture")


def inbound(frame, me):
    return frame[12:14] == b"\x08\x00" and frame[30:34] == me


def reorder(recs, every):
    me = prober_addr(recs)
    ns = notes(recs)
    sends = send_records(recs)
    measured = 0
    swapped = 0
    for first, note in ns:
        if note.get("kind") != "train" or note.get("phase") != "capacity" or note.get("sizing"):
            continue
        measured += 1
        if measured % every:
            continue
        markers = sorted((idx, seq) for (tr, idx, role, seq) in sends.values()
                         if tr == note["train"] and role == 2)
        acks = [seq + 1 for _, seq in (markers[0], markers[-1])]  # SYN: ack = seq + 1
        slots = []
        for ack in acks:
            for i, (_, _, fr) in enumerate(recs):
                if i > first and inbound(fr, me) and fr[23] == 6:
                    ihl = (fr[14] & 0x0F) * 4
                    if struct.unpack(">I", fr[14 + ihl + 8:14 + ihl + 12])[0] == ack:
                        slots.append(i)
                        break
        if len(slots) == 2:
            a, b = slots
            recs[a][1:], recs[b][1:] = recs[b][1:], recs[a][1:]
            swapped += 1
    print(f"reorder: head and tail replies swapped in {swapped} of {measured} measured trains")


def quantise(recs, period, phase):
    me = prober_addr(recs)
    batch = {}
    moved = 0
    for rec in recs:
        ts, _, fr = rec
        if inbound(fr, me):
            tick = phase + ((ts - phase) // period + 1) * period
            k = batch.get(tick, 0)
            batch[tick] = k + 1
            rec[0] = tick + 500 * k
            moved += 1
        elif is_record(fr) and fr[18:19] == b"N" and b'"train_done"' in fr:
            rec[0] = ts + period
    print(f"quantise: {moved} replies re-stamped on a {period / 1000:g} us lattice")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["reorder", "quantise"])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--period-us", type=float, default=125)
    ap.add_argument("--phase-us", type=float, default=37)
    a = ap.parse_args()
    head, recs = read_pcap(a.src)
    if a.mode == "reorder":
        reorder(recs, a.every)
    else:
        quantise(recs, int(a.period_us * 1000), int(a.phase_us * 1000))
    write_pcap(a.dst, head, recs)


if __name__ == "__main__":
    main()
