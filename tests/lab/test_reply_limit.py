"""Lab tests for targets that limit their RST replies, and for duplicated
replies (issue 6).

FreeBSD and macOS cap the RSTs they send per second; firewalls do it with
token buckets. The lab target limits its RSTs with nftables (``limit rate
30/second burst 5``): linkwidth must notice, slow down, name it, and still
measure the path right. Ground truth: the shaped link's IP-layer rate (no
cross traffic here, so it is also the avail-bw).
"""
import json
import os
import subprocess
import tempfile

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS

RATE = 50e6
LIMIT = 30


def run(L, *args):
    p = L.run_in_prober([BIN, "measure", L.target_ip, "--json", *args], timeout=120)
    return p.returncode, json.loads(p.stdout)


def codes(doc):
    return {w["code"] for w in doc.get("warnings", [])}


def test_rst_rate_limit_is_found_backed_off_from_and_reported():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=RATE)])
    with lab.Lab(spec) as L:
        truth = L.ground_truth_capacity(ip_len=1500)

        # A host that answers everything: no reply warning, no check.
        code, doc = run(L)
        assert code == 0, doc
        assert not codes(doc) & {"reply_rate_limited", "reply_burst_limited", "reply_loss"}, doc

        L.set_target_rst_limit(LIMIT, burst=5)
        try:
            # Asked for fewer replies than the limit allows, at most 4 at once
            # (warm-up and 3 markers): nothing is lost, nothing to report.
            code, doc = run(L, "--max-replies", "20", "--search-markers", "3", "--no-hops")
            assert code == 0, doc
            assert L.rst_limit_drops() == 0
            assert doc["params"]["max_replies_per_s"] == 20
            assert not codes(doc) & {"reply_rate_limited", "reply_burst_limited"}, doc

            # The default asks 100/s and up to 7 replies per train: both the
            # rate and the burst are over the target's limit.
            with tempfile.TemporaryDirectory() as d:
                os.chmod(d, 0o777)
                cap = os.path.join(d, "limited.pcap")
                code, doc = run(L, "--save-pcap", cap)
                assert code == 0, doc
                # The run replays offline into the same document: the checks'
                # findings are in its records, the search reads the reply
                # bursts the live run used.
                a = subprocess.run([BIN, "analyze", cap, "--json"], capture_output=True,
                                   text=True, timeout=30)
                assert a.returncode == 0, a.stderr
                off = json.loads(a.stdout)
                assert off.pop("offline") == {"pcap": cap}
                assert off == doc
            assert L.rst_limit_drops() > 0  # the limit did act
            found = codes(doc)
            assert "reply_rate_limited" in found, doc["warnings"]
            assert "reply_burst_limited" in found, doc["warnings"]
            msg = next(w["message"] for w in doc["warnings"] if w["code"] == "reply_rate_limited")
            assert L.target_ip in msg
            # ... and the numbers are still right.
            assert abs(doc["capacity_bps"] / truth - 1) < 0.05, (doc["capacity_bps"], truth)
            assert abs(doc["availbw_bps"] / truth - 1) < 0.10, (doc["availbw_bps"], truth)
            assert doc["bottleneck_hop"] == 2
        finally:
            L.set_target_rst_limit(None)


def test_duplicated_replies_are_reported_and_do_not_spoil_the_numbers():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=RATE)])
    with lab.Lab(spec) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        L.set_duplicate_replies(1)  # r1 sends every TCP packet towards us twice
        code, doc = run(L, "--no-hops")
        assert code == 0, doc
        dup = [w for w in doc["warnings"] if w["code"] == "duplicate_replies"]
        assert dup, doc["warnings"]
        assert all(int(w["message"].split()[0]) > 0 for w in dup)
        assert abs(doc["capacity_bps"] / truth - 1) < 0.05, (doc["capacity_bps"], truth)
        assert abs(doc["availbw_bps"] / truth - 1) < 0.10, (doc["availbw_bps"], truth)
