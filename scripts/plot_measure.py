#!/usr/bin/env python3
"""Plot one `linkwidth measure --json` (or `availbw --json`) document.

Left: the probing response curve, the measured offered rate of each tested
rate against its offered/received ratio R_m/R_o (the median of its trains,
each train a small dot), with the avail-bw estimate and its range, the
capacity, and the decision threshold the search used (fleet: calibration
baseline + noise threshold; linkwidth: the paper's "above if R_m/R_o > 1").
Right: the rate search over time (seconds since the avail-bw phase began),
coloured by verdict.

    python3 scripts/plot_measure.py measure.json -o measure.png [--truth 30.5M]

Reads only the JSON document; needs matplotlib.
"""
import argparse
import json
import os
import sys

M = 1e6
VERDICT_COLOURS = {"below": "tab:green", "above": "tab:red", "grey": "tab:orange",
                   "unclear": "tab:orange", "calibration": "tab:gray",
                   "response": "tab:purple"}


def _colour(verdict):
    return VERDICT_COLOURS.get(verdict or "", "tab:blue")


def _threshold(doc):
    """(ratio line, label) of the decision threshold the method used, or
    None when the fleet calibration never finished (no threshold)."""
    noise = doc.get("noise") or {}
    if doc.get("method") == "linkwidth":
        return 1.0, "paper rule: above if R_m/R_o > 1"
    if not noise.get("threshold"):
        return None
    return (noise.get("baseline", 1.0) + noise["threshold"],
            f"baseline + noise threshold ({noise['threshold']:.3f})")


def _mark_estimate(ax, doc, vertical, truth_bps=None):
    """Estimate, its range, the capacity (and the truth if known) as lines
    across `ax`: vertical lines on a rate x-axis, horizontal on a rate y-axis."""
    line = ax.axvline if vertical else ax.axhline
    span = ax.axvspan if vertical else ax.axhspan
    a, lo, hi = doc.get("availbw_bps"), doc.get("availbw_low_bps"), doc.get("availbw_high_bps")
    if lo is not None and hi is not None:
        span(lo / M, hi / M, color="tab:blue", alpha=0.12, label="avail-bw range")
    if a is not None:
        line(a / M, color="tab:blue", lw=2, label=f"avail-bw {a / M:.2f} Mbit/s")
    if doc.get("capacity_bps"):
        line(doc["capacity_bps"] / M, color="k", ls="--", lw=1,
             label=f"capacity {doc['capacity_bps'] / M:.2f} Mbit/s")
    if truth_bps is not None:
        line(truth_bps / M, color="tab:brown", ls=":", lw=2,
             label=f"truth {truth_bps / M:.2f} Mbit/s")


def plot(doc, png, title=None, truth_bps=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = doc.get("rates") or []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    # (a) response curve
    for r in rates:
        for t in r.get("trains") or []:
            if t.get("ratio") is not None and t.get("offered_bps"):
                ax1.plot(t["offered_bps"] / M, t["ratio"], ".", ms=3, color=_colour(r.get("verdict")),
                         alpha=0.35)
    seen = set()
    for r in rates:
        if r.get("ratio") is None or not r.get("offered_bps"):
            continue
        v = r.get("verdict") or r.get("phase")
        ax1.plot(r["offered_bps"] / M, r["ratio"], "o", ms=7, color=_colour(v),
                 mec="k", mew=0.5, label=None if v in seen else v)
        seen.add(v)
    thr = _threshold(doc)
    if thr:
        ax1.axhline(thr[0], color="tab:red", ls="-.", lw=1, label=thr[1])
    _mark_estimate(ax1, doc, vertical=True, truth_bps=truth_bps)
    ax1.set_xlabel("offered rate (Mbit/s, measured at the prober)")
    ax1.set_ylabel("R_m / R_o  (offered / received rate)")
    ax1.set_title("probing response curve")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="upper left")
    # (b) rate search over time
    pts = [r for r in rates if r.get("at_s") is not None and r.get("rate_bps")]
    if pts:
        ax2.plot([r["at_s"] for r in pts], [r["rate_bps"] / M for r in pts], "-",
                 color="0.7", lw=1, zorder=1)
    seen = set()
    for r in pts:
        v = r.get("verdict") or r.get("phase")
        ax2.scatter(r["at_s"], r["rate_bps"] / M, s=40, color=_colour(v), edgecolor="k",
                    linewidth=0.5, zorder=2, label=None if v in seen else v)
        seen.add(v)
    _mark_estimate(ax2, doc, vertical=False, truth_bps=truth_bps)
    ax2.set_xlabel("time since the avail-bw phase began (s)")
    ax2.set_ylabel("tested rate (Mbit/s)")
    ax2.set_title(f"rate search ({doc.get('method', '?')}, stop: {doc.get('stop_reason', '?')})")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8, loc="best")
    fig.suptitle(title or f"linkwidth measure {doc.get('target', '')}, "
                          f"method {doc.get('method', '?')}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="a `linkwidth measure --json` document ('-' = stdin)")
    ap.add_argument("-o", "--output", required=True, help="PNG file to write")
    ap.add_argument("--title")
    ap.add_argument("--truth", help="true avail-bw to mark, bit/s (K/M/G suffixes)")
    args = ap.parse_args()
    doc = json.load(sys.stdin if args.json == "-" else open(args.json))
    if not doc.get("rates"):
        sys.exit(f"plot_measure.py: {args.json} has no rates[] (not a measure/availbw document"
                 + (f": error {doc['error'].get('code')}" if doc.get("error") else "") + ")")
    truth = None
    if args.truth:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import lab
        truth = lab.parse_rate(args.truth)
    plot(doc, args.output, args.title, truth)


if __name__ == "__main__":
    main()
