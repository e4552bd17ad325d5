#!/usr/bin/env python3
"""Compares random-path benchmark runs of the same paths side by side (an A/B of two binaries,
each run with scripts/bench_paths.py --only ... --out DIR): per path the avail-bw error, whether
its range held the truth and the run's time; per run the median, mean and 90th percentile of the
|error|, the ranges that held and the median time. Reads each DIR/paths_benchmark.csv (and the
command from DIR/paths_benchmark.json); no lab run of its own.

    python3 scripts/compare_paths_runs.py --label A1=/tmp/ab/A1 --label B1=/tmp/ab/B1 \\
        --title "..." --out results/ab_lengthening.md
"""
import argparse
import csv
import json
import os
import statistics


def load(d):
    with open(os.path.join(d, "paths_benchmark.csv")) as f:
        rows = {int(r["path"]): r for r in csv.DictReader(f)}
    meta = {}
    try:
        with open(os.path.join(d, "paths_benchmark.json")) as f:
            meta = json.load(f).get("meta", {})
    except (OSError, ValueError):
        pass
    return rows, meta


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def summary(rows):
    errs = sorted(abs(e) for e in (num(r["availbw_err_pct"]) for r in rows.values()) if e is not None)
    times = [t for t in (num(r["elapsed_s"]) for r in rows.values()) if t is not None]
    held = sum(r["availbw_range_holds"] in ("1", "True") for r in rows.values())
    if not errs:
        return "no estimates"
    return (f"{len(errs)} paths: median |error| {statistics.median(errs):.1f}%, mean "
            f"{statistics.mean(errs):.1f}%, 90th percentile {errs[int(0.9 * len(errs))]:.1f}%; "
            f"range held {held}/{len(rows)}; median time {statistics.median(times):.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", action="append", required=True, metavar="NAME=DIR",
                    help="a run's name and its bench_paths --out folder (in column order)")
    ap.add_argument("--title", default="Random-path benchmark runs compared")
    ap.add_argument("--note", default="", help="a paragraph under the title (what differs)")
    ap.add_argument("--out", help="write the markdown here (default: print it)")
    a = ap.parse_args()
    runs = []
    for spec in a.label:
        name, sep, d = spec.partition("=")
        if not sep or not name or not d:
            ap.error(f"--label takes NAME=DIR, not {spec!r}")
        try:
            runs.append((name, *load(d)))
        except OSError as e:
            ap.error(f"{d}: {e}")
    L = [f"# {a.title}", "", f"Produced by `python3 scripts/compare_paths_runs.py "
         + " ".join(f"--label {s}" for s in a.label) + "` from the runs below.", ""]
    if a.note:
        L += [a.note, ""]
    for name, _, meta in runs:
        L.append(f"- **{name}**: `{meta.get('command', '?')}` at {meta.get('commit', '?')}, "
                 f"binary `{meta.get('binary', '?')}`, {meta.get('started', meta.get('date', '?'))}")
    L.append("")
    for name, rows, _ in runs:
        L.append(f"- **{name}**: {summary(rows)}")
    L += ["", "Avail-bw error, range held (1/0), time of `measure` per path:", "",
          "| path | " + " | ".join(n for n, _, _ in runs) + " |",
          "|---|" + "---|" * len(runs)]
    for p in sorted(set().union(*(set(rows) for _, rows, _ in runs))):
        cells = []
        for _, rows, _ in runs:
            r = rows.get(p)
            e = num(r["availbw_err_pct"]) if r else None
            cells.append("-" if e is None else
                         f"{e:+.1f}% {1 if r['availbw_range_holds'] in ('1', 'True') else 0} "
                         f"{num(r['elapsed_s']) or 0:.1f} s")
        L.append(f"| {p} | " + " | ".join(cells) + " |")
    text = "\n".join(L) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
