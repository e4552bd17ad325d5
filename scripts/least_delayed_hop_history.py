#!/usr/bin/env python3
"""Replays measure's least_delayed_at_hop rule (estimate/hops.hpp, hop_at_least_delayed)
over the committed random-path benchmark documents (results/**/paths_runs/*.json) and
any run directories given on the command line: which documents it fires on, and the
reported capacity's error before and after. Reads only the documents (no lab)."""
import argparse
import glob
import json
import os

K_SQUEEZED_LIFT = 1.10
K_HOP_SPREAD_MAX = 1.20
K_LEAST_DELAYED_AT_HOP = 0.05
K_CHOKE = 0.5


def fires(doc, spread=K_HOP_SPREAD_MAX, tol=K_LEAST_DELAYED_AT_HOP):
    """The hop (1-based) the rule takes, or 0. The document is the final one: the rule
    runs only where the capacity still came from the trains or the gaps."""
    g = doc.get('gap_check') or {}
    md = g.get('min_delay_bps')
    hops = doc.get('hops') or []
    cap = doc.get('capacity_bps')
    if not md or not cap or not hops:
        return 0
    if doc.get('capacity_source') not in ('rst_trains', 'reply_gaps'):
        return 0
    best = 0
    # The target's own hop is left out (its trains are capacity trains).
    last = len(hops) - 1 if hops[-1].get('addr') == doc.get('target_addr') else len(hops)
    for i, h in enumerate(hops[:last]):
        r, lo, hi = h.get('rate_bps') or 0, h.get('rate_low_bps') or 0, h.get('rate_high_bps') or 0
        if not h.get('used') or (h.get('choke_fraction') or 0) < K_CHOKE or r <= 0 or lo <= 0:
            continue
        if hi > spread * lo or abs(md / r - 1) > tol or cap <= K_SQUEEZED_LIFT * max(md, hi):
            continue
        if not best or r < hops[best - 1]['rate_bps']:
            best = i + 1
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('dirs', nargs='*', help='extra benchmark output directories')
    ap.add_argument('--spread', type=float, default=K_HOP_SPREAD_MAX)
    ap.add_argument('--tol', type=float, default=K_LEAST_DELAYED_AT_HOP)
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'results')
    files = sorted(glob.glob(os.path.join(root, '**', 'paths_runs', '*.json'), recursive=True))
    for d in a.dirs:
        files += sorted(glob.glob(os.path.join(d, 'paths_runs', '*.json')))
    n = 0
    for f in files:
        d = json.load(open(f))
        doc = d.get('doc') or {}
        if 'truth' not in d or not doc.get('capacity_bps'):
            continue
        n += 1
        k = fires(doc, a.spread, a.tol)
        if not k:
            continue
        c = d['truth']['capacity_bps']
        md = doc['gap_check']['min_delay_bps']
        print('%s: hop %d; capacity %+.1f%% -> %+.1f%% (narrow link %d)' % (
            os.path.relpath(f), k, 100 * (doc['capacity_bps'] / c - 1), 100 * (md / c - 1),
            d['truth'].get('narrow_link', 0)))
    print('%d documents with a truth and a capacity' % n)


if __name__ == '__main__':
    main()
