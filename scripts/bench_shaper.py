#!/usr/bin/env python3
"""Token-bucket benchmark (issue 13): `linkwidth measure --no-hops` on tbf
shapers of the issue's grid (buckets 30 KB, 300 KB, 3 MB at 10, 20 and 100
Mbit/s), idle and with CBR UDP cross traffic through the shaper; the burst
at the line rate, or (--peaks) at a second bucket's peak rate, a multiple of
the sustained one.

For each (rate, bucket): a lab prober --(unshaped)-- r1 --(tbf rate, burst)--
target, `--runs` runs of linkwidth (pinned to CPU 0; the cross-traffic
generator to CPU 1). Truth: the sustained rate R = rate x 1500/1514 (IP
layer), the bucket burst x 1500/1514 (IP bytes), the avail-bw R minus the
cross traffic counted on the link's receiving interface during the run.
Writes results/shaper_benchmark.csv and .md (rows appended per invocation
with --append, so the grid can be run in parts under the lab lock):

    flock /tmp/lw-lab.lock python3 scripts/bench_shaper.py --rates 10e6 --cross 0.25
"""
import argparse
import csv
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402

BIN = os.environ.get("LINKWIDTH_BIN", os.path.join(ROOT, "build", "linkwidth"))
FIELDS = ["rate_bps", "burst_bytes", "peak_bps", "cross_frac", "run", "exit", "truth_rate_bps",
          "rate_est_bps", "rate_err", "truth_bucket_bytes", "bucket_est_bytes", "bucket_err",
          "shaper_verdict", "cross_bps", "truth_availbw_bps", "availbw_bps", "availbw_err",
          "refill_pairs", "elapsed_s", "probe_bytes", "stop_reason", "error", "trigger",
          "peak_est_bps", "peak_err"]


def err(a, b):
    return None if a is None or not b else a / b - 1


def one(L, rate, burst, peak, frac, k, docs=None, verbose=False):
    R = L.ground_truth_capacity(ip_len=1500)
    w = L.cross_window(2)
    t0 = time.monotonic()
    p = L.run_in_prober(["taskset", "-c", "0", BIN, "measure", L.target_ip, "--no-hops",
                         "--json"] + (["-v"] if verbose else []), timeout=120)
    elapsed = time.monotonic() - t0
    X = w.stop().bps if frac > 0 else 0.0
    doc = json.loads(p.stdout)
    if docs:
        # The whole document of each run, so a miss can be read afterwards.
        os.makedirs(docs, exist_ok=True)
        name = f"{rate / 1e6:g}M_{burst / 1e3:g}K{f'_P{peak / 1e6:g}M' if peak else ''}_run{k}.json"
        with open(os.path.join(docs, name), "w") as f:
            json.dump({"doc": doc, "stderr": (p.stderr or "")[-20000:], "cross_bps": X}, f)
    sh = doc.get("shaper") or {}
    chk = doc.get("shaper_check") or {}
    bucket = burst * 1500 / 1514
    P = peak * 1500 / 1514 if peak else None
    return {"rate_bps": rate, "burst_bytes": burst, "peak_bps": peak, "cross_frac": frac, "run": k,
            "exit": p.returncode, "truth_rate_bps": R, "rate_est_bps": sh.get("rate_bps"),
            "rate_err": err(sh.get("rate_bps"), R), "truth_bucket_bytes": bucket,
            "bucket_est_bytes": sh.get("bucket_bytes"),
            "bucket_err": err(sh.get("bucket_bytes"), bucket),
            "shaper_verdict": chk.get("verdict"), "cross_bps": X,
            "truth_availbw_bps": R - X, "availbw_bps": doc.get("availbw_bps"),
            "availbw_err": err(doc.get("availbw_bps"), R - X),
            "refill_pairs": chk.get("refill_pairs"), "elapsed_s": round(elapsed, 2),
            "probe_bytes": doc.get("probe_bytes"), "stop_reason": doc.get("stop_reason"),
            "error": (doc.get("error") or {}).get("code") if isinstance(doc.get("error"), dict)
            else doc.get("error"), "trigger": chk.get("trigger"),
            "peak_est_bps": sh.get("peak_bps"), "peak_err": err(sh.get("peak_bps"), P)}


def pct(v):
    return "-" if v is None else f"{v:+.1%}"


def med(rows, key):
    v = [r[key] for r in rows if r[key] is not None]
    return statistics.median(v) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", nargs="*", type=float, default=[10e6, 20e6, 100e6])
    ap.add_argument("--bursts", nargs="*", type=int, default=[30_000, 300_000, 3_000_000])
    ap.add_argument("--peaks", nargs="*", type=float, default=[0, 5],
                    help="peak rate as a multiple of the rate (a tbf peakrate); 0: the line rate")
    ap.add_argument("--cross", type=float, default=0.25, help="cross traffic, fraction of the rate")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--append", action="store_true", help="add to the existing csv")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "shaper_benchmark"))
    ap.add_argument("--docs", help="keep each run's JSON document (and stderr) in this folder")
    ap.add_argument("--verbose", action="store_true", help="run linkwidth with -v (its stderr "
                    "goes into --docs)")
    a = ap.parse_args()
    # The commit measured: read before the runs (src/ edited during a run
    # does not change the binary it measured).
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    if subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", "src",
                       "include"]).returncode:
        rev += " with uncommitted changes to src/ or include/"
    rows = []
    if a.append and os.path.exists(a.out + ".csv"):
        with open(a.out + ".csv") as f:
            for r in csv.DictReader(f):
                rows.append({k: (None if r.get(k) in ("", "None", None) else
                                 (r[k] if k in ("shaper_verdict", "stop_reason", "error",
                                                "trigger") else float(r[k])))
                             for k in FIELDS})
                rows[-1]["peak_bps"] = rows[-1]["peak_bps"] or 0.0
    for rate, burst, mult in [(r, b, m) for m in a.peaks for r in a.rates for b in a.bursts]:
        peak = mult * rate
        spec = lab.Spec(links=[lab.Link(rate=None),
                               lab.Link(rate=rate, burst=burst, peakrate=peak or None)])
        with lab.Lab(spec) as L:
            x = L.cross(2, "udp", rate=a.cross * rate, cpu=1) if a.cross > 0 else None
            try:
                if x:
                    time.sleep(0.5)
                for k in range(a.runs):
                    r = one(L, rate, burst, peak, a.cross, k, a.docs, a.verbose)
                    rows.append(r)
                    print(f"{rate / 1e6:g}M {burst / 1e3:g}K peak {peak / 1e6:g}M run {k}: "
                          f"exit {r['exit']} {r['trigger']} {r['shaper_verdict']} "
                          f"rate {pct(r['rate_err'])} bucket {pct(r['bucket_err'])} "
                          f"avail {pct(r['availbw_err'])} {r['elapsed_s']} s "
                          f"{(r['probe_bytes'] or 0) / 1e6:.1f} MB", flush=True)
            finally:
                if x:
                    x.stop()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out + ".csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=FIELDS)
        wr.writeheader()
        wr.writerows(rows)
    lines = [f"# Token-bucket benchmark ({datetime.date.today()}, commit {rev})", "",
             "`" + " ".join(["python3", "scripts/bench_shaper.py", *sys.argv[1:]]) + "`"
             " (under the lab lock; linkwidth on CPU 0, cross traffic on CPU 1).", "",
             "`linkwidth measure TARGET --no-hops` on tbf RATE with `burst` B (and `peakrate` "
             "P where a peak is given; else the burst leaves at the line rate), CBR UDP cross "
             "traffic through the shaper at the fraction given. Medians over the runs; "
             "errors against R = rate x 1500/1514, B x 1500/1514, P x 1500/1514, R - cross "
             "(counted). `trigger`: what sent the shaper stream (the trains' signs, or the "
             "routine check when they showed none).", "",
             "| rate | bucket | peak | cross | runs | found | trigger | rate err | bucket err | "
             "peak err | avail-bw err (each run) | refill pairs | time s | MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["rate_bps"], r["burst_bytes"], r["peak_bps"], r["cross_frac"])
                   for r in rows})
    for rate, burst, peak, frac in keys:
        g = [r for r in rows if (r["rate_bps"], r["burst_bytes"], r["peak_bps"],
                                 r["cross_frac"]) == (rate, burst, peak, frac)]
        trig = "/".join(sorted({str(r["trigger"]) for r in g}))
        found = sum(1 for r in g if r["shaper_verdict"] == "found")
        each = " ".join(pct(r["availbw_err"]) for r in g)
        lines.append(f"| {rate / 1e6:g} Mbit/s | {burst / 1e3:g} KB | "
                     f"{f'{peak / 1e6:g} Mbit/s' if peak else 'line'} | {frac:.0%} | {len(g)} | "
                     f"{found} | {trig} | {pct(med(g, 'rate_err'))} | {pct(med(g, 'bucket_err'))} | "
                     f"{pct(med(g, 'peak_err'))} | "
                     f"{pct(med(g, 'availbw_err'))} ({each}) | {med(g, 'refill_pairs')} | "
                     f"{med(g, 'elapsed_s'):.1f} | {(med(g, 'probe_bytes') or 0) / 1e6:.1f} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
