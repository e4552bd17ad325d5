"""The random-path benchmark (scripts/bench_paths.py, issue 11 part 3).

* The generator (no root): seeded and stable, paths within the advertised
  ranges, the narrow link unique, the planned tight link the planned argmin,
  and the classes the report splits by all occur.
* The on/off cross-traffic kind really produces its mean rate on the counters.
* A --quick run on two tiny paths writes the CSV/JSON/MD with the documented
  columns, and its ground truth is the configured capacities minus the cross
  traffic measured on the interface counters during the run.
"""
import csv
import json
import os
import subprocess
import sys
import time

import pytest

from labtest import BIN, LAB_MARKS, ROOT, lab  # noqa: F401

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_paths  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "bench_paths.py")


def _planned_avail(p):
    caps = [lab.ip_capacity(l["rate_bps"]) for l in p["links"]]
    x = {c["link"]: c["planned_bps"] for c in p["cross"]}
    return [c - x.get(i + 1, 0.0) for i, c in enumerate(caps)]


@pytest.mark.noroot
def test_generator_is_seeded_bounded_and_covers_the_classes():
    a = [bench_paths.gen_path(5, i) for i in range(200)]
    assert a == [bench_paths.gen_path(5, i) for i in range(200)]
    assert a[:10] != [bench_paths.gen_path(6, i) for i in range(10)]
    seen = {"local": 0, "remote": 0, "differ": 0, "kinds": set(), "n": set(), "shapers": set(),
            "zero": 0}
    for p in a:
        n = p["n_links"]
        assert 1 <= n <= 5 and len(p["links"]) == n
        rates = [l["rate_bps"] for l in p["links"]]
        narrow = p["planned_narrow"]
        assert rates.index(min(rates)) + 1 == narrow
        assert 5e6 <= min(rates) <= 200e6 and max(rates) <= 1e9 + 1
        assert all(r >= 1.149 * rates[narrow - 1] for i, r in enumerate(rates) if i + 1 != narrow)
        for l in p["links"]:
            assert 10 <= l["queue_ms"] <= 200
            assert l["limit_bytes"] >= 3028 and l["shaper"] in ("tbf", "htb")
        avail = _planned_avail(p)
        t = p["planned_tight"]
        assert avail[t - 1] == min(avail) and avail[t - 1] > 0
        caps = [lab.ip_capacity(r) for r in rates]
        for c in p["cross"]:
            assert 0 < c["planned_bps"] <= 0.9 * caps[c["link"] - 1] + 1
            assert c["planned_bps"] <= bench_paths.CROSS_CAP + 1
        assert sum(c["planned_bps"] for c in p["cross"]) <= bench_paths.CROSS_TOTAL_CAP + 1
        seen["local" if t == 1 else "remote"] += 1
        seen["differ"] += t != narrow
        seen["zero"] += t not in {c["link"] for c in p["cross"]}
        seen["kinds"] |= {c["kind"] for c in p["cross"]}
        seen["n"].add(n)
        seen["shapers"] |= {l["shaper"] for l in p["links"]}
    assert seen["local"] >= 40 and seen["remote"] >= 40 and seen["differ"] >= 30
    assert seen["zero"] >= 5
    assert seen["kinds"] == set(bench_paths.KINDS)
    assert seen["n"] == {1, 2, 3, 4, 5} and seen["shapers"] == {"tbf", "htb"}


@pytest.mark.skipif(os.geteuid() != 0, reason="lab tests need root (network namespaces)")
def test_onoff_cross_traffic_produces_its_mean_rate(lab_factory):
    from lablib.traffic import crossgen_path
    if not os.access(crossgen_path(), os.X_OK):
        pytest.skip("lw_crossgen not built")
    L = lab_factory([lab.Link(rate="100M")])
    # Short periods: ~250 on/off cycles in 5 s, so the window mean is close to
    # the long-run mean even with Pareto periods.
    x = L.cross(1, "onoff", rate=30e6, on_s=0.01, off_s=0.01, alpha=1.5, cpu=1)
    try:
        assert x.peak_bps() == pytest.approx(60e6)
        got = L.measure_cross(1, 5.0)
    finally:
        x.stop()
    assert 0.8 * 30e6 <= got <= 1.2 * 30e6, got


@pytest.mark.skipif(os.geteuid() != 0, reason="lab tests need root (network namespaces)")
@pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")
def test_quick_run_writes_reports_with_truth_from_counters(tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, SCRIPT, "--quick", "--paths", "2", "--seed", "3",
                        "--iperf-every", "2", "--out", str(out), "--bin", BIN, "--no-plots"],
                       capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, p.stderr[-2000:]
    assert time.monotonic() - t0 < 120
    for name in ("paths_benchmark.csv", "paths_benchmark.json", "paths_benchmark.md",
                 "paths_runs/path000.json", "paths_runs/path001.json"):
        assert (out / name).exists(), name
    with open(out / "paths_benchmark.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for col in ("capacity_truth_bps", "capacity_bps", "capacity_err_pct", "capacity_range_holds",
                "availbw_truth_bps", "availbw_bps", "availbw_err_pct", "availbw_range_holds",
                "bottleneck_hop", "hop_right", "narrow_link", "tight_link", "tight_local",
                "tight_is_narrow", "util_band", "tight_kind", "link_cross_mbps", "elapsed_s",
                "probe_bytes", "iperf3_bps", "iperf3_truth_bps"):
        assert col in rows[0], col
    summary = json.loads((out / "paths_benchmark.json").read_text())
    assert summary["meta"]["seed"] == 3 and summary["overall"]["paths"] == 2
    assert set(summary["classes"]) >= {"tight link", "tight vs narrow", "tight-link utilisation %",
                                       "cross traffic on the tight link", "links"}
    md = (out / "paths_benchmark.md").read_text()
    assert "--seed 3" in md and "commit" in md and "taskset -c 0" in md and "CPU 1" in md
    assert rows[0]["iperf3_bps"] != "" and rows[1]["iperf3_bps"] == ""
    for i, row in enumerate(rows):
        rec = json.loads((out / f"paths_runs/path{i:03d}.json").read_text())
        links, window = rec["path"]["links"], rec["window"]["links"]
        caps = [bench_paths.held_ip_capacity(l["rate_bps"]) for l in links]
        planned = {c["link"]: c["planned_bps"] for c in rec["path"]["cross"]}
        assert planned, "every --quick path has cross traffic on its tight link"
        for w in window:
            if w["link"] in planned:
                # measured on xr{i}'s counters, not copied from the plan
                assert w["cross_counted"]
                assert w["cross_bps"] != planned[w["link"]]
                assert 0.6 * planned[w["link"]] <= w["cross_bps"] <= 1.4 * planned[w["link"]]
                # the shaped interface carried it (plus our probes)
                assert w["link_tx_bps"] >= 0.9 * w["cross_bps"]
            else:
                assert w["cross_bps"] == 0 and not w["cross_counted"]
        avail = [c - w["cross_bps"] for c, w in zip(caps, window)]
        assert float(row["availbw_truth_bps"]) == pytest.approx(min(avail), abs=1)
        assert int(row["tight_link"]) == avail.index(min(avail)) + 1
        assert float(row["capacity_truth_bps"]) == pytest.approx(min(caps), abs=1)
        assert int(row["narrow_link"]) == caps.index(min(caps)) + 1
        assert rec["doc"].get("type") or rec["doc"].get("error")
        if row["availbw_bps"]:
            assert float(row["availbw_err_pct"]) == pytest.approx(
                100 * (float(row["availbw_bps"]) / min(avail) - 1), abs=0.01)


def _train(load, size, offered=0.0, ratio=1.0, markers=6, verdict="below"):
    return {"load_packets": load, "packet_size": size, "markers": markers,
            "offered_bps": offered, "ratio": ratio, "verdict": verdict}


@pytest.mark.noroot
def test_time_budget_splits_the_phases_and_replays_the_response(tmp_path):
    """scripts/paths_time_budget.py on one synthetic run whose numbers are known."""
    C, base = 100e6, 1.0
    # Response: the rates alternate 80 and 100 Mbit/s; the first 12 usable
    # trains cross at 50 Mbit/s, the next 20 at 70 (offered - C (ratio - 1)).
    # One stalled train in between is no sample.
    resp = {80e6: [], 100e6: []}
    for i in range(32):
        o = 80e6 if i % 2 == 0 else 100e6
        a = 50e6 if i < 12 else 70e6
        resp[o].append(_train(100, 1500, o, base + (o - a) / C, verdict="above"))
    resp[80e6].insert(8, _train(100, 1500, 80e6, 9.0, verdict="send_stall"))
    doc = {
        "capacity_bps": C, "capacity_elapsed_s": 3.0, "availbw_elapsed_s": 10.0,
        "elapsed_s": 14.0, "availbw_basis": "response_curve",
        "crossing_capacity_source": "narrow_link", "noise": {"baseline": base},
        "params": {"max_load": 0.1, "max_replies_per_s": 100.0},
        "rates": [
            {"phase": "calibration", "at_s": 0.0, "trains": [_train(10, 100)] * 2},
            {"phase": "search", "at_s": 1.0, "trains": [_train(100, 1500)] * 2},
            {"phase": "response", "at_s": 4.0, "trains": resp[80e6]},
            {"phase": "response", "at_s": 4.0, "trains": resp[100e6]},
        ],
    }
    (tmp_path / "paths_runs").mkdir()
    (tmp_path / "paths_runs" / "path000.json").write_text(
        json.dumps({"path": {"index": 0}, "doc": doc}))
    (tmp_path / "paths_runs" / "path001.json").write_text(
        json.dumps({"path": {"index": 1}, "doc": {"error": {"code": "x"}}}))  # no avail-bw phase
    (tmp_path / "paths_benchmark.csv").write_text("path,availbw_truth_bps\n0,60000000\n1,\n")
    out = tmp_path / "budget.md"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "paths_time_budget.py"),
                        "--dir", str(tmp_path), "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    md = out.read_text()
    rows = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[2:-1]]
            for l in md.splitlines() if l.startswith("| ") and not l.startswith("| part")}
    assert "(1 runs with an avail-bw phase)" in md
    assert rows["capacity phase (discovery included)"][0] == "3.00"
    assert rows["hops phase (`--no-hops` leaves it out)"][0] == "1.00"
    assert rows["calibration trains"][0] == "1.00"
    assert rows["search fleets"][0] == "3.00"
    assert rows["response trains"][0] == "6.00"
    assert rows["capacity + avail-bw (what `measure --no-hops` takes)"][0] == "13.00"
    # bytes: 2 x 10 x 100 + 2 x 100 x 1500 + 33 x 100 x 1500 = 5 252 000; x 8 / (0.1 C)
    assert rows["probe bytes x 8 / (--max-load x C)"][0] == "4.20"
    # replies: (6 + 1) x 37 trains / 100 per s
    assert rows["marker replies / --max-replies (markers + the warm-up SYN per train)"][0] == "2.59"
    # replay: all 32 usable trains (12 x 50 + 20 x 70) / 32 = 62.5 against 60; the first 12: 50
    assert rows["0"] == ["60.00", "62.50 (32)", "+4.2 %", "50.00", "-16.7 %"]
    assert "all trains 4.2 %, first 12 16.7 %" in md


@pytest.mark.noroot
def test_spread_history_sets_the_error_beside_the_standard_error(tmp_path):
    """scripts/availbw_spread_history.py over a git repository of two committed
    runs whose numbers are known."""
    repo = tmp_path / "repo"
    runs = repo / "results" / "paths_runs"
    runs.mkdir(parents=True)

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})

    def crossing(est, se, n):
        # n response trains over the 2 s from at_s 4.0 to the phase's end at 6.0
        return {"availbw_bps": est, "availbw_basis": "response_curve", "crossing_bps": est,
                "crossing_se_bps": se, "response_points": n, "availbw_elapsed_s": 6.0,
                "rates": [{"phase": "search", "at_s": 1.0, "trains": [_train(100, 1500)]},
                          {"phase": "response", "at_s": 4.0,
                           "trains": [_train(100, 1500, verdict="above")] * n}]}

    git("init", "-q")
    # Path 0: +20% with a standard error of 20% of the truth; path 1: our
    # interface's counters, +5%.
    docs = [crossing(12e6, 2e6, 16),
            {"availbw_bps": 21e6, "availbw_basis": "own_interface_counters"}]
    for i, doc in enumerate(docs):
        (runs / f"path{i:03d}.json").write_text(json.dumps(
            {"path": {"index": i}, "truth": {"availbw_bps": [10e6, 20e6][i]}, "doc": doc}))
    git("add", "-A")
    git("commit", "-qm", "first run")
    # The second run: path 0 within 10% (+2%, standard error 1% of the truth).
    (runs / "path000.json").write_text(json.dumps(
        {"path": {"index": 0}, "truth": {"availbw_bps": 10e6}, "doc": crossing(10.2e6, 0.1e6, 20)}))
    git("commit", "-qam", "second run")
    out = tmp_path / "spread.md"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "availbw_spread_history.py"),
                        "--repo", str(repo), "--runs", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    md = out.read_text()
    assert md == p.stdout
    assert "4 runs with an avail-bw estimate; 1 of them (25%) over 10% off" in md
    assert "| response_curve | 2 | 1 |" in md and "| own_interface_counters | 2 | 0 |" in md
    # The +20% run: within 2 SE (z = 1); trains for SE = 5% of 12 Mbit/s:
    # 16 x (2 / 0.6)^2 = 177.8; at 2 s / 16 trains, 22.2 s, 20.2 more.
    assert "the truth within two of the crossing's standard errors in 2 (100%)" in md
    assert "| error over 10% | 1 | 20.0% | 20.0% | 1.00 | 16 | 178 | 20.2 |" in md
    # The +2% run: 20 x (0.1 / 0.51)^2 = 0.77 trains, nothing more.
    assert "| error within 10% | 1 | 1.0% | 1.0% | 2.00 | 20 | 1 | 0.0 |" in md
    assert "Of the 1 crossings over 10% off, 1 had a standard error over 5%" in md
    assert "| 0 | 1 | +20 | 20 | 16 | 178 |" in md
