#!/usr/bin/env python3
"""Replays one rule of judge_gaps() (src/estimate/capacity_gaps.cpp) over every committed
random-path benchmark run in git history (results/paths_runs/, each distinct file once).

The rule: gaps the capacity check kept as "agrees" are adopted when they read over 2% above
the trains and CapProbe's least-delayed spans (min_delay_bps) agree with them within 3% and read
over 2% above the trains too. Prints how many estimates it changes and how their error against
the run's truth moves (the gaps' estimate taken as final; later corrections, such as the hops',
are not replayed).

    python3 scripts/gap_rule_history.py        # from the checkout's top directory
"""
import statistics

from committed_runs import distinct_runs


def main():
    runs, rows, commits = 0, [], set()
    for c, d in distinct_runs():
        commits.add(c)
        doc = d.get("doc") or {}
        truth = (d.get("truth") or {}).get("capacity_bps")
        if not truth or not doc.get("capacity_bps"):
            continue
        runs += 1
        g = doc.get("gap_check") or {}
        gc, md, tr = g.get("capacity_bps"), g.get("min_delay_bps"), g.get("trains_capacity_bps")
        if g.get("verdict") != "agrees" or not (gc and md and tr):
            continue
        if gc / tr - 1 > 0.02 and 0.97 <= md / gc <= 1 / 0.97 and md / tr > 1.02:
            rows.append((c, d["path"]["index"], doc["capacity_bps"] / truth - 1, gc / truth - 1))
    print(f"{len(commits)} benchmark commits, {runs} distinct runs with a capacity; "
          f"the rule changes {len(rows)}")
    for c, p, old, new in rows:
        print(f"  {c} path {p:3d}: {100 * old:+.1f}% -> {100 * new:+.1f}%")
    if rows:
        better = sum(abs(n) < abs(o) - 0.002 for _, _, o, n in rows)
        worse = sum(abs(n) > abs(o) + 0.002 for _, _, o, n in rows)
        print(f"closer {better}, further {worse}; median |error| "
              f"{100 * statistics.median(abs(o) for _, _, o, _ in rows):.1f}% -> "
              f"{100 * statistics.median(abs(n) for _, _, _, n in rows):.1f}%")


if __name__ == "__main__":
    main()
