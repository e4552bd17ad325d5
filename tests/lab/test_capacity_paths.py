"""Capacity on paths of other shapes (issue 11, part 4): cross traffic on the
narrow link (constant rate at 80 %, Poisson mixed sizes), cross traffic on
every link of a 4-hop path, a small queue, and the prober's own interface as
the narrow link with cross traffic through the same qdisc.

Ground truth: the narrow link's configured rate at the IP layer (tbf and htb
count the 14-byte Ethernet header: R x 1500/1514). The capacity does not
depend on the cross traffic, so no counter is needed for it.

linkwidth runs pinned to CPU 0 and the cross-traffic generators to CPU 1 (on
this small VM they otherwise compete for one core and the cross traffic
stalls while we send, which is not how real cross traffic behaves).

Bounds (busy 2-core machine): the median of 5 runs within 3 % of the truth
(the 4-hop class, a loaded link after the narrow one, is an expected failure:
issue 11), and, as an expected failure still, each run within 5 % or its
95 % interval holding the truth.

Also a script: ``python3 tests/lab/test_capacity_paths.py [--runs N] [class ...]``
prints per-class errors and interval coverage (used for the README numbers).
"""
import json
import os
import statistics
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from labtest import BIN, LAB_MARKS, lab  # noqa: E402,F401

pytestmark = LAB_MARKS

PIN = (os.cpu_count() or 1) >= 2
CROSS_CPU = 1 if PIN else None


def _cbr80(L):
    return [L.cross(2, "udp", rate=80e6, cpu=CROSS_CPU)]


def _poisson40(L):
    return [L.cross(2, "bursty", rate=20e6, cpu=CROSS_CPU)]


def _every_link(L):
    return [L.cross(1, "udp", rate=50e6, cpu=CROSS_CPU),
            L.cross(2, "bursty", rate=40e6, cpu=CROSS_CPU),
            L.cross(3, "bursty", rate=24e6, cpu=CROSS_CPU),
            L.cross(4, "udp", rate=30e6, cpu=CROSS_CPU)]


def _small_queue(L):
    return [L.cross(2, "bursty", rate=2e6, cpu=CROSS_CPU)]


def _local_htb(L):
    return [L.cross(1, "udp", rate=12.5e6, cpu=CROSS_CPU)]


def _upstream_cbr(L):
    return [L.cross(1, "udp", rate=1.4e6, cpu=CROSS_CPU), L.cross(2, "udp", rate=3.6e6, cpu=CROSS_CPU)]


def _after_narrow_udp(L):
    return [L.cross(3, "udp", rate=90e6, cpu=CROSS_CPU)]


def _local_cbr2(L):
    return [L.cross(1, "udp", rate=2e6, cpu=CROSS_CPU)]


# name -> (links, cross-traffic starter)
CLASSES = {
    # constant rate at 80 % of a remote 100 Mbit/s narrow link
    "cbr80_remote": ([lab.Link(rate=None), lab.Link(rate=100e6)], _cbr80),
    # Poisson departures, mixed sizes (1500/576/64), 40 % of a 50 Mbit/s link
    "poisson40_remote": ([lab.Link(rate=None), lab.Link(rate=50e6)], _poisson40),
    # four hops, cross traffic on every one, narrow link = link 3 (80 Mbit/s, 30 %)
    "every_link_4hop": ([lab.Link(rate=200e6), lab.Link(rate=150e6), lab.Link(rate=80e6),
                         lab.Link(rate=120e6)], _every_link),
    # the narrow link (12.65 Mbit/s, 28 % constant rate) right behind a link
    # barely faster (14.6): whatever we send reaches it at about 14.6, so every
    # train reads C x 14.6/(14.6 + 3.6), -20 % (random-path benchmark, path 30)
    "upstream_limited_cbr": ([lab.Link(rate=14.6e6, shaper="htb"), lab.Link(rate=12.65e6)],
                             _upstream_cbr),
    # 15 KB queue on a 20 Mbit/s link, light (10 %) bursty cross traffic
    "small_queue_20m": ([lab.Link(rate=None), lab.Link(rate=20e6, limit=15000)], _small_queue),
    # the cbr80 path probed by a slow sender: trains offered at 300 Mbit/s at most
    # (--max-rate 300M), as a busy host or a loaded CI VM sends them
    "cbr80_slow_sender": ([lab.Link(rate=None), lab.Link(rate=100e6)], _cbr80),
    # our own interface is the narrow link: htb 50 Mbit/s, 25 % from a cross
    # host on link 1 (through the same qdisc)
    "local_htb25": ([lab.Link(rate=50e6, shaper="htb"), lab.Link(rate=None)], _local_htb),
    # our own interface is the narrow link with a queue of under 8 full frames
    # (tbf 6 Mbit/s, 11.6 KB: a container's egress limit), 2 Mbit/s through it
    # from a cross host: 16-packet trains lose load in our own qdisc
    "local_small_queue_6m": ([lab.Link(rate=6e6, limit=11646), lab.Link(rate=None)], _local_cbr2),
}


# extra capacity options per class
EXTRA_ARGS = {"cbr80_slow_sender": ["--max-rate", "300M"]}


def run_class(name, runs=5):
    """[(exit code, document, truth)] for `runs` capacity runs on class `name`."""
    links, start = CLASSES[name]
    out = []
    with lab.Lab(lab.Spec(links=links)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        gens = start(L)
        try:
            time.sleep(0.5)
            for _ in range(runs):
                cmd = (["taskset", "-c", "0"] if PIN else []) + [BIN, "capacity", L.target_ip,
                                                                 "--json"] + EXTRA_ARGS.get(name, [])
                p = L.run_in_prober(cmd, timeout=90)
                out.append((p.returncode, json.loads(p.stdout), truth))
        finally:
            for g in gens:
                g.stop()
    return out


def _after_narrow_runs(command, runs=2, rates=(50e6, 120e6), cross=_after_narrow_udp, args=(),
                      shaper=None):
    """`command` run `runs` times on a narrow link, then a faster one carrying
    `cross` (default: 50 Mbit/s, then 120 carrying 90 of UDP):
    (truth, documents). `shaper`: {index in `rates`: (kind, queue bytes)}."""
    shaper = shaper or {}
    links = [lab.Link(rate=r, shaper=shaper[i][0], limit=shaper[i][1]) if i in shaper
             else lab.Link(rate=r) for i, r in enumerate(rates)]
    with lab.Lab(lab.Spec(links=[lab.Link(rate=None)] + links)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        gens = cross(L)
        docs = []
        try:
            time.sleep(0.5)
            for _ in range(runs):
                cmd = (["taskset", "-c", "0"] if PIN else []) + [BIN, command, L.target_ip,
                                                                 "--json", *args]
                p = L.run_in_prober(cmd, timeout=120)
                assert p.returncode == 0, p.stderr
                docs.append(json.loads(p.stdout))
        finally:
            for g in gens:
                g.stop()
    return truth, docs


def test_a_loaded_link_after_the_narrow_one_is_not_read_as_the_capacity():
    """50 Mbit/s narrow link, then 120 Mbit/s carrying 90 of UDP (the tight
    link, behind the narrow one): it queues our packets and sends them on back
    to back, so the reply gaps' mode is 120. The trains read 38-44 (issue 11);
    the gap check must not replace them with 120."""
    truth, docs = _after_narrow_runs("capacity")
    for doc in docs:
        gc = doc.get("gap_check") or {}
        assert doc["capacity_bps"] < 1.05 * truth, (truth, doc["capacity_bps"], gc)
        assert doc["capacity_source"] == "rst_trains", gc
        if gc.get("verdict") in ("trains_too_slow", "squeezed_after_narrow"):
            # Refused, the gaps (120) still bound the narrow link
            # from above: the interval reaches them and holds it.
            codes = [w["code"] for w in doc["warnings"]]
            assert "gaps_above_trains" in codes, codes
            assert doc["capacity_low_bps"] <= truth <= doc["capacity_high_bps"], (
                truth, doc["capacity_low_bps"], doc["capacity_high_bps"], gc)


def test_measure_reads_the_narrow_link_at_its_hop_before_a_loaded_one():
    """The same path through `measure`: its hops phase's trains leave hop 2
    (the narrow 50 Mbit/s link's end) before they meet the loaded 120 Mbit/s
    link, so their rate there is the capacity (capacity_source
    hop_dispersion, README "Known problem: a loaded link after the narrow
    one"), and hop 2 is the bottleneck. The trains alone read 38-44."""
    truth, docs = _after_narrow_runs("measure")
    read = []
    for doc in docs:
        gc = doc.get("gap_check") or {}
        why = (truth, doc["capacity_bps"], doc["capacity_source"], gc,
               [(h["ttl"], h["rate_bps"], h["choke_fraction"]) for h in doc["hops"]])
        assert doc["capacity_low_bps"] <= truth <= doc["capacity_high_bps"], why
        if doc["capacity_source"] == "hop_dispersion":
            codes = [w["code"] for w in doc["warnings"]]
            assert "capacity_from_hop" in codes, codes
            assert abs(doc["capacity_bps"] / truth - 1) <= 0.05, why
            assert doc["bottleneck_hop"] == 2, why
        read.append(why)
    # In one run of two at least (the gap check may also find the gaps
    # agreeing, as in the capacity test above).
    assert any(r[2] == "hop_dispersion" and abs(r[1] / truth - 1) <= 0.03 for r in read), read


def _slow_after_narrow_poisson(L):
    return [L.cross(3, "poisson", rate=5e6, cpu=CROSS_CPU)]


def test_measure_reads_a_slow_narrow_link_at_its_hop_before_a_loaded_one():
    """The same on a slow path, 6.5 Mbit/s and then 8 carrying 5 of Poisson,
    under the random-path benchmark's --max-time 20 (its paths 39 and 52:
    trains 22-31% low). The capacity phase runs to its time cap there (a
    train every 0.3 s under --max-load) and left the reply-gap check 2-3
    trains, under the 4 it waited for: no gap estimate (here in 1 run of 3
    before the fix, the capacity -37% with an interval that missed), so
    nothing bounded the trains from above and the hop rule never applied.
    The gaps are now estimated from the trains sent; the estimator's own
    minimum of samples decides."""
    truth, docs = _after_narrow_runs("measure", runs=2, rates=(6.5e6, 8e6),
                                     cross=_slow_after_narrow_poisson, args=("--max-time", "20"))
    read, two_unclean = [], []
    for doc in docs:
        gc = doc.get("gap_check") or {}
        why = (truth, doc["capacity_bps"], doc["capacity_source"], gc,
               [(h["ttl"], h["rate_bps"], h["choke_fraction"]) for h in doc["hops"]])
        # Two trains give 30 single gaps, over the estimator's 20; three or
        # more must give an estimate. Known defect (README, "The reply-gap
        # check"): two trains' gaps, spread by the Poisson load after the
        # narrow link, can have no clean mode (fresh-clone CI of 04a22a1:
        # 2 sent, none used, the capacity 3.64 for 6.44).
        if gc.get("trains_sent", 0) == 2 and gc.get("trains_used", 0) == 0:
            two_unclean.append(why)
        else:
            assert gc.get("trains_sent", 0) < 2 or gc.get("trains_used", 0) > 0, why
        if doc["capacity_source"] == "hop_dispersion":
            assert doc["capacity_low_bps"] <= truth <= doc["capacity_high_bps"], why
            assert doc["bottleneck_hop"] == 2, why
        read.append(why)
    if two_unclean and not any(r[2] == "hop_dispersion" for r in read):
        pytest.xfail(f"known defect: two gap trains without a clean mode in every run: {read}")
    assert any(r[2] == "hop_dispersion" and abs(r[1] / truth - 1) <= 0.03 for r in read), read


def test_measure_reads_a_link_behind_a_queue_of_a_few_packets():
    """5.2 Mbit/s (htb) with a 10.4 KB queue, about 7 full frames, between a
    300 Mbit/s link and a 50 Mbit/s one, no cross traffic, `measure
    --no-hops --max-time 20` as the random-path benchmark runs it. Trains of
    8 and 16 load packets both overflow the queue and come back with its
    drain time: the short ones read +14% in 3 of 3 runs before the trains
    were halved for it, with intervals that missed, and the reply-gap check
    had no time left for an estimate. Halved until two lengths agree (4 and
    8, or 2 and 4), the trains read the link."""
    truth, docs = _after_narrow_runs("measure", runs=2, rates=(300e6, 5.2e6, 50e6),
                                     cross=lambda L: [], args=("--no-hops", "--max-time", "20"),
                                     shaper={1: ("htb", 10400)})
    for doc in docs:
        codes = [w["code"] for w in doc["warnings"]]
        why = (truth, doc["capacity_bps"], doc["capacity_low_bps"], doc["capacity_high_bps"],
               doc.get("availbw_bps"), codes, [(t["load_packets"], round(t["capacity_bps"] / 1e6, 3))
                                               for t in doc["capacity_trains"]])
        assert abs(doc["capacity_bps"] / truth - 1) <= 0.03, why
        assert "trains_shortened" in codes, why
        # No cross traffic: the avail-bw is the capacity.
        assert abs(doc["availbw_bps"] / truth - 1) <= 0.10, why


def summarise(results):
    errs = [doc["capacity_bps"] / truth - 1 for code, doc, truth in results
            if code == 0 and doc.get("capacity_bps")]
    held = sum(1 for code, doc, truth in results if code == 0 and doc.get("capacity_bps") and
               doc["capacity_low_bps"] <= truth <= doc["capacity_high_bps"])
    return errs, held


# What the current estimator does not meet yet (issue 11 stays open for it):
# measured on this VM, 3 runs per class (README, "Cross traffic and the
# capacity"): the 4-hop path reads -14% to -18% (trains reach the narrow link
# spread by the loaded links before it, so more cross traffic queues between
# their packets), and the 95% interval, a bootstrap of the quartile that
# ignores that bias, missed the truth in 8 of 12 runs of the other classes.
KNOWN_LOW = {"every_link_4hop"}


def _detail(results):
    return [(round(doc["capacity_bps"] / 1e6, 2), round(doc["capacity_low_bps"] / 1e6, 2),
             round(doc["capacity_high_bps"] / 1e6, 2), round(doc["elapsed_s"], 2))
            for _, doc, _ in results]


_RESULTS = {}


def _results(name):
    """5 runs per class, shared by the two tests of a class (one lab each).

    Five, not three: at 80% constant-rate load about one run in seven reads
    3-7% low (2 of 14 cbr80_remote runs on this VM on 2026-11-23, before and
    after the two-rate fit), so a median of 3 fails about one CI run in
    twenty while a median of 5 fails about one in fifty."""
    if name not in _RESULTS:
        _RESULTS[name] = run_class(name)
    return _RESULTS[name]


# The small-queue path used to probe at 22-28% of C (8 x probe_bytes /
# elapsed): long trains lose load in its 15 KB queue and read twice the link,
# and idle was budgeted at min(estimate, 2 x best per-train rate). Fixed by the
# --max-load rule (README, Safety; tests/lab/test_load_cap.py): it now probes
# at about 5% of C (the budget halves when long trains read faster than short
# ones), so its 40 trains take about 7.7 s, under the 20 s every class gets.


# The slow sender (--max-rate 300M) and 80% constant-rate load: every train
# met cross traffic and read low (the two-rate extrapolation scattered by
# -8%/+13%; the median of 5 fell 3-5% low in half the CIs). The reply-gap
# check (README, "Cross traffic and the capacity") replaces such an estimate
# with the mode of the gaps between replies to back-to-back full-size SYNs,
# most of which met no cross packet: 3 runs of each read within 0.6%.


def _param(n):
    if n in KNOWN_LOW:
        return pytest.param(n, marks=pytest.mark.xfail(reason="issue 11: reads 14-18% low",
                                                       strict=False))
    return n


@pytest.mark.parametrize("name", [_param(n) for n in CLASSES])
def test_capacity_median_within_3_percent(name):
    results = _results(name)
    for code, doc, truth in results:
        assert code == 0, doc
        assert doc["capacity_low_bps"] <= doc["capacity_bps"] <= doc["capacity_high_bps"], doc
        assert not doc.get("capacity_is_lower_bound"), doc
        # No token bucket on these paths: none reported (issue 13).
        assert doc["shaper"] is None, (doc["shaper"], doc["shaper_check"])
        # The phase stays short and non-intrusive.
        assert doc["elapsed_s"] < 20, doc["elapsed_s"]
        # The shaper probe, when cross traffic triggers it, has its own caps
        # and is left out of the --max-load average (README, Safety).
        sc = doc.get("shaper_check") or {}
        rate = 8 * (doc["probe_bytes"] - sc.get("stream_bytes", 0)) / \
            (doc["elapsed_s"] - sc.get("elapsed_s", 0.0))
        assert rate < 0.15 * truth, (doc["probe_bytes"], doc["elapsed_s"], sc)
    errs, _ = summarise(results)
    truth = results[0][2]
    assert len(errs) == len(results)
    assert abs(statistics.median(errs)) <= 0.03, f"truth {truth / 1e6:.2f}: {_detail(results)}"


@pytest.mark.xfail(reason="issue 11: single runs still read 5-18% off now and then (the 4-hop "
                          "class always: a loaded link after the narrow one, whose reply gaps "
                          "are too mixed to replace the trains)", strict=False)
@pytest.mark.parametrize("name", list(CLASSES))
def test_capacity_each_run_within_5_percent_or_interval_holds_truth(name):
    results = _results(name)
    for code, doc, truth in results:
        assert code == 0, doc
        ok = abs(doc["capacity_bps"] / truth - 1) <= 0.05 or \
            doc["capacity_low_bps"] <= truth <= doc["capacity_high_bps"]
        assert ok, f"truth {truth / 1e6:.2f}: {_detail(results)}"


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("classes", nargs="*", default=list(CLASSES))
    a = ap.parse_args()
    for name in a.classes:
        res = run_class(name, a.runs)
        errs, held = summarise(res)
        truth = res[0][2]
        per = " ".join(f"{doc.get('capacity_bps', 0) / 1e6:.2f}[{doc.get('capacity_low_bps', 0) / 1e6:.2f},"
                       f"{doc.get('capacity_high_bps', 0) / 1e6:.2f}]/{doc.get('elapsed_s', 0):.1f}s"
                       for _, doc, _ in res)
        med = statistics.median([abs(e) for e in errs]) if errs else float("nan")
        print(f"{name}: truth {truth / 1e6:.2f}  median |err| {100 * med:.2f}%  "
              f"errors {[round(100 * e, 2) for e in errs]}  held {held}/{len(res)}  {per}",
              flush=True)
