"""--max-load holds whatever the path does to our packets.

The path: the small-queue class of test_capacity_paths (a 20 Mbit/s tbf link
with a 15 KB queue, 10% bursty cross traffic). Long capacity trains lose load
there and their replies come back with the short trains' dispersion, so their
per-train rate reads about twice the link and a two-length slope gigabits.
Before the budget rule (estimate/load_budget.hpp) `capacity` probed at 22-28%
of C on this path (4 runs) and `measure --no-hops` at 12-13% overall, its
capacity phase at 25-31%.

Asserted, for every run: the average probing rate, 8 x probe_bytes /
elapsed_s from the JSON, stays under max_load x the true capacity with a 10%
margin (0.11 x C at the default 10%); for measure also each phase's own
average (capacity: probe_bytes - availbw_probe_bytes over capacity_elapsed_s;
avail-bw: availbw_probe_bytes over availbw_elapsed_s); and once with
--max-load 0.05, that the average follows the option.

Also a script: ``python3 tests/lab/test_load_cap.py [--runs N]`` prints the
rates (the README's numbers).
"""
import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from labtest import BIN, LAB_MARKS, lab  # noqa: E402,F401

pytestmark = LAB_MARKS

PIN = (os.cpu_count() or 1) >= 2
CROSS_CPU = 1 if PIN else None
MARGIN = 1.10  # 10% over the cap: the gate's own slack (last train, clock)

LINKS = [lab.Link(rate=None), lab.Link(rate=20e6, limit=15000)]


def run_with_cross(links, cross, commands, settle=0.5):
    """[(command, exit code, document, truth)] for each command line in
    `commands` on `links`, with cross traffic `cross` = (kind, bit/s) on
    link 2 throughout."""
    out = []
    with lab.Lab(lab.Spec(links=links)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        gens = [L.cross(2, cross[0], rate=cross[1], cpu=CROSS_CPU)]
        try:
            time.sleep(settle)
            for args in commands:
                cmd = (["taskset", "-c", "0"] if PIN else []) + [BIN] + args[:1] + \
                    [L.target_ip] + args[1:] + ["--json"]
                p = L.run_in_prober(cmd, timeout=120)
                out.append((" ".join(args), p.returncode, json.loads(p.stdout), truth))
        finally:
            for g in gens:
                g.stop()
    return out


def run_small_queue(commands):
    return run_with_cross(LINKS, ("bursty", 2e6), commands)


def shaper_span(doc):
    """(bytes, seconds) of the shaper probe, left out of the --max-load average."""
    sc = doc.get("shaper_check") or {}
    return sc.get("stream_bytes", 0), sc.get("elapsed_s", 0.0)


def rates(doc):
    """{phase: average probing rate in bit/s} of one document, the shaper
    probe's streams and time left out (they have their own caps)."""
    sb, ss = shaper_span(doc)
    r = {"run": 8 * (doc["probe_bytes"] - sb) / (doc["elapsed_s"] - ss)}
    if "availbw_probe_bytes" in doc:
        cap_bytes = doc["probe_bytes"] - doc["availbw_probe_bytes"] - sb
        r["capacity_phase"] = 8 * cap_bytes / (doc["capacity_elapsed_s"] - ss)
        # Refill pairs (a token bucket's avail-bw) are shaper streams with
        # their own caps (README, Safety): only the rest of the phase counts.
        refill = (doc.get("shaper_check") or {}).get("refill_bytes", 0)
        if doc["availbw_probe_bytes"] > refill:
            r["availbw_phase"] = \
                8 * (doc["availbw_probe_bytes"] - refill) / doc["availbw_elapsed_s"]
    return r


RUNS = 3
COMMANDS = [["capacity"]] * RUNS + [["measure", "--no-hops"]] * RUNS + \
    [["capacity", "--max-load", "0.05"]]
_RESULTS = []


def _results():
    if not _RESULTS:
        _RESULTS.extend(run_small_queue(COMMANDS))
    return _RESULTS


def _detail(results):
    return [(cmd, {k: round(v / truth, 3) for k, v in rates(doc).items()},
             round(doc["elapsed_s"], 2)) for cmd, _, doc, truth in results]


@pytest.mark.parametrize("command", ["capacity", "measure --no-hops", "capacity --max-load 0.05"])
def test_average_probing_rate_under_max_load(command):
    results = [r for r in _results() if r[0] == command]
    assert results
    max_load = 0.05 if "0.05" in command else 0.10
    for cmd, code, doc, truth in results:
        assert code == 0, doc
        for phase, rate in rates(doc).items():
            assert rate <= MARGIN * max_load * truth, \
                f"{phase}: {rate / truth:.3f} of C; all runs: {_detail(results)}"
        # The rule must not starve the run either: a capacity came out.
        assert doc["capacity_bps"] > 0


# The shaper probe's own caps (README, "Token-bucket shapers"; app/shaper_run.cpp).
SHAPER_MAX_STREAMS = 4
SHAPER_MAX_STREAM_BYTES = 32e6
MAX_BYTES = 50e6  # --max-bytes default
SHAPER = [lab.Link(rate=None), lab.Link(rate=20e6, burst=3_000_000)]


def run_shaped(commands):
    out = []
    with lab.Lab(lab.Spec(links=SHAPER)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)  # the sustained rate
        for args in commands:
            cmd = [BIN] + args[:1] + [L.target_ip] + args[1:] + ["--json"]
            p = L.run_in_prober(cmd, timeout=120)
            out.append((" ".join(args), p.returncode, json.loads(p.stdout), truth))
    return out


def test_shaper_stream_has_its_own_budget():
    """A 20 Mbit/s token bucket of 3 MB: the shaper probe sends MBs of streams
    (up to 32 MB each). They stay within their own caps, they do not make the
    phases after them wait (the run ends well inside its time cap), and the
    avail-bw phase after the probe averages under max_load x the sustained
    rate R. Before the probe the capacity trains see the burst (their replies
    come back at our own ~1 Gbit/s) and are budgeted at that: to see a bucket
    at all they must send more than it holds. That price is bounded here at
    3 x B (measured 1.3-2.0 x B; README, "The shaper probe has its own
    budget"); it is not max_load x R. The avail-bw on a bucket comes from
    refill pairs, shaper streams as well (about 1.5 x B a pair, at most 5
    pairs): what else the phase sends stays under max_load x R."""
    bucket = 3_000_000 * 1500 / 1514  # IP bytes
    results = run_shaped([["capacity"], ["measure", "--no-hops"]])
    for cmd, code, doc, truth in results:
        sb, ss = shaper_span(doc)
        detail = (cmd, {k: round(v / truth, 3) for k, v in rates(doc).items()},
                  doc.get("shaper_check"), doc["elapsed_s"])
        assert code == 0, doc
        sc = doc["shaper_check"]
        assert sc is not None and sc["streams"] >= 1, detail
        assert sc["streams"] <= SHAPER_MAX_STREAMS, detail
        assert sc["stream_bytes"] <= SHAPER_MAX_STREAMS * SHAPER_MAX_STREAM_BYTES, detail
        assert doc["probe_bytes"] <= MAX_BYTES, detail
        assert 0 < ss < doc["elapsed_s"], detail
        assert doc["elapsed_s"] < 20, detail
        cap_bytes = doc["probe_bytes"] - doc.get("availbw_probe_bytes", 0) - sb
        assert cap_bytes <= 3 * bucket, detail
        # Refill pairs: at most 5 sent, within --max-bytes (README, Safety).
        assert sc.get("refill_pairs", 0) <= 5, detail
        assert sc.get("refill_bytes", 0) <= doc["probe_bytes"] <= MAX_BYTES, detail
        if "availbw_phase" in rates(doc):
            assert rates(doc)["availbw_phase"] <= MARGIN * 0.10 * truth, detail
        assert abs(doc["capacity_bps"] / truth - 1) <= 0.03, detail


# A 3 Mbit/s tbf with a 30 KB queue kept full by a TCP flow at the link's
# rate: the capacity trains lose their load around their 40-byte markers.
SATURATED = [lab.Link(rate=None), lab.Link(rate=3e6, limit=30000)]


def test_no_stream_where_full_size_syns_do_not_confirm_the_rate():
    """A saturated 3 Mbit/s link (README, "Streams only where full-size SYNs
    confirm the rate"): the trains there read 12 to 700 Mbit/s and call the
    shaper probe, whose streams the ledger does not count. A stream goes only
    after 2 whole trains of full-size SYNs (the binary before: a 0.5-0.7 MB
    stream at our own rate in every run of 5, and a capacity of 527 Mbit/s
    with exit 0 in one); no capacity is reported far from the link's; and the
    rest averages under twice max_load x C. Not once: the sizing trains
    before any check are budgeted on rates that lost load inflated (1.4
    Gbit/s), and the first 192 KB of them go at once: 12 runs averaged 4-15%
    of C (median 7.7%; the binary before: 5-10% with its streams left out,
    12-18% with them)."""
    results = run_with_cross(SATURATED, ("tcp", 3e6), [["measure", "--no-hops"]] * 2, settle=2)
    triggered = 0
    for _, code, doc, truth in results:
        sc = doc.get("shaper_check") or {}
        detail = (code, doc.get("capacity_bps"), sc, [w["code"] for w in doc.get("warnings", [])])
        if sc and sc["trigger"] != "routine":
            triggered += 1
            if sc["streams"] > 0:
                assert sc.get("syn_trains_whole", 0) >= 2, detail
            else:
                assert sc["verdict"] == "unconfirmed", detail
        if code == 0:
            assert 0.5 <= doc["capacity_bps"] / truth <= 2, detail
        if doc.get("elapsed_s"):
            assert rates(doc)["run"] <= 2 * 0.10 * truth, (rates(doc), detail)
    # The probe was called (in each of the 12 runs here): the check was exercised.
    # Two runs, not three: the fresh-clone CI at 713e38b took 30.1 min of lab tests.
    assert triggered >= 1, [r[2].get("shaper_check") for r in results]


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shaper", action="store_true", help="the 3 MB token bucket instead")
    a = ap.parse_args()
    cmds = [["capacity"]] * a.runs + [["measure", "--no-hops"]] * a.runs
    for cmd, code, doc, truth in (run_shaped if a.shaper else run_small_queue)(cmds):
        per = "  ".join(f"{k} {100 * v / truth:.1f}%" for k, v in rates(doc).items())
        sb, ss = shaper_span(doc)
        if ss:
            cap = doc["probe_bytes"] - doc.get("availbw_probe_bytes", 0) - sb
            per += f"  shaper {sb} B in {ss:.2f} s, capacity trains {cap} B"
        print(f"{cmd}: exit {code}  C {doc.get('capacity_bps', 0) / 1e6:.2f} Mbit/s "
              f"(truth {truth / 1e6:.2f})  {doc['probe_bytes']} B in {doc['elapsed_s']:.2f} s  "
              f"{per}", flush=True)
