#!/usr/bin/env python3
"""One table of every committed random-path benchmark run (results/paths_benchmark.json and
results/paths_seed*/paths_benchmark.json): seed, binary, date and the overall numbers beside
issue 11's bar, so a reader sees the trend and the spread between seeds at a glance. Writes
results/paths_seeds_summary.md (or prints it with --print). Reads only the committed JSON.

    python3 scripts/paths_seeds_summary.py
"""
import glob
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'results')


def row(path):
    d = json.load(open(path))
    m, o = d['meta'], d['overall']
    c, a, h = o['capacity'], o['availbw'], o['hop']
    rel = os.path.relpath(os.path.dirname(path), ROOT) or '.'
    return m.get('date', ''), '| %s | %s | %s | %s | %d | %.2f | %.2f | %.1f | %d/%d | %.1f | %.1f | %d/%d | %d/%d | %.1f |' % (
        '`%s/`' % rel if rel != '.' else '`paths_benchmark.md`', m.get('seed'), m.get('commit'),
        m.get('date', '')[:10], o['paths'], c['median_abs_err_pct'], c['p90_abs_err_pct'],
        c['worst_abs_err_pct'], c['range_holds'], c['ranges'], a['median_abs_err_pct'],
        a['p90_abs_err_pct'], a['range_holds'], a['ranges'], h['right'], o['paths'],
        o['phases_time_s']['median'])


def main():
    files = [os.path.join(ROOT, 'paths_benchmark.json')] + sorted(
        glob.glob(os.path.join(ROOT, 'paths_seed*', 'paths_benchmark.json')))
    rows = sorted(row(f) for f in files if os.path.exists(f))
    out = ['# Random-path benchmark runs, side by side', '',
           'Written by `python3 scripts/paths_seeds_summary.py` from each run\'s '
           '`paths_benchmark.json` (each names its own command). Seed 2026 is the one the '
           'rules were developed on; every later seed was unseen when run. Errors are |estimate '
           '/ truth - 1|; "phases" is the median of `capacity_elapsed_s + availbw_elapsed_s` '
           '(`measure --no-hops`\' share). Issue 11\'s bar: capacity median <= 1%, p90 <= 3%; '
           'avail-bw median <= 4%, p90 <= 10%, range >= 90%; hop >= 95%; time <= 5 s.', '',
           '| run | seed | binary | date | paths | cap. median % | cap. p90 % | cap. worst % | '
           'cap. interval holds | avail median % | avail p90 % | avail range holds | hop right | '
           'phases median s |',
           '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    out += [r for _, r in rows]
    text = '\n'.join(out) + '\n'
    if '--print' in sys.argv:
        print(text, end='')
        return
    with open(os.path.join(ROOT, 'paths_seeds_summary.md'), 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
