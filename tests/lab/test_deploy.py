"""The package and the Ansible sweep over several vantage points (deploy/).

* The Debian package builds (cpack), lintian finds no error in it, and the
  man page (generated from `linkwidth help`) renders with `man -l`.
* Three vantage namespaces, each with its own OpenSSH server, and four
  targets (20 and 50 Mbit/s, one filtered, one unreachable): the playbook
  installs the package on every vantage point (with its capabilities), runs
  the slot schedule and merges 12 records naming their vantage point, errors
  as records, no two vantage points on one target at overlapping times, the
  capacities within 3% of the truth. A vantage point killed mid-sweep is
  completed by the same command run again, with no duplicate.
"""

import calendar
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))

from lablib.vantage import TargetSpec, VantageLab  # noqa: E402

BIN = os.environ.get("LINKWIDTH_BIN", os.path.join(REPO, "build", "linkwidth"))
BUILD = os.path.dirname(os.path.abspath(BIN))
REMOTE = "/var/tmp/linkwidth-sweep"
SLOT, TARGET_TIME = 8, 5


def _need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip("needs " + ", ".join(missing) + " (scripts/install-deps.sh)")


@pytest.fixture(scope="module")
def deb():
    _need("cpack", "dpkg-deb", "lintian")
    out = tempfile.mkdtemp(prefix="lw-deb-")
    try:
        cp = subprocess.run(["cpack", "-G", "DEB", "--config",
                             os.path.join(BUILD, "CPackConfig.cmake"), "-B", out],
                            capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        debs = glob.glob(os.path.join(out, "*.deb"))
        assert len(debs) == 1, debs
        yield debs[0]
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_package_contents_and_lintian(deb):
    files = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                           check=True).stdout
    for path in ("./usr/bin/linkwidth", "./usr/share/man/man1/linkwidth.1.gz",
                 "./usr/share/doc/linkwidth/copyright", "./usr/share/doc/linkwidth/README.md"):
        assert path in files, path
    postinst = subprocess.run(["dpkg-deb", "-I", deb, "postinst"], capture_output=True,
                              text=True, check=True).stdout
    assert "setcap cap_net_raw,cap_net_admin+ep /usr/bin/linkwidth" in postinst
    cp = subprocess.run(["lintian", "--tag-display-limit", "0", deb], capture_output=True, text=True,
                        timeout=300)
    errors = [l for l in cp.stdout.splitlines() if l.startswith("E:")]
    assert not errors, cp.stdout


def test_man_page_renders_the_help():
    _need("man")
    page = os.path.join(BUILD, "linkwidth.1.gz")
    assert os.path.exists(page), "build the default target: the man page is part of it"
    cp = subprocess.run(["man", "-l", page], capture_output=True, text=True,
                        env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"), timeout=60)
    assert cp.returncode == 0, cp.stderr
    text = cp.stdout
    assert "LINKWIDTH(1)" in text
    # the options come from `linkwidth help` itself: every one of them is on the page
    help_text = subprocess.run([BIN, "help"], capture_output=True, text=True).stdout
    for opt in ("--max-rate", "--max-bytes", "--save-pcap", "--max-replies"):
        assert opt in help_text and opt in text, opt
    assert "EXIT STATUS" in text


def test_version_json():
    cp = subprocess.run([BIN, "version", "--json"], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["type"] == "version" and doc["version"]
    assert doc["commit"] and doc["commit"] != ""
    bad = subprocess.run([BIN, "version", "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


sys.path.insert(0, os.path.join(REPO, "deploy"))
import lwsweep  # noqa: E402


@pytest.mark.noroot
@pytest.mark.parametrize("hosts,targets", [(3, 4), (4, 3), (1, 5), (5, 1), (7, 7)])
def test_schedule_never_puts_two_vantage_points_on_one_target(hosts, targets):
    hs = [f"h{i}" for i in range(hosts)]
    ts = [(f"t{j}", "capacity") for j in range(targets)]
    sched = lwsweep.make_schedule(hs, ts, "all")
    pairs = [(h, t) for h, es in sched.items() for _, t, _ in es]
    assert sorted(pairs) == sorted((h, t) for h in hs for t, _ in ts)   # each pair once
    slots = {}
    for h, es in sched.items():
        assert len({s for s, _, _ in es}) == len(es)                       # one target a slot
        for s, t, _ in es:
            assert (s, t) not in slots, (s, t, h, slots.get((s, t)))      # one host a target
            slots[(s, t)] = h
    assert max(s for s, _ in slots) + 1 == max(hosts, targets)
    split = lwsweep.make_schedule(hs, ts, "split")
    assert sorted(t for es in split.values() for _, t, _ in es) == sorted(t for t, _ in ts)


@pytest.mark.noroot
def test_done_keys_follow_the_sweeps_resume_rules(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"sweep": {"target": "a", "mode": "capacity", "exit_code": 0}}) + "\n" +
                 json.dumps({"sweep": {"target": "b", "mode": "capacity", "exit_code": 1}}) + "\n" +
                 json.dumps({"sweep": {"target": "c", "mode": "capacity", "interrupted": True}}) +
                 "\n" + json.dumps({"sweep": {"target": "d", "mode": "capacity", "exit_code": 3}}) +
                 "\n" + '{"sweep": {"target": "e"')
    assert lwsweep.done_keys(str(f)) == {("a", "capacity"), ("b", "capacity")}


def _stamp(rec):
    sw = rec["sweep"]
    start = calendar.timegm(time.strptime(sw["started_at"], "%Y-%m-%dT%H:%M:%SZ"))
    return start, start + 1 + float(sw["elapsed_s"])   # started_at is floored to the second


def _playbook(lab_dir, inv, deb_path, targets, out):
    extra = {"lw_deb": deb_path, "lw_targets": targets, "lw_out": out, "lw_slot": SLOT,
             "lw_target_time": TARGET_TIME, "lw_lead": 6, "lw_args": "--max-time 3"}
    cmd = ["ansible-playbook", "-i", inv, os.path.join(REPO, "deploy", "sweep.yml"),
           "-e", json.dumps(extra)]
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=os.path.join(lab_dir, "ansible-local"),
               ANSIBLE_REMOTE_TEMP="/tmp/.lw-ansible", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_SSH_TRANSFER_METHOD="piped",
               # The run's own ssh multiplexing sockets: a master left from an
               # earlier run (to a namespace since deleted) would be reused by
               # the same host address and hang every task sent through it.
               ANSIBLE_SSH_CONTROL_PATH_DIR=os.path.join(lab_dir, "cp"),
               ANSIBLE_FORKS="5")
    return cmd, env


def test_ansible_sweep_three_vantage_points_resumes_after_a_kill(deb):
    _need("ansible-playbook", "ssh", "ssh-keygen")
    specs = [TargetSpec(rate=20e6), TargetSpec(rate=50e6), TargetSpec(rate=20e6, kind="filtered"),
             TargetSpec(kind="unreachable")]
    shutil.rmtree(REMOTE, ignore_errors=True)
    work = tempfile.mkdtemp(prefix="lw-deploy-")
    try:
        with VantageLab(vantage=3, targets=specs) as lab:
            inv = lab.inventory(os.path.join(work, "inventory.ini"))
            targets = os.path.join(work, "targets.txt")
            with open(targets, "w") as f:
                f.write("".join(f"{lab.target_ip(j)}\n" for j in range(1, 5)))
            out = os.path.join(work, "out")
            cmd, env = _playbook(work, inv, deb, targets, out)

            # run 1: vantage point 2 is cut off after its first record
            log1 = open(os.path.join(work, "run1.log"), "w")
            p = subprocess.Popen(cmd, stdout=log1, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
            v2_file = os.path.join(REMOTE, "v2", "sweep.jsonl")
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and p.poll() is None:
                if os.path.exists(v2_file) and open(v2_file).read().count("\n") >= 1:
                    break
                time.sleep(0.2)
            assert p.poll() is None, open(log1.name).read()
            lab.kill_vantage(2)
            try:
                rc1 = p.wait(300)
            except subprocess.TimeoutExpired:
                # Not left running after the test, nor its forked workers and
                # their ssh masters (they hung every later run here).
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                log1.flush()
                pytest.fail("the playbook's run 1 did not end within 300 s after v2 was killed; "
                            "its log ends:\n" + open(log1.name).read()[-6000:])
            run1 = open(log1.name).read()
            assert rc1 != 0, run1               # one host failed
            v2_lines = open(v2_file).read().count("\n")
            assert 1 <= v2_lines < 4, run1       # the kill really cut its sweep short
            assert os.path.exists(os.path.join(out, "merged.jsonl")), run1
            with open(os.path.join(out, "merged.jsonl")) as f:
                first = [json.loads(l) for l in f]
            assert len(first) == 8, run1         # v1 and v3 complete, v2 not fetched

            # run 2: the same command completes v2 and duplicates nothing
            lab.start_sshd(2)
            cp = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
            assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-2000:]

            with open(os.path.join(out, "merged.jsonl")) as f:
                recs = [json.loads(l) for l in f]
            assert len(recs) == 12
            keys = {(r["vantage"], r["sweep"]["target"]) for r in recs}
            assert len(keys) == 12
            assert {r["vantage"] for r in recs} == {"v1", "v2", "v3"}
            for j in range(1, 5):
                ip = lab.target_ip(j)
                mine = [r for r in recs if r["sweep"]["target"] == ip]
                assert len(mine) == 3
                if specs[j - 1].kind == "ok":
                    truth = lab.truth(j)
                    for r in mine:
                        assert not r.get("error"), r
                        err = abs(r["capacity_bps"] - truth) / truth
                        # (On failure, what the record said of itself: its
                        # interval, source, stop reason and warnings.)
                        assert err < 0.03, (r["vantage"], ip, r["capacity_bps"], truth,
                                            r.get("capacity_low_bps"), r.get("capacity_high_bps"),
                                            r.get("capacity_source"), r.get("stop_reason"),
                                            [w.get("code") for w in r.get("warnings", [])])
                else:
                    want = {"filtered": "target_filtered",
                            "unreachable": "target_unreachable"}[specs[j - 1].kind]
                    assert all(r.get("error", {}).get("code") == want for r in mine), mine
                # never two vantage points on this target at once
                spans = sorted(_stamp(r) for r in mine)
                for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
                    assert e0 <= s1, (ip, spans)
            # the installed package lets a normal user measure (file capabilities)
            cp = subprocess.run(["ip", "netns", "exec", lab.ns("v1"), "setpriv", "--reuid=65534",
                                 "--regid=65534", "--clear-groups", "/usr/bin/linkwidth",
                                 "capacity", lab.target_ip(1), "--json", "--max-time", "5"],
                                capture_output=True, text=True, timeout=60)
            assert cp.returncode == 0, cp.stderr
            doc = json.loads(cp.stdout)
            assert abs(doc["capacity_bps"] - lab.truth(1)) / lab.truth(1) < 0.03
            assert doc["params"]["privileges"]["was_root"] is False

            summary = os.path.join(out, "summary")
            for name in ("capacity.csv", "availbw.csv", "failures.csv", "heatmap.png"):
                assert os.path.getsize(os.path.join(summary, name)) > 0, name
            with open(os.path.join(summary, "failures.csv")) as f:
                fails = f.read()
            assert "target_filtered,3" in fails and "target_unreachable,3" in fails
            with open(os.path.join(summary, "capacity.csv")) as f:
                rows = f.read().splitlines()
            assert len(rows) == 4 and rows[0].count(",") == 4
    finally:
        subprocess.run(["dpkg", "--purge", "linkwidth"], capture_output=True)
        shutil.rmtree(REMOTE, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
