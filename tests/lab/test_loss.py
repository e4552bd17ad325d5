"""Random loss on the path (a lossy wire: radio, a bad cable, a congested
switch port): nftables drops a random share of every packet that crossed a
link (scripts/lablib: Lab.set_random_loss), probes, load, replies and cross
traffic alike.

Loss before the narrow link takes load packets before they are spread and
marker replies at random; loss after it, on the way out and back, takes
markers and replies. Neither is a token bucket or a reply limit: the tool
must measure through it, claim no shaper and no reply-burst limit, and keep
the truth in its intervals.

Truth: the narrow link's IP-layer capacity; no cross traffic, so the
avail-bw is the capacity. The tool runs pinned to CPU 0.
"""
import json
import os
import secrets

import pytest

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS

TOOL = ["taskset", "-c", "0"] if (os.cpu_count() or 1) >= 2 else []


def codes(doc):
    return {w["code"] for w in doc["warnings"]}


def measure(L):
    p = L.run_in_prober([*TOOL, BIN, "measure", L.target_ip, "--json", "--no-hops"],
                        timeout=120)
    return p.returncode, json.loads(p.stdout)


# (link, forward loss, return loss) on prober - r1 -(50 Mbit/s)- target.
CASES = {
    # 3% of what leaves the prober, before the narrow link: load included.
    "before_narrow_3pct": (1, 0.03, 0.0),
    # 1% each way on the narrow link itself, after its shaper.
    "narrow_both_ways_1pct": (2, 0.01, 0.01),
}


@pytest.mark.parametrize("case", list(CASES))
def test_random_loss_is_neither_a_shaper_nor_a_reply_limit(case):
    link, fwd, rev = CASES[case]
    with lab.Lab(lab.Spec(links=[None, "50M"]), name="loss" + secrets.token_hex(3)) as L:
        L.set_random_loss(link, fwd, "fwd")
        L.set_random_loss(link, rev, "rev")
        truth = L.ground_truth_capacity(ip_len=1500)
        # Two runs: a lossy wire may take the tails of two trains in a row
        # now and then (3% loss: about 1 run in 15 calls the shaper probe for
        # "replies_lost"), not in two runs of two. Before the early losses
        # were counted against it, nearly every run did (1.3 and 5.1 MB of
        # shaper streams, 16 s where 9 s do).
        runs = [measure(L) for _ in range(2)]
        triggers = [(d.get("shaper_check") or {}).get("trigger") for _, d in runs]
        assert triggers.count("replies_lost") < 2, triggers
        assert all(code == 0 for code, _ in runs), [d.get("error") for _, d in runs]
        code, doc = runs[triggers.index("replies_lost") ^ 1 if "replies_lost" in triggers else 0]
        # The loss was there: nftables dropped packets in each lossy direction.
        assert L.random_loss_drops(link, "fwd") > 0
        if rev:
            assert L.random_loss_drops(link, "rev") > 0
        assert code == 0, doc
        # No token bucket or policer claimed for random loss (in the run
        # that did not call the probe, if one did), nor a limit on the
        # target's reply bursts.
        assert doc["shaper"] is None and doc["policer"] is None, doc["warnings"]
        assert not codes(doc) & {"token_bucket", "policer", "reply_burst_limited"}, doc["warnings"]
        cap = doc["capacity_bps"]
        assert abs(cap / truth - 1) <= 0.03, (cap, truth)
        assert doc["capacity_low_bps"] <= truth * 1.01 and doc["capacity_high_bps"] >= truth * 0.99, \
            (doc["capacity_low_bps"], doc["capacity_high_bps"], truth)
        # An idle path: the avail-bw is the capacity, and its range reaches
        # it (the range stops at the capacity estimate, within 3% above).
        a = doc["availbw_bps"]
        assert abs(a / truth - 1) <= 0.10, (a, truth)
        assert doc["availbw_high_bps"] >= min(truth, cap) * 0.99, \
            (doc["availbw_high_bps"], cap, truth)
