"""Lab tests for issue 6: a middlebox answering in the target's name, and a
stateful firewall that drops our RST load before the narrow link.

r1 is the middlebox (scripts/lablib: Lab.set_middlebox), placed before the
50 Mbit/s link: prober - r1 -(50M)- r2 - target.
"""
import json
import secrets

import pytest

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS

CHECK_CODES = ("middlebox_reply", "load_dropped", "replies_mixed")


def new_lab(links, **kw):
    return lab.Lab(lab.Spec(links=links, **kw), name="mbx" + secrets.token_hex(3))


def run(L, *args, timeout=60):
    p = L.run_in_prober([BIN, *args, "--json"], timeout=timeout)
    return p.returncode, json.loads(p.stdout)


def codes(doc):
    return [w["code"] for w in doc["warnings"]]


def test_router_answering_for_the_target_is_a_middlebox():
    with new_lab([None, "50M", None]) as L:
        L.set_middlebox(1, "reset")
        code, doc = run(L, "capacity", L.target_ip, "--max-time", "4")
        assert L.middlebox_hits(1) > 0  # the box, not the target, answered
        assert "middlebox_reply" in codes(doc), doc["warnings"]
        assert doc["replier_check"] == "middlebox"
        assert doc["replier_box"] == L.node_ip(1)
        assert doc["reply_ttl"] == 64 and doc["reply_hops"] == 1
        msg = [w["message"] for w in doc["warnings"] if w["code"] == "middlebox_reply"][0]
        assert L.node_ip(1) in msg and "hop 1" in msg
        # The box answers before the narrow link: whatever the trains say, it
        # is not the target's 50 Mbit/s path, and no load was dropped.
        assert "load_dropped" not in codes(doc)
        # The text output names it too.
        p = L.run_in_prober([BIN, "capacity", L.target_ip, "--max-time", "2"], timeout=30)
        assert "middlebox_reply" in p.stdout and "TTL check: middlebox" in p.stdout


def test_box_answering_some_syns_mixes_the_replies():
    # r1 resets every third SYN; the others reach the target. (A rate limit,
    # 40/s burst 5, made the mix depend on how fast the trains went: in the
    # fresh-clone CI at 8562a7a the box had a token for every marker, all
    # replies came from hop 1 and nothing was mixed.)
    with new_lab([None, "50M", None]) as L:
        L.set_middlebox(1, "reset", every=3)
        code, doc = run(L, "capacity", L.target_ip, "--max-time", "3")
        assert "replies_mixed" in codes(doc), doc["warnings"]
        msg = [w["message"] for w in doc["warnings"] if w["code"] == "replies_mixed"][0]
        assert "(3, 1 hops back)" in msg or "(1, 3 hops back)" in msg, msg


def test_stateful_firewall_before_the_bottleneck_drops_the_load():
    with new_lab([None, "50M", None]) as L:
        L.set_middlebox(1, "drop_rst")
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc = run(L, "capacity", L.target_ip, "--max-time", "5")
        assert L.middlebox_hits(1) > 0  # RSTs were dropped at r1
        assert code == 0, doc
        assert "load_dropped" in codes(doc), doc["warnings"]
        assert "capacity_at_send_rate" in codes(doc)
        assert "middlebox_reply" not in codes(doc)
        assert doc["replier_check"] == "consistent"
        lc = doc["load_check"]
        assert lc["load_dropped"] and lc["syn_trains_used"] >= 3
        # What the RST trains said is our own sending rate, far above the link;
        # the capacity is not reported as a normal, confident value.
        assert lc["rst_capacity_bps"] > 4 * truth
        assert doc["capacity_source"] == "syn_pairs"
        assert doc["capacity_confidence"] == "low"
        assert not doc["capacity_is_lower_bound"]
        # The fallback itself: full-size SYN trains see the 50 Mbit/s link.
        assert abs(doc["capacity_bps"] / truth - 1) <= 0.15, (doc["capacity_bps"], truth)
        # measure: no avail-bw search on a path whose load is dropped.
        code, doc = run(L, "measure", L.target_ip, "--max-time", "8")
        assert code == 1, doc
        assert doc["availbw_bps"] is None
        assert doc["stop_reason"] == "load_dropped"
        assert "availbw_not_run" in codes(doc) and "load_dropped" in codes(doc)


@pytest.mark.parametrize("links", [["50M"], [None, "50M", None],
                                   [None, "100M", None, "50M", None, None], [None, None]])
def test_normal_paths_raise_neither(links):
    # The unshaped path, paced at 300 Mbit/s, is surely faster than we send.
    extra = [] if any(links) else ["--max-rate", "300M"]
    with new_lab(links) as L:
        code, doc = run(L, "capacity", L.target_ip, "--max-time", "4", *extra)
        assert code == 0, doc
        assert not set(CHECK_CODES) & set(codes(doc)), doc["warnings"]
        assert doc["replier_check"] == "consistent"
        assert doc["reply_hops"] == len(links)
        # Not the SYN-pair fallback of a dropped load. (The reply-gap check
        # may replace the trains' number where the gaps are more precise:
        # the fresh-clone CI at 0006e99 on the 6-hop path; and where the
        # first link is our own shaped interface, a reading above its
        # shaper's rate becomes that rate: the fresh-clone CI at 5546d17,
        # gaps 49.72 Mbit/s over our 50 Mbit/s tbf's 49.54.)
        assert doc["capacity_source"] in ("rst_trains", "reply_gaps", "own_shaper"), \
            doc["gap_check"]
        if doc["capacity_source"] == "own_shaper":
            assert links[0] is not None, doc["warnings"]
            assert abs(doc["capacity_bps"] / L.ground_truth_capacity(ip_len=1500) - 1) < 0.002
        if any(links):
            assert doc["load_check"] is None and doc["capacity_confidence"] == "normal"
        else:
            # Unshaped: faster than we send. Flagged as such, verified, and
            # not mistaken for a dropped load.
            assert doc["capacity_is_lower_bound"]
            assert "capacity_at_send_rate" in codes(doc)
            assert doc["load_check"]["syn_trains_sent"] >= 1
            assert not doc["load_check"]["load_dropped"]
        if len(links) == 6:
            code, doc = run(L, "hops", L.target_ip)
            assert doc["replier_check"] == "consistent" and doc["reply_hops"] == 6
            assert not set(CHECK_CODES) & set(codes(doc)), doc["warnings"]
