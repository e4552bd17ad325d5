"""Token-bucket shapers (tbf with a large burst, optionally a peak rate): the
capacity is the sustained rate, the shaper record gives rate, peak and
bucket; ordinary paths report no shaper and send no shaper stream.

Truth: the sustained rate at the IP layer (ground_truth_capacity); the bucket
in IP bytes (tbf counts 14-byte Ethernet headers: burst x 1500/1514).
"""
import json
import time

import pytest

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS


def run_tool(L, *args, timeout=90):
    t0 = time.monotonic()
    p = L.run_in_prober([BIN, *args, "--json"], timeout=timeout)
    doc = json.loads(p.stdout)
    return p.returncode, doc, time.monotonic() - t0


def shaped(rate, burst, peakrate=None):
    return lab.Spec(links=[lab.Link(rate=None),
                           lab.Link(rate=rate, burst=burst, peakrate=peakrate)])


@pytest.mark.parametrize("rate,burst", [(10e6, 30_000), (20e6, 300_000), (20e6, 3_000_000),
                                        (100e6, 300_000)])
def test_token_bucket_found(rate, burst):
    with lab.Lab(shaped(rate, burst)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc, _ = run_tool(L, "capacity", L.target_ip)
        assert code == 0, doc
        sh = doc["shaper"]
        assert sh is not None, doc["warnings"]
        assert abs(doc["capacity_bps"] / truth - 1) <= 0.03, (doc["capacity_bps"], truth)
        assert abs(sh["rate_bps"] / truth - 1) <= 0.03
        bucket = burst * 1500 / 1514
        assert abs(sh["bucket_bytes"] / bucket - 1) <= 0.25, (sh["bucket_bytes"], bucket)
        assert sh["peak_bps"] > 3 * truth
        assert doc["peak_capacity_bps"] == sh["peak_bps"]
        assert doc["capacity_source"] == "shaper_stream"
        assert doc["shaper_check"]["verdict"] == "found"
        assert "token_bucket" in [w["code"] for w in doc["warnings"]]
        assert doc["probe_bytes"] <= 50e6


def test_token_bucket_with_peak_rate():
    # A bucket the capacity trains overrun (a larger one, drained at a peak
    # the trains never exceed on average, stays invisible: README, "Shapers").
    with lab.Lab(shaped(10e6, 15_000, peakrate=50e6)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc, _ = run_tool(L, "capacity", L.target_ip)
        assert code == 0, doc
        sh = doc["shaper"]
        assert sh is not None, doc["warnings"]
        assert abs(sh["rate_bps"] / truth - 1) <= 0.03
        assert abs(sh["bucket_bytes"] / (15_000 * 1500 / 1514) - 1) <= 0.25
        # The peak is the second bucket's rate (IP layer), not the line's.
        assert abs(sh["peak_bps"] / (50e6 * 1500 / 1514) - 1) <= 0.15, sh


def test_measure_on_a_token_bucket():
    with lab.Lab(shaped(20e6, 300_000)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc, _ = run_tool(L, "measure", L.target_ip, "--no-hops")
        assert doc["shaper"] is not None, doc.get("warnings")
        assert abs(doc["capacity_bps"] / truth - 1) <= 0.03
        # The avail-bw of an idle shaped link is its sustained rate.
        assert code == 0, doc
        assert doc["availbw_bps"] is not None
        assert doc["availbw_bps"] <= 1.1 * truth, doc["availbw_bps"]


@pytest.mark.parametrize("links", [[None, "10M"], [None, "50M"], [None, "100M", "1G"],
                                   [None, None]])
def test_ordinary_paths_have_no_shaper(links):
    spec = lab.Spec(links=[lab.Link(rate=r) for r in links])
    with lab.Lab(spec) as L:
        for _ in range(2):
            code, doc, _ = run_tool(L, "capacity", L.target_ip)
            assert code == 0, doc
            assert doc["shaper"] is None, doc["shaper"]
            # Nothing was sent for it: the paths without a shaper pay nothing.
            assert doc["shaper_check"] is None, doc["shaper_check"]
            assert doc["peak_capacity_bps"] is None
