"""The paths benchmark's committed runs (git history of results/paths_runs/),
for the scripts that replay them without a lab run
(gaps_refusal_history.py, train_trend_history.py, range_history.py,
local_disturbance_replay.py, gap_rule_history.py, baseline_history.py)."""
import argparse
import json
import subprocess

FLEET_FRACTION = 0.66  # --fleet-fraction


def committed_revs(repo=".", rev="HEAD"):
    """Commits that changed the committed run documents, reachable from
    `rev`, newest first."""
    return subprocess.run(["git", "-C", repo, "log", "--format=%h", rev, "--",
                           "results/paths_runs/path000.json"],
                          capture_output=True, text=True, check=True).stdout.split()


def path_runs(repo, revs):
    """(commit, path index, run document) for every path of every commit in
    `revs`, in that order."""
    for r in revs:
        for i in range(200):
            p = subprocess.run(["git", "-C", repo, "show", f"{r}:results/paths_runs/path{i:03d}.json"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                break
            yield r, i, json.loads(p.stdout)


def distinct_runs(repo=".", rev="HEAD"):
    """(commit, run document) for every distinct run file (each blob once,
    at the newest commit that holds it) of every commit reachable from `rev`
    that changed results/paths_runs/; files that are not JSON are skipped."""
    seen = set()
    commits = subprocess.run(["git", "-C", repo, "log", "--format=%h", rev, "--",
                              "results/paths_runs/"],
                             capture_output=True, text=True, check=True).stdout.split()
    for c in commits:
        tree = subprocess.run(["git", "-C", repo, "ls-tree", c, "results/paths_runs/"],
                              capture_output=True, text=True, check=True).stdout
        for line in tree.splitlines():
            blob = line.split("\t")[0].split()[2]
            if blob in seen:
                continue
            seen.add(blob)
            text = subprocess.run(["git", "-C", repo, "cat-file", "-p", blob],
                                  capture_output=True, text=True, check=True).stdout
            try:
                yield c, json.loads(text)
            except ValueError:
                continue


def history_args(doc):
    """The command line of a script that replays the committed runs up to
    --rev: (parsed arguments, the commits whose runs count, newest first)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repo", default=".")
    ap.add_argument("--rev", default="HEAD", help="the newest commit whose runs count")
    a = ap.parse_args()
    return a, committed_revs(a.repo, a.rev)


def fleet_verdict(verdicts, fraction=FLEET_FRACTION):
    """decide_fleet (estimate/availbw.cpp) on train verdict names: "above" or
    "below" when that share of the trains agree, else "grey"; None without
    trains."""
    if not verdicts:
        return None
    n = len(verdicts)
    if verdicts.count("above") >= fraction * n:
        return "above"
    if verdicts.count("below") >= fraction * n:
        return "below"
    return "grey"
