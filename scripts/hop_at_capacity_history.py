#!/usr/bin/env python3
"""Replays measure's bottleneck_at_capacity rule (estimate/hops.hpp, hop_at_capacity) with
another kHopFar over random-path benchmark documents (results/**/paths_runs/*.json and any
run directories given): for each document where the rule did not fire, whether the named
bottleneck hop lies between kHopFar and the old 10% off the capacity and a hop within
kHopNear (8%) of it, nearer than the named one, slowed some trains; which hop it would name
then, against the narrow link. Reads only the documents (no lab).

    python3 scripts/hop_at_capacity_history.py [--far 1.05] [DIR ...]
"""
import argparse
import glob
import json
import os

K_HOP_NEAR = 0.08
OLD_FAR = 1.10


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('dirs', nargs='*')
    ap.add_argument('--far', type=float, default=1.05)
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'results')
    files = sorted(glob.glob(os.path.join(root, '**', 'paths_runs', '*.json'), recursive=True))
    for d in a.dirs:
        files += sorted(glob.glob(os.path.join(d, 'paths_runs', '*.json')))
    fixed = broken = n = 0
    for f in files:
        rec = json.load(open(f))
        doc = rec.get('doc') or {}
        if 'truth' not in rec or not doc.get('capacity_bps'):
            continue
        hops = doc.get('hops') or []
        named = doc.get('bottleneck_hop')
        if not hops or not named or any(w['code'] == 'bottleneck_at_capacity' for w in doc['warnings']):
            continue
        n += 1
        c = doc['capacity_bps']
        r = hops[named - 1].get('rate_bps') or 0
        if not r or not (r <= OLD_FAR * c and r * OLD_FAR >= c) or (r <= a.far * c and r * a.far >= c):
            continue
        best = -1
        for k, h in enumerate(hops):
            off = abs((h.get('rate_bps') or 0) / c - 1)
            if not h.get('used') or not (h.get('choke_fraction') or 0) > 0 or not h.get('rate_bps'):
                continue
            if off > K_HOP_NEAR or off >= abs(r / c - 1):
                continue
            if best < 0 or h['choke_fraction'] >= hops[best]['choke_fraction']:
                best = k
        if best < 0:
            continue
        narrow = rec['truth']['narrow_link']
        fixed += best + 1 == narrow and named != narrow
        broken += named == narrow and best + 1 != narrow
        print('%s: named hop %d (%.3f of the capacity) -> hop %d; narrow link %d' % (
            os.path.relpath(f), named, r / c, best + 1, narrow))
    print('%d documents with a named hop: %d right where they were not, %d wrong where they were'
          % (n, fixed, broken))


if __name__ == '__main__':
    main()
