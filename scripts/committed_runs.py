"""The paths benchmark's committed runs (git history of results/paths_runs/),
for the scripts that replay them without a lab run
(gaps_refusal_history.py, train_trend_history.py)."""
import json
import subprocess


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
