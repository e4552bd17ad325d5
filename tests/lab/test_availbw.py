"""Lab tests for `linkwidth measure` / `availbw` (issue 3).

Ground truth: the IP-layer capacity of the shaped link (tbf counts the
14-byte Ethernet header) minus the cross traffic measured on that link's
counters during each run, not what the generator was asked for.
"""
import json
import os
import statistics
import sys
import time

import pytest

from labtest import BIN, LAB_MARKS, ROOT, lab  # noqa: E402,F401

pytestmark = LAB_MARKS


# On this small VM the cross-traffic generator and the prober share two CPUs:
# unpinned, the generator stalls while the prober sends, so less cross traffic
# crosses the link during our trains than on average and the truth (the
# average) is off. Real cross traffic does not run on the prober's CPU: pin
# them apart, as scripts/bench_availbw.py does.
PIN = (os.cpu_count() or 1) >= 2
CROSS_CPU = 1 if PIN else None


def measure(L, link, *args, timeout=120):
    """One run under way cross traffic: (exit code, document, truth, seconds)."""
    w = L.cross_window(link)
    t0 = time.monotonic()
    cmd = [BIN, "measure", L.target_ip, "--json", *args]
    p = L.run_in_prober((["taskset", "-c", "0"] if PIN else []) + cmd, timeout=timeout)
    elapsed = time.monotonic() - t0
    cross = w.stop().bps
    truth = L.ground_truth_capacity(ip_len=1500) - cross
    return p.returncode, json.loads(p.stdout), truth, elapsed


def runs_under_cbr(rate, cross, method, runs=3):
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=rate)])
    out = []
    with lab.Lab(spec) as L:
        x = L.cross(2, "udp", rate=cross, cpu=CROSS_CPU)
        try:
            time.sleep(0.5)
            for _ in range(runs):
                out.append(measure(L, 2, "--method", method))
        finally:
            x.stop()
    return out


CBR_CASES = [(100e6, 40e6), (50e6, 20e6), (10e6, 5e6)]


@pytest.mark.parametrize("rate,cross", CBR_CASES)
def test_default_method_within_10_percent_and_range_holds_truth(rate, cross):
    results = runs_under_cbr(rate, cross, "fleet")
    errors, held = [], 0
    for code, doc, truth, _ in results:
        assert code == 0, doc
        assert doc["type"] == "measure" and doc["method"] == "fleet"
        for key in ("availbw_bps", "availbw_low_bps", "availbw_high_bps", "method",
                    "tight_link_capacity_bps", "stop_reason", "rates", "probe_bytes",
                    "average_probe_rate_bps", "capacity_bps", "narrow_link_capacity_bps"):
            assert key in doc, key
        a, lo, hi = doc["availbw_bps"], doc["availbw_low_bps"], doc["availbw_high_bps"]
        assert lo <= a <= hi, doc
        assert doc["stop_reason"] in ("resolution", "max_fleets", "max_time"), doc["stop_reason"]
        errors.append(a / truth - 1)
        held += lo <= truth <= hi
        # Every tested rate is recorded with its trains and verdicts.
        assert doc["rates"][0]["phase"] == "calibration"
        allowed = {"calibration": ("calibration",), "search": ("above", "below", "grey"),
                   "response": ("above", "below")}
        for r in doc["rates"]:
            assert r["verdict"] in allowed[r["phase"]], r
            assert r["trains"], r
            if r["phase"] == "calibration":
                continue
            for t in r["trains"]:
                assert t["verdict"] in ("above", "below", "unclear", "lost", "unusable",
                                        "send_stall"), t
    summary = [f"{e:+.1%}" for e in errors]
    # Back at 10% (issue 11): the -1.9/-14.8/-12.3% the fresh-clone CI read on
    # 100M/40M came from the crossing switching to a response slope flattened
    # by knee fleets (see README, "Which capacity").
    assert abs(statistics.median(errors)) <= 0.10, summary
    assert held >= 2, f"range held the truth in {held} of 3 runs; errors {summary}"
    # `measure` also names the bottleneck hop: the shaped link 2 (into the target).
    named = [doc.get("bottleneck_hop") for _, doc, _, _ in results]
    assert all("hops" in doc for _, doc, _, _ in results)
    assert named.count(2) >= 2, named


def test_default_method_is_non_intrusive():
    """Average probing rate of the avail-bw phase stays under 10% (--max-load)
    of the path's capacity, far below the avail-bw (30 of 49.5 Mbit/s)."""
    results = runs_under_cbr(50e6, 20e6, "fleet", runs=1)
    code, doc, _, _ = results[0]
    assert code == 0, doc
    cap_truth = 50e6 * 1500 / 1514  # tbf counts the 14-byte Ethernet header
    avail_s = doc["availbw_elapsed_s"]
    avail_bps = 8 * doc["availbw_probe_bytes"] / avail_s
    assert avail_bps <= 0.11 * cap_truth, (avail_bps, cap_truth)
    assert doc["average_probe_rate_bps"] <= 0.11 * cap_truth


def test_linkwidth_method_within_20_percent_somewhere():
    """The paper's algorithm as published, our reference point: within +-20%
    of the truth on at least one of the CBR cases (median of 3 runs)."""
    medians = []
    for rate, cross in CBR_CASES:
        results = runs_under_cbr(rate, cross, "linkwidth")
        errs = []
        for code, doc, truth, _ in results:
            assert doc["method"] == "linkwidth"
            if doc["availbw_bps"] is not None:
                errs.append(doc["availbw_bps"] / truth - 1)
        if errs:
            medians.append(statistics.median(errs))
            if abs(medians[-1]) <= 0.20:
                return
    pytest.fail(f"linkwidth method never within 20%: {medians}")


def test_availbw_with_given_capacity_skips_the_capacity_phase():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=50e6)])
    with lab.Lab(spec) as L:
        C = L.ground_truth_capacity(ip_len=1500)
        p = L.run_in_prober([BIN, "availbw", L.target_ip, "--json", "--capacity",
                             str(int(C))], timeout=60)
        doc = json.loads(p.stdout)
        assert p.returncode == 0, doc
        assert doc["type"] == "availbw" and doc["capacity_source"] == "given"
        assert doc["capacity_trains"] == []
        # No cross traffic: the whole capacity is available.
        assert doc["availbw_bps"] >= 0.9 * C, doc["availbw_bps"]


def test_max_time_ends_the_search_with_a_reason():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=10e6)])
    with lab.Lab(spec) as L:
        t0 = time.monotonic()
        p = L.run_in_prober([BIN, "measure", L.target_ip, "--json", "--max-time", "3"],
                            timeout=60)
        elapsed = time.monotonic() - t0
        doc = json.loads(p.stdout)
        assert elapsed < 3 + 2.5, elapsed
        assert doc["stop_reason"] == "max_time", doc["stop_reason"]
