"""scripts/compare.py (issue 5): one small scenario of the paper's Table 2
(10 Mbit/s bottleneck, 2 Mbit/s of UDP cross traffic) with --quick, into a
temporary directory: the CSV, its truth column, the estimates and the plots.
Accuracy itself is tested in test_availbw.py; the bounds here are loose."""
import csv
import json
import os
import subprocess
import sys

import pytest

from labtest import BIN, LAB_MARKS, ROOT, lab  # noqa: F401

COMPARE = os.path.join(ROOT, "scripts", "compare.py")
PLOT = os.path.join(ROOT, "scripts", "plot_measure.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import compare_report  # noqa: E402

# Columns a reader of comparison.csv relies on (README / results/README.md).
COLUMNS = ["scenario", "table", "run", "capacity_truth_bps", "bottleneck_hop_truth",
           "cross_kind", "cross_configured_bps",
           "fleet_cross_bps", "fleet_avail_truth_bps", "fleet_availbw_bps", "fleet_low_bps",
           "fleet_high_bps", "fleet_error_pct", "fleet_capacity_bps", "fleet_bottleneck_hop",
           "fleet_elapsed_s", "fleet_probe_bytes", "fleet_json",
           "linkwidth_cross_bps", "linkwidth_avail_truth_bps", "linkwidth_availbw_bps",
           "linkwidth_error_pct", "linkwidth_capacity_bps", "linkwidth_json",
           "iperf3_cross_bps", "iperf3_avail_truth_bps", "iperf3_bps", "iperf3_bytes"]


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def lab_test(f):
    """LAB_MARKS on one test (this module also has tests that need no root)."""
    for m in LAB_MARKS:
        f = m(f)
    return f


@lab_test
def test_compare_quick_table2_scenario(tmp_path):
    p = subprocess.run([sys.executable, COMPARE, "--scenario", "t2-udp2", "--quick",
                        "--bin", BIN, "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    with open(tmp_path / "comparison.csv", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in reader.fieldnames]
        rows = list(reader)
    assert not missing, f"CSV lacks columns {missing}"
    assert len(rows) == 1 and rows[0]["scenario"] == "t2-udp2" and rows[0]["run"] == "0"
    r = rows[0]
    C = float(r["capacity_truth_bps"])
    assert C == pytest.approx(10e6 * 1500 / 1514, rel=1e-9)
    assert int(r["bottleneck_hop_truth"]) == 2
    # The truth is measured, not configured: close to 2 Mbit/s of cross
    # traffic, and exactly capacity minus what the counters saw.
    for tool in ("fleet", "linkwidth", "iperf3"):
        cross = float(r[f"{tool}_cross_bps"])
        truth = float(r[f"{tool}_avail_truth_bps"])
        assert 1.6e6 < cross < 2.3e6, (tool, cross)
        assert truth == pytest.approx(C - cross, rel=1e-9)
        assert truth == pytest.approx(10e6 * 1500 / 1514 - 2e6, abs=0.4e6)
    truth = float(r["fleet_avail_truth_bps"])
    fleet = float(r["fleet_availbw_bps"])
    assert abs(fleet / truth - 1) < 0.5, (fleet, truth)
    assert float(r["fleet_low_bps"]) <= fleet <= float(r["fleet_high_bps"])
    assert float(r["fleet_error_pct"]) == pytest.approx(100 * (fleet / truth - 1), rel=1e-6)
    # The paper's algorithm as published has a timing bias (README): only a
    # number between 0 and the capacity is asked of it here.
    assert 0 < float(r["linkwidth_availbw_bps"]) < 1.1 * C
    for tool in ("fleet", "linkwidth"):
        assert abs(float(r[f"{tool}_capacity_bps"]) / C - 1) < 0.5
        with open(tmp_path / r[f"{tool}_json"]) as f:
            doc = json.load(f)
        assert doc["method"] == tool and doc["availbw_bps"] == float(r[f"{tool}_availbw_bps"])
    assert abs(float(r["iperf3_bps"]) / float(r["iperf3_avail_truth_bps"]) - 1) < 0.5
    assert float(r["iperf3_bytes"]) > 0
    md = (tmp_path / "comparison.md").read_text()
    assert "| t2-udp2 |" in md and "9.3/7.4" in md      # our row beside the paper's numbers
    for png in ("table2.png", "measure-t2-udp2-r0-fleet.png", "measure-t2-udp2-r0-linkwidth.png"):
        assert is_png(tmp_path / png), png
        assert f"({png})" in md


@pytest.mark.noroot
def test_paper_cells_are_read_as_printed():
    assert compare_report.paper_avail("88/87 (2.4); 90/78 (2.6 HRT)") == [87.0, 78.0]
    assert compare_report.paper_avail("2.8/0.368") == [0.368]
    assert compare_report.paper_range("5-38") == (5.0, 38.0)
    assert compare_report.paper_range("0.991") == (0.991, 0.991)
    assert compare_report.paper_range("8.5.1") is None


@pytest.mark.noroot
def test_plot_measure_refuses_a_document_without_rates(tmp_path):
    doc = tmp_path / "cap.json"
    doc.write_text(json.dumps({"type": "capacity", "capacity_bps": 1e7}))
    p = subprocess.run([sys.executable, PLOT, str(doc), "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "no rates" in p.stderr
    assert not (tmp_path / "x.png").exists()
