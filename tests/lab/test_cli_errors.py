"""Bad command lines and values against the real binary (issue 6, "bad input").

Each case must end within a time bound with a non-zero exit code, nothing on
stdout (text mode), and exactly one line on stderr: ``linkwidth: <sentence>``
holding the expected words; with --json the same exit code and a valid JSON
error document. Never a crash (signal, "terminate called", sanitizer report) or
a hang.

No case may send a packet: as root every case runs in a new, empty network
namespace (``unshare --net``: only a downed loopback), so even a case that a bug
let through has nowhere to send; without root the binary has no raw socket.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("LINKWIDTH_BIN", os.path.join(ROOT, "build", "linkwidth"))

pytestmark = [
    pytest.mark.noroot,
    pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built"),
]

TIME_BOUND = 5.0  # seconds per run; every case here fails well under 0.1 s
T = "198.18.7.2"  # a lab-range target (never reached: see the module doc)

USAGE, RUNTIME = 2, 1

CASES = [
    # (arguments, exit code, words the sentence must hold)
    ([], USAGE, "no command given"),
    (["frobnicate", T], USAGE, "unknown command 'frobnicate'"),
    (["capacity"], USAGE, "no TARGET given"),
    (["capacity", ""], USAGE, "no TARGET given"),
    (["capacity", T, "198.18.7.3"], USAGE, "only one TARGET"),
    (["capacity", "no-such-host.invalid"], None, "cannot resolve host 'no-such-host.invalid'"),
    (["capacity", "999.1.1.1"], None, "cannot resolve host '999.1.1.1'"),
    (["capacity", "a" * 5000], None, "cannot resolve host"),
    (["capacity", "127.0.0.1"], USAGE, "refusing to probe 127.0.0.1: it is a loopback address"),
    (["capacity", "224.0.0.1"], USAGE, "multicast"),
    (["capacity", "255.255.255.255"], USAGE, "broadcast"),
    (["capacity", "0.0.0.0"], USAGE, "unspecified"),
    (["capacity", T, "--port", "70000"], USAGE, "--port must be between 1 and 65535"),
    (["capacity", T, "--port", "65536"], USAGE, "--port must be between 1 and 65535"),
    (["capacity", T, "--port", "-1"], USAGE, "--port must be between 1 and 65535"),
    (["capacity", T, "--port", "99999999999"], USAGE, "'--port' is invalid"),
    (["capacity", T, "--port", "http"], USAGE, "'--port' is invalid"),
    (["capacity", T, "--port"], USAGE, "argument for option '--port' is missing"),
    (["capacity", T, "--source-port", "70000"], USAGE, "--source-port must be between"),
    (["capacity", T, "--packet-size", "9000"], USAGE, "--packet-size must be between 64 and 1500"),
    (["capacity", T, "--packet-size", "20"], USAGE, "--packet-size must be between 64 and 1500"),
    (["capacity", T, "--packet-size", "1500.5"], USAGE, "'--packet-size' is invalid"),
    (["capacity", T, "--max-rate", "-5M"], USAGE, "--max-rate must be between 100K and 100G"),
    (["capacity", T, "--max-rate", "0"], USAGE, "--max-rate must be between 100K and 100G"),
    (["capacity", T, "--max-rate", "1e15"], USAGE, "--max-rate must be between 100K and 100G"),
    (["capacity", T, "--max-rate", "200G"], USAGE, "--max-rate must be between 100K and 100G"),
    (["capacity", T, "--max-rate", "inf"], USAGE, "--max-rate 'inf' is not a number"),
    (["capacity", T, "--max-rate", "0x10M"], USAGE, "--max-rate '0x10M' is not a number"),
    (["capacity", T, "--max-rate", "5X"], USAGE, "unknown unit"),
    (["capacity", T, "--max-rate", ""], USAGE, "--max-rate is empty"),
    (["capacity", T, "--max-replies", "0"], USAGE, "--max-replies must be between 5 and 10000"),
    (["measure", T, "--max-replies", "1e9"], USAGE, "--max-replies must be between 5 and 10000"),
    (["capacity", T, "--trains", "0"], USAGE, "--trains must be between 1 and 1000"),
    (["capacity", T, "--trains", "-1"], USAGE, "--trains must be between 1 and 1000"),
    (["capacity", T, "--min-trains", "0"], USAGE, "--min-trains must be between"),
    (["capacity", T, "--min-trains", "50", "--trains", "10"], USAGE, "--min-trains cannot exceed"),
    (["capacity", T, "--load-packets", "-5"], USAGE, "--load-packets must be between"),
    (["capacity", T, "--load-packets", "100000"], USAGE, "--load-packets must be between"),
    (["capacity", T, "--markers", "1"], USAGE, "--markers must be between 2 and 16"),
    (["capacity", T, "--max-bytes", "12Q"], USAGE, "unknown unit"),
    (["capacity", T, "--max-bytes", "lots"], USAGE, "--max-bytes 'lots' is not a number"),
    (["capacity", T, "--max-bytes", "-1"], USAGE, "--max-bytes must be between 10K and 10G"),
    (["capacity", T, "--max-bytes", "1e30"], USAGE, "--max-bytes must be between 10K and 10G"),
    (["capacity", T, "--max-bytes", "0"], USAGE, "--max-bytes must be between 10K and 10G"),
    (["capacity", T, "--max-time", "-1"], USAGE, "--max-time must be above 0"),
    (["capacity", T, "--max-time", "0"], USAGE, "--max-time must be above 0"),
    (["capacity", T, "--max-time", "nan"], USAGE, "--max-time must be above 0"),
    (["capacity", T, "--max-time", "1e400"], USAGE, "'--max-time' is invalid"),
    (["capacity", T, "--max-time", "1,5"], USAGE, "'--max-time' is invalid"),
    (["capacity", T, "--reply-timeout", "0"], USAGE, "--reply-timeout must be between"),
    (["capacity", T, "--reply-timeout", "1e-12"], USAGE, "--reply-timeout must be between"),
    (["capacity", T, "--precision", "2"], USAGE, "--precision must be between 0 and 1"),
    (["capacity", T, "--max-load", "0.9"], USAGE, "--max-load must be above 0"),
    (["capacity", T, "--length-ratio", "0.5"], USAGE, "--length-ratio must be between 1 and 8"),
    (["capacity", T, "--train-dispersion", "0"], USAGE, "--train-dispersion must be above 0"),
    (["capacity", T, "--tries", "0"], USAGE, "--tries must be between 1 and 10"),
    (["capacity", T, "--bogus"], USAGE, "unrecognised option '--bogus'"),
    (["capacity", T, "--verbose=3"], USAGE, "'--verbose' does not take any arguments"),
    (["capacity", T, "--source", "nope"], USAGE, "--source 'nope' is not an IP address"),
    (["capacity", T, "--source", "0.0.0.0"], USAGE, "--source 0.0.0.0 is not an address of"),
    # Someone else's address: we would send spoofed packets.
    (["capacity", T, "--source", "198.18.7.1"], USAGE, "--source 198.18.7.1 is not an address"),
    (["capacity", T, "--interface", "nosuchif0"], RUNTIME, "interface 'nosuchif0' does not exist"),
    # IPv6 link-local (issue 14): only with a zone naming an interface of this host.
    (["capacity", "fe80::1"], USAGE,
     "refusing to probe fe80::1: it is a link-local address without a zone"),
    (["capacity", "fe80::1%no-such-if0"], USAGE, "unknown zone 'no-such-if0' in fe80::1%no-such-if0"),
    (["capacity", "fe80::1%"], USAGE, "unknown zone ''"),
    (["capacity", "fe80::1%999999"], USAGE, "unknown zone '999999'"),
    (["capacity", "2001:2:0:7::2%lo"], USAGE, "goes only with a link-local address"),
    (["capacity", "198.18.7.2%lo"], USAGE, "neither a host name nor an IPv6 address"),
    (["capacity", "-4", "fe80::1%lo"], USAGE, "-4 given, but fe80::1%lo is an IPv6 address"),
    (["capacity", "fe80::1%lo", "--interface", "nosuchif0"], USAGE, "name different interfaces"),
    (["capacity", "\udcff\udcfe"], None, "cannot resolve host"),
    (["capacity", T, "--save-pcap", ""], USAGE, "--save-pcap needs a file name"),
    (["capacity", T, "--save-pcap", "/nonexistent/dir/x.pcap"], USAGE,
     "--save-pcap /nonexistent/dir/x.pcap: cannot create the file: No such file or directory"),
    (["capacity", T, "--save-pcap", "/"], USAGE, "--save-pcap /: cannot create the file: Is a"),
]


def isolated(cmd):
    if os.geteuid() == 0 and shutil.which("unshare"):
        return ["unshare", "--net", *cmd]
    return cmd


def run(args):
    # errors="surrogateescape" lets the invalid-UTF-8 case pass raw bytes.
    return subprocess.run(isolated([BIN, *args]), capture_output=True, timeout=TIME_BOUND,
                          env={**os.environ, "ASAN_OPTIONS": "abort_on_error=0"},
                          text=True, errors="surrogateescape")


def check_sentence(p, words, code):
    assert p.returncode > 0, (p.returncode, p.stderr)  # < 0 would be a signal: a crash
    if code is not None:
        assert p.returncode == code, p.stderr
    for bad in ("terminate called", "Sanitizer", "Aborted", "Segmentation", "runtime error"):
        assert bad not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("linkwidth: "), lines[0]
    assert words in lines[0], lines[0]


@pytest.mark.parametrize("args,code,words", CASES,
                         ids=[" ".join(a)[:60] or "(none)" for a, _, _ in CASES])
def test_bad_input_gets_one_sentence_and_nonzero_exit(args, code, words):
    p = run(args)
    check_sentence(p, words, code)
    assert p.stdout == ""
    # The same with --json: a valid error document on stdout, same exit code.
    j = run([*args[:1], "--json", *args[1:]])
    check_sentence(j, words, p.returncode)
    doc = json.loads(j.stdout)
    assert doc["error"]["code"] and words in doc["error"]["message"]
    assert doc["type"] in ("error", "capacity")


def test_unknown_host_that_does_not_exist_is_a_usage_error():
    # Where a resolver answers, a name that does not exist is a bad command
    # line (2); a resolver that cannot answer is a runtime failure (1).
    p = run(["capacity", "999.1.1.1"])
    assert p.returncode in (USAGE, RUNTIME)
    if "not known" in p.stderr:
        assert p.returncode == USAGE
