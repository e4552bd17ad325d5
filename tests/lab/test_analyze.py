"""`linkwidth analyze` against the real binary (issue 6, offline analysis).

Without root: bad files give one sentence on stderr and exit 2 (JSON error
document with --json), never a crash or a hang; the committed captures in
tests/data are re-run. With root (lab): live capacity, measure (with its hops
phase) and hops runs with --save-pcap are analysed again and must give back
the same documents.
"""
import json
import os
import subprocess
import tempfile
import time

import pytest

from labtest import BIN, LAB_MARKS, ROOT, lab  # noqa: F401

DATA = os.path.join(ROOT, "tests", "data")
have_bin = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


def analyze(*args, timeout=10):
    return subprocess.run([BIN, "analyze", *args], capture_output=True, text=True,
                          timeout=timeout)


def one_sentence(p):
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("linkwidth: "), lines[0]
    assert "terminate called" not in p.stderr and "Sanitizer" not in p.stderr
    return lines[0]


@have_bin
@pytest.mark.noroot
@pytest.mark.parametrize("content,words", [
    (None, "No such file"),
    (b"", "not a readable pcap"),
    (b"hello, this is not a capture\n" * 10, "not a readable pcap"),
    (bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"), "no linkwidth run records"),
])
def test_bad_files_are_one_sentence_and_exit_2(content, words):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.pcap")
        if content is not None:
            open(path, "wb").write(content)
        p = analyze(path)
        assert p.returncode == 2
        assert p.stdout == ""
        assert words in one_sentence(p)
        pj = analyze(path, "--json")
        assert pj.returncode == 2
        doc = json.loads(pj.stdout)
        assert doc["error"]["message"] and words in doc["error"]["message"]


@have_bin
@pytest.mark.noroot
def test_usage_errors():
    for args in ([], ["--nope", "f.pcap"], ["a.pcap", "b.pcap"]):
        p = analyze(*args)
        assert p.returncode == 2, args
        one_sentence(p)


@have_bin
@pytest.mark.noroot
def test_committed_captures_rerun():
    truth = json.load(open(os.path.join(DATA, "captures.json")))
    for name in truth:
        p = analyze(os.path.join(DATA, name + ".pcap"), "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["type"] in ("capacity", "measure", "hops")
        assert doc["offline"]["pcap"].endswith(name + ".pcap")
        text = analyze(os.path.join(DATA, name + ".pcap"))
        assert text.returncode == 0 and "analysed offline from" in text.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="lab tests need root (network namespaces)")
@have_bin
def same_document(live_stdout, cap):
    a = analyze(cap, "--json")
    assert a.returncode in (0, 1), a.stderr
    off = json.loads(a.stdout)
    assert off.pop("offline") == {"pcap": cap}
    assert off == json.loads(live_stdout)


def test_live_runs_and_analyze_agree():
    spec = lab.Spec(links=[lab.Link(rate=None), lab.Link(rate=20e6), lab.Link(rate=None)])
    with lab.Lab(spec, name="anatest") as L, tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        cap = os.path.join(d, "cap.pcap")
        p = L.run_in_prober([BIN, "capacity", L.target_ip, "--json", "--trains", "12",
                             "--save-pcap", cap], timeout=60)
        assert p.returncode == 0, p.stderr
        live = json.loads(p.stdout)
        a = analyze(cap, "--json")
        assert a.returncode == 0, a.stderr
        off = json.loads(a.stdout)
        assert off.pop("offline") == {"pcap": cap}
        assert off == live
        truth = L.ground_truth_capacity(ip_len=1500)
        assert abs(off["capacity_bps"] / truth - 1) < 0.03
        assert os.path.getsize(cap) < 200_000

        for name, args in (("measure", ["measure", "--max-time", "8"]),
                           ("hops", ["hops", "--trains", "4"]),
                           ("availbw", ["availbw", "--capacity", "19.8M", "--max-time", "5"])):
            mcap = os.path.join(d, name + ".pcap")
            m = L.run_in_prober([BIN, args[0], L.target_ip, *args[1:], "--json", "--save-pcap",
                                 mcap], timeout=60)
            assert m.returncode in (0, 1), m.stderr
            same_document(m.stdout, mcap)


def test_pipelined_trains_replay_as_recorded():
    """At a round trip of 10 ms and more the avail-bw trains are pipelined
    (README, "Round trips"): sent one after the other, their replies collected
    together. The replay reads them back train by train and gives the same
    document."""
    spec = lab.Spec(links=[lab.Link(rate=None, delay_ms=25), lab.Link(rate=20e6)], delay_cpu=1)
    with lab.Lab(spec, name="anapipe") as L, tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        cap = os.path.join(d, "availbw.pcap")
        m = L.run_in_prober([BIN, "availbw", L.target_ip, "--capacity", "19.8M", "--max-time",
                             "8", "--json", "--save-pcap", cap], timeout=60)
        assert m.returncode in (0, 1), m.stderr
        doc = json.loads(m.stdout)
        assert doc["rtt_s"] >= 0.045, doc["rtt_s"]
        assert doc["availbw_trains_sent"] > 0
        same_document(m.stdout, cap)


def loaded_measure(L, d, loads, max_time):
    """`measure --no-hops --save-pcap` under cross traffic `loads` ({link:
    load}, test_availbw_paths.start_load), the capture in directory `d`:
    (the process, the capture's path). The generators stop either way."""
    from test_availbw_paths import start_load
    os.chmod(d, 0o777)
    gens = []
    try:
        for i, u in loads.items():
            gens.append(start_load(L, i, u))
        time.sleep(0.5)
        cap = os.path.join(d, "own.pcap")
        m = L.run_in_prober([BIN, "measure", L.target_ip, "--no-hops", "--max-time",
                             str(max_time), "--json", "--save-pcap", cap], timeout=90)
    finally:
        for g in gens:
            g.stop()
    return m, cap


def test_own_link_readings_replay_as_recorded():
    """Our own interface shaped (tbf 100 Mbit/s) with this host's traffic
    through it (75%, UDP from xs1): the avail-bw phase reads our link's
    avail-bw from its counters after every train and judges the trains our
    queue moved about at rates under 0.9 of it on the lower of two views
    (own_queue_bursts). The replay reads those readings from the run's notes
    and gives the same document."""
    spec = lab.Spec(links=[lab.Link(rate=100e6, shaper="tbf"), lab.Link(rate=40e6)])
    with lab.Lab(spec, name="anaown") as L, tempfile.TemporaryDirectory() as d:
        m, cap = loaded_measure(L, d, {1: 0.75}, 8)
        assert m.returncode in (0, 1), m.stderr
        doc = json.loads(m.stdout)
        readings = [t["own_link_availbw_bps"] for r in doc["rates"] for t in r["trains"]]
        assert any(x is not None and x > 0 for x in readings), readings
        same_document(m.stdout, cap)


def test_own_shaper_capacity_replays_as_recorded():
    """Our own 100 Mbit/s tbf is the narrow link, 75% of it this host's CBR,
    a half-loaded 150 Mbit/s link after it: the capacity becomes the tbf's
    rate, in the capacity phase (when that phase read above it) or after the
    avail-bw phase (trains below it for this host's traffic, gaps above it).
    The replay gives the same document either way."""
    from test_availbw_paths import SCENARIOS
    links, load = SCENARIOS["local_narrow_busy_remote"]
    with lab.Lab(lab.Spec(links=links), name="anashaper") as L, \
            tempfile.TemporaryDirectory() as d:
        m, cap = loaded_measure(L, d, load, 12)
        assert m.returncode in (0, 1), m.stderr
        doc = json.loads(m.stdout)
        assert doc["capacity_source"] == "own_shaper", (doc["capacity_bps"], doc["warnings"])
        assert abs(doc["capacity_bps"] / (100e6 * 1500 / 1514) - 1) < 0.01
        same_document(m.stdout, cap)
