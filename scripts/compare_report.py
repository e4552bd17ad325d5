"""Tables and plots of scripts/compare.py, made only from its CSV (and the
kept `linkwidth measure` JSON documents): OUT/comparison.md, OUT/table{N}.png
and the one-measurement plots OUT/measure-*.png."""
import csv
import json
import os
import re
import statistics

M = 1e6
TITLES = {
    1: "Table 1: 100 Mbit/s bottleneck, constant-rate UDP cross traffic",
    2: "Table 2: 10 Mbit/s bottleneck, constant-rate UDP cross traffic",
    3: "Table 3: long-lived TCP cross traffic (cubic) on bottlenecks of 10-100 Mbit/s",
    4: "Table 4: short-lived HTTP cross traffic (httperf) on a 3 Mbit/s bottleneck",
}
TOOLS = (("fleet", "tab:blue"), ("linkwidth", "tab:orange"), ("iperf3", "tab:green"))


def _value(text):
    if text in ("True", "False"):
        return text == "True"
    try:
        return float(text)
    except ValueError:
        return text


def load_rows(csv_path):
    with open(csv_path, newline="") as f:
        return [{k: _value(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _nums(rows, key):
    return [r[key] for r in rows if isinstance(r.get(key), float)]


def median(rows, key):
    v = _nums(rows, key)
    return statistics.median(v) if v else None


def _mb(x, digits=2):
    return "-" if x is None else f"{x / M:.{digits}f}"


def _secs(x):
    return "-" if x is None else f"{x:.1f}"


def _pct(x):
    return "-" if x is None else f"{x:+.0f}%"


def paper_avail(text):
    """The paper's LinkWidth avail-bw values from "I/A" cells ("88/87 (2.4);
    90/78 (2.6 HRT)" -> [87, 78])."""
    out = []
    for part in text.split(";"):
        m = re.match(r"\s*[\d.]+\s*/\s*([\d.]+)", part)
        if m:
            out.append(float(m.group(1)))
    return out


def paper_range(text):
    """(low, high) of a paper iperf cell ("5-38", "6.2"); None if unreadable
    (Table 2 prints "8.5.1")."""
    m = re.fullmatch(r"\s*([\d.]+)(?:\s*-\s*([\d.]+))?\s*", text)
    try:
        return (float(m.group(1)), float(m.group(2) or m.group(1))) if m else None
    except ValueError:
        return None


def _tool_cell(rows, m):
    a = median(rows, f"{m}_availbw_bps")
    if a is None:
        return "no estimate"
    if m == "fleet":
        return f"{_mb(a)} [{_mb(median(rows, 'fleet_low_bps'))}, {_mb(median(rows, 'fleet_high_bps'))}]"
    return _mb(a)


def table_lines(table, scenarios, by_sc):
    lines = [f"### {TITLES[table]}", "",
             "| scenario | cross traffic | runs | cross measured (fleet / linkwidth / iperf3) "
             "| capacity truth | avail-bw truth | fleet [range] | fleet error | range holds truth "
             "| linkwidth | linkwidth error | iperf3 TCP | capacity (fleet / linkwidth) "
             "| bottleneck hop (truth) | time s (fleet / linkwidth) "
             "| paper LinkWidth I/A | paper iperf |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for sc in scenarios:
        rs = by_sc.get(sc["name"])
        if not rs:
            continue
        holds = [r["fleet_range_holds_truth"] for r in rs if isinstance(r.get(
            "fleet_range_holds_truth"), bool)]
        hops = "/".join(str(int(h)) if isinstance(h, float) else "-"
                        for h in (r["fleet_bottleneck_hop"] for r in rs))
        el = lambda m: median(rs, f"{m}_elapsed_s")  # noqa: E731
        lines.append(
            f"| {sc['name']} | {rs[0]['cross_config']} | {len(rs)} "
            f"| {_mb(median(rs, 'fleet_cross_bps'))} / {_mb(median(rs, 'linkwidth_cross_bps'))} "
            f"/ {_mb(median(rs, 'iperf3_cross_bps'))} "
            f"| {_mb(median(rs, 'capacity_truth_bps'))} | {_mb(median(rs, 'fleet_avail_truth_bps'))} "
            f"| {_tool_cell(rs, 'fleet')} | {_pct(median(rs, 'fleet_error_pct'))} "
            f"| {sum(holds)}/{len(holds)} "
            f"| {_tool_cell(rs, 'linkwidth')} | {_pct(median(rs, 'linkwidth_error_pct'))} "
            f"| {_mb(median(rs, 'iperf3_bps'))} "
            f"| {_mb(median(rs, 'fleet_capacity_bps'))} / {_mb(median(rs, 'linkwidth_capacity_bps'))} "
            f"| {hops} ({int(rs[0]['bottleneck_hop_truth'])}) "
            f"| {_secs(el('fleet'))} / {_secs(el('linkwidth'))} "
            f"| {sc['paper'][0]} | {sc['paper'][1]} |")
    return lines + [""]


def plot_table(table, scenarios, by_sc, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scs = [sc for sc in scenarios if by_sc.get(sc["name"])]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.9 * len(scs) + 3), 4.5))
    for i, sc in enumerate(scs):
        rs = by_sc[sc["name"]]
        truth = _nums(rs, "fleet_avail_truth_bps")
        ax.hlines(statistics.median(truth) / M, i - 0.4, i + 0.4, color="k", lw=2,
                  label="truth (capacity - measured cross)" if i == 0 else None)
        for j, (tool, colour) in enumerate(TOOLS):
            key = "iperf3_bps" if tool == "iperf3" else f"{tool}_availbw_bps"
            v = _nums(rs, key)
            if v:
                x = i - 0.25 + 0.17 * j
                ax.errorbar(x, statistics.median(v) / M,
                            yerr=[[(statistics.median(v) - min(v)) / M],
                                  [(max(v) - statistics.median(v)) / M]],
                            fmt="o", color=colour, capsize=3,
                            label=(tool if tool == "iperf3" else f"linkwidth --method {tool}")
                            if i == 0 else None)
        for a in paper_avail(sc["paper"][0]):
            ax.plot(i + 0.26, a, "s", mfc="none", mec="tab:red", ms=8,
                    label="paper: LinkWidth (A)" if i == 0 else None)
        pr = paper_range(sc["paper"][1])
        if pr:
            ax.errorbar(i + 0.36, (pr[0] + pr[1]) / 2, yerr=(pr[1] - pr[0]) / 2, fmt="^",
                        mfc="none", color="tab:purple", capsize=3,
                        label="paper: iperf" if i == 0 else None)
    ax.set_xticks(range(len(scs)))
    ax.set_xticklabels([f"{sc['name']}\n{sc['capacity'] / M:g} Mbit/s" for sc in scs],
                       fontsize=8)
    ax.set_ylabel("available bandwidth (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(TITLES[table] + "\n(median, min-max over runs)", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)


def representative_run(rs):
    """The run whose fleet error is the median one (the first if none has one)."""
    ok = [r for r in rs if isinstance(r.get("fleet_error_pct"), float)]
    if not ok:
        return rs[0]
    return sorted(ok, key=lambda r: r["fleet_error_pct"])[(len(ok) - 1) // 2]


def report(out, scenarios, representative, plots=True):
    rows = load_rows(os.path.join(out, "comparison.csv"))
    meta_path = os.path.join(out, "comparison.meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    by_sc = {}
    for r in rows:
        by_sc.setdefault(r["scenario"], []).append(r)
    tables = sorted({sc["table"] for sc in scenarios if sc["name"] in by_sc})
    lines = ["# linkwidth beside the LinkWidth paper's section 4", "",
             f"Produced by `{meta.get('command', 'python3 scripts/compare.py')}` at commit "
             f"{meta.get('commit', '?')} on {meta.get('date', '?')} ({meta.get('cores', '?')} "
             f"cores, {meta.get('seconds', '?')} s). Raw rows: `comparison.csv`; each run's "
             "`linkwidth measure --json` document: `runs/`. How truth is defined and what the "
             "columns mean: `README.md`.", "",
             "Rates in Mbit/s (IP layer), medians over the runs; errors are each run's "
             f"estimate / its own interval's truth - 1, median over runs. iperf3: one TCP cubic "
             f"flow for {meta.get('iperf_seconds', '?')} s.", ""]
    made = []
    for t in tables:
        scs = [sc for sc in scenarios if sc["table"] == t]
        lines += table_lines(t, scs, by_sc)
        if not plots:
            continue
        png = f"table{t}.png"
        plot_table(t, scs, by_sc, os.path.join(out, png))
        lines += [f"![{TITLES[t]}]({png})", ""]
        import plot_measure
        name = representative.get(t)
        name = name if name in by_sc else next(sc["name"] for sc in scs if sc["name"] in by_sc)
        r = representative_run(by_sc[name])
        for m in ("fleet", "linkwidth"):
            doc_path = os.path.join(out, r[f"{m}_json"])
            doc = json.load(open(doc_path)) if os.path.exists(doc_path) else {}
            if not doc.get("rates"):
                continue
            png = f"measure-{name}-r{int(r['run'])}-{m}.png"
            truth = r[f"{m}_avail_truth_bps"]
            plot_measure.plot(doc, os.path.join(out, png),
                              f"{name} run {int(r['run'])}: linkwidth measure --method {m} "
                              f"({r['cross_config']})",
                              truth if isinstance(truth, float) else None)
            made.append(png)
            lines += [f"One measurement, {name} run {int(r['run'])}, `--method {m}`:", "",
                      f"![{name} {m}]({png})", ""]
    with open(os.path.join(out, "comparison.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return made
