#!/usr/bin/env python3
"""How much of the avail-bw's error on the random-path benchmark its own
standard error already announced (issue 11's 90th-percentile bar), over the
committed runs (git history of results/paths_runs/). No lab run.

For every run whose estimate is the response curve's crossing
(availbw_basis "response_curve"), it compares the error against the truth
with the crossing's own standard error (crossing_se_bps: how the response
trains' ratios varied, estimate/availbw.cpp), and asks what the response
phase would have had to send for that standard error to fall to 5% of the
estimate (half the bar): its trains times (SE / (0.05 x estimate))^2, at the
seconds per train the run spent (from the `at_s` of its rate records, as
paths_time_budget.py reads them). The standard error falls as 1/sqrt(n)
only where the trains sample independent stretches of the cross traffic;
heavy-tailed on/off periods make it fall slower, so the projection is a
floor.

    python3 scripts/availbw_spread_history.py [--repo .] [--runs N] [--out FILE]
"""
import argparse
import collections
import statistics
import subprocess

from committed_runs import path_runs
from paths_time_budget import p90, parts

TARGET = 0.05  # the standard error asked of the estimate: half the 10% bar
BAR = 0.10


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".")
    ap.add_argument("--runs", type=int, default=8, help="newest committed runs to read")
    ap.add_argument("--out", help="write the table here (markdown) as well as to stdout")
    a = ap.parse_args()
    revs = subprocess.run(["git", "-C", a.repo, "log", "--format=%h", f"-{a.runs}", "--",
                           "results/paths_runs/path000.json"],
                          capture_output=True, text=True, check=True).stdout.split()
    rows = []
    bases = collections.Counter()
    over_bar_by_basis = collections.Counter()
    for rev, i, d in path_runs(a.repo, revs):
        doc = d.get("doc") or {}
        truth = (d.get("truth") or {}).get("availbw_bps")
        est = doc.get("availbw_bps")
        if not truth or est is None:
            continue
        err = est / truth - 1
        basis = doc.get("availbw_basis")
        bases[basis] += 1
        if abs(err) > BAR:
            over_bar_by_basis[basis] += 1
        se = doc.get("crossing_se_bps")
        if basis != "response_curve" or not se or not est > 0:
            continue
        resp = parts(doc).get("response") or {}
        n = doc.get("response_points") or 0
        s = resp.get("s") or 0.0
        trains = resp.get("trains") or 0
        need = n * (se / (TARGET * est)) ** 2 if n else float("nan")
        need_s = need * s / trains if trains else float("nan")
        rows.append({"rev": rev, "path": i, "err": err, "se_rel": se / truth,
                     "z": (est - truth) / se, "n": n, "need": need, "need_s": need_s,
                     "extra_s": max(0.0, need_s - s) if need_s == need_s else float("nan")})
    out = []
    out.append(f"# The avail-bw's error against its own standard error\n")
    out.append(f"Produced by `python3 scripts/availbw_spread_history.py --runs {a.runs}` over "
               f"the committed paths benchmark runs {', '.join(revs)} (newest first); no lab "
               "run of its own.\n")
    total = sum(bases.values())
    over = sum(over_bar_by_basis.values())
    out.append(f"{total} runs with an avail-bw estimate; {over} of them "
               f"({100 * over / max(1, total):.0f}%) over {100 * BAR:.0f}% off the truth. "
               "By basis (runs, over the bar):\n")
    out.append("| basis | runs | over the bar |\n|---|---|---|")
    for b, k in bases.most_common():
        out.append(f"| {b} | {k} | {over_bar_by_basis[b]} |")
    out.append("")
    if rows:
        big = [r for r in rows if abs(r["err"]) > BAR]
        small = [r for r in rows if abs(r["err"]) <= BAR]
        within2 = sum(1 for r in rows if abs(r["z"]) <= 2)
        out.append(f"Runs whose estimate is the crossing: {len(rows)}; the truth within two of "
                   f"the crossing's standard errors in {within2} ({100 * within2 / len(rows):.0f}%)."
                   "\n")
        out.append("| runs | count | median SE / truth | p90 SE / truth | median \\|error\\| / SE "
                   "| median trains used | median trains for SE = 5% | median extra s |")
        out.append("|---|---|---|---|---|---|---|---|")
        for name, grp in (("error over 10%", big), ("error within 10%", small), ("all", rows)):
            if not grp:
                continue
            out.append(
                f"| {name} | {len(grp)} | {100 * statistics.median(r['se_rel'] for r in grp):.1f}% "
                f"| {100 * p90([r['se_rel'] for r in grp]):.1f}% "
                f"| {statistics.median(abs(r['z']) for r in grp):.2f} "
                f"| {statistics.median(r['n'] for r in grp):.0f} "
                f"| {statistics.median(r['need'] for r in grp):.0f} "
                f"| {statistics.median(r['extra_s'] for r in grp if r['extra_s'] == r['extra_s']):.1f} |")
        out.append("")
        announced = sum(1 for r in big if r["se_rel"] > TARGET)
        out.append(f"Of the {len(big)} crossings over 10% off, {announced} had a standard error "
                   f"over {100 * TARGET:.0f}% of the truth: their own spread already allowed "
                   "such an error.\n")
        out.append("Per path (runs over the bar only): error, SE / truth, trains used -> trains "
                   "for SE = 5% of the estimate.\n")
        out.append("| path | runs | errors % | SE / truth % | trains used | trains for 5% |")
        out.append("|---|---|---|---|---|---|")
        by_path = collections.defaultdict(list)
        for r in big:
            by_path[r["path"]].append(r)
        for p in sorted(by_path, key=lambda p: -len(by_path[p])):
            g = by_path[p]
            errs = " ".join(f"{100 * r['err']:+.0f}" for r in g)
            ses = " ".join(f"{100 * r['se_rel']:.0f}" for r in g)
            used = " ".join(str(r["n"]) for r in g)
            need = " ".join(f"{r['need']:.0f}" for r in g)
            out.append(f"| {p} | {len(g)} | {errs} | {ses} | {used} | {need} |")
    text = "\n".join(out) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
