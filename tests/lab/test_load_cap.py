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


def run_small_queue(commands):
    """[(command, exit code, document, truth)] for each command line in `commands`."""
    out = []
    with lab.Lab(lab.Spec(links=LINKS)) as L:
        truth = L.ground_truth_capacity(ip_len=1500)
        gens = [L.cross(2, "bursty", rate=2e6, cpu=CROSS_CPU)]
        try:
            time.sleep(0.5)
            for args in commands:
                cmd = (["taskset", "-c", "0"] if PIN else []) + [BIN] + args[:1] + \
                    [L.target_ip] + args[1:] + ["--json"]
                p = L.run_in_prober(cmd, timeout=120)
                out.append((" ".join(args), p.returncode, json.loads(p.stdout), truth))
        finally:
            for g in gens:
                g.stop()
    return out


def rates(doc):
    """{phase: average probing rate in bit/s} of one document."""
    r = {"run": 8 * doc["probe_bytes"] / doc["elapsed_s"]}
    if "availbw_probe_bytes" in doc:
        cap_bytes = doc["probe_bytes"] - doc["availbw_probe_bytes"]
        r["capacity_phase"] = 8 * cap_bytes / doc["capacity_elapsed_s"]
        r["availbw_phase"] = 8 * doc["availbw_probe_bytes"] / doc["availbw_elapsed_s"]
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


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    cmds = [["capacity"]] * a.runs + [["measure", "--no-hops"]] * a.runs
    for cmd, code, doc, truth in run_small_queue(cmds):
        per = "  ".join(f"{k} {100 * v / truth:.1f}%" for k, v in rates(doc).items())
        print(f"{cmd}: exit {code}  C {doc.get('capacity_bps', 0) / 1e6:.2f} Mbit/s "
              f"(truth {truth / 1e6:.2f})  {doc['probe_bytes']} B in {doc['elapsed_s']:.2f} s  "
              f"{per}", flush=True)
