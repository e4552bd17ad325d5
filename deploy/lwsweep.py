#!/usr/bin/env python3
"""Sweeps from many vantage points: the schedule, the runner on each vantage
point, and the merge. Used by deploy/sweep.yml; Python 3 standard library
only (matplotlib for the heat map, on the controller, when installed).

  lwsweep.py schedule --hosts v1,v2,v3 --targets targets.txt --split all|split
                      --slot 25 --target-time 20 --out DIR
      One file per vantage point, DIR/HOST.schedule: a JSON object with t0
      (UNIX time of slot 0), the slot length and the (slot, target, mode)
      entries of that host. In "all" mode every vantage point measures every
      target; in "split" mode each target goes to one vantage point (round
      robin). No two vantage points ever hold the same target in the same
      slot: in slot s vantage point i measures target (i + s) mod n, n =
      max(#hosts, #targets), a Latin square, so each pair is measured exactly
      once and a target sees at most one vantage point at a time (their
      trains would meet at the target's access link and spoil both
      measurements, and the target's reply budget would be shared). A second
      pass (slots n..2n-1, the same square) gives every pair a spare slot
      that only a host that missed its first one uses.

  lwsweep.py run --schedule FILE --t0 UNIX_TIME --output FILE.jsonl
                 [--linkwidth PATH] [-- extra linkwidth options]
      On a vantage point: for each entry not yet done in FILE.jsonl, wait for
      its slot (t0 + slot x length; every host is handed the same t0 when the
      run starts), then `linkwidth sweep --resume` that one target with a
      per-target budget below the slot length. A slot already past (this
      host was late) is never started late (it would overlap the next
      holder of that target): the target waits for its spare slot in the
      second pass, or for the next run of the same command.
      Records already done in FILE.jsonl are skipped, so the same command run
      again after a failure or a cut-off resumes where it stopped.

  lwsweep.py merge --fetched DIR --output merged.jsonl --summary-dir DIR
      Reads DIR/HOST/sweep.jsonl, adds "vantage": HOST to every record, keeps
      the last record per (vantage, target, mode), and writes merged.jsonl,
      capacity.csv / availbw.csv (vantage x target, Mbit/s), heatmap.png, and
      failures.csv (error code, count, vantage:target list).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

MODES = ("capacity", "measure", "availbw", "hops")


def read_targets(path: str, default_mode: str) -> List[Tuple[str, str]]:
    """TARGET [MODE] per line, '#' comments, duplicates dropped (as linkwidth sweep)."""
    out: List[Tuple[str, str]] = []
    with open(path) as f:
        for n, line in enumerate(f, start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) > 2 or (len(parts) == 2 and parts[1] not in MODES):
                raise SystemExit(f"lwsweep: {path}:{n}: expected 'TARGET [MODE]', MODE one of "
                                 f"{', '.join(MODES)}")
            key = (parts[0], parts[1] if len(parts) == 2 else default_mode)
            if key not in out:
                out.append(key)
    if not out:
        raise SystemExit(f"lwsweep: {path}: no targets")
    return out


def make_schedule(hosts: List[str], targets: List[Tuple[str, str]],
                  split: str) -> Dict[str, List[Tuple[int, str, str]]]:
    """host -> [(slot, target, mode)]; no target in two hosts' same slot."""
    sched: Dict[str, List[Tuple[int, str, str]]] = {h: [] for h in hosts}
    if split == "split":
        for k, (t, m) in enumerate(targets):
            h = hosts[k % len(hosts)]
            sched[h].append((len(sched[h]), t, m))
        return sched
    n = max(len(hosts), len(targets))
    for s in range(n):
        for i, h in enumerate(hosts):
            k = (i + s) % n
            if k < len(targets):
                sched[h].append((s, targets[k][0], targets[k][1]))
    return sched


def cmd_schedule(a) -> int:
    hosts = [h for h in a.hosts.split(",") if h]
    if not hosts:
        raise SystemExit("lwsweep: no vantage hosts")
    targets = read_targets(a.targets, a.mode)
    if a.target_time >= a.slot:
        raise SystemExit("lwsweep: --target-time must be shorter than --slot")
    sched = make_schedule(hosts, targets, a.split)
    os.makedirs(a.out, exist_ok=True)
    n = 1 + max((s for e in sched.values() for s, _, _ in e), default=0)
    for h, entries in sched.items():
        spare = [(s + n, t, m) for s, t, m in entries]
        with open(os.path.join(a.out, f"{h}.schedule"), "w") as f:
            json.dump({"host": h, "slot_s": a.slot, "target_time_s": a.target_time,
                       "slots": 2 * n, "entries": [list(e) for e in entries + spare]}, f)
    print(json.dumps({"slots": 2 * n, "slot_s": a.slot, "budget_s": 2 * n * a.slot}))
    return 0


def done_keys(path: str) -> set:
    """(target, mode) of the finished records in a sweep file (as linkwidth
    sweep --resume counts them: not interrupted, not a privilege failure)."""
    keys = set()
    if not os.path.exists(path):
        return keys
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut off when the host was cut off
            sw = rec.get("sweep") if isinstance(rec, dict) else None
            if not isinstance(sw, dict):
                continue
            if sw.get("interrupted") or sw.get("exit_code") == 3:
                continue
            keys.add((sw.get("target"), sw.get("mode")))
    return keys


def cmd_run(a) -> int:
    with open(a.schedule) as f:
        sched = json.load(f)
    t0, slot = a.t0, float(sched["slot_s"])
    target_time = float(sched["target_time_s"])
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    late = set()
    for s, target, mode in sched["entries"]:
        if (target, mode) in done_keys(a.output):
            continue
        start = t0 + s * slot
        now = time.time()
        if now > start + a.tolerance:
            late.add((target, mode))  # never start late: the next holder may be on it
            continue
        if now < start:
            time.sleep(start - now)
        cmd = [a.linkwidth, "sweep", "--targets", "-", "--output", a.output, "--resume",
               "--mode", mode, "--target-time", f"{target_time:g}", "--quiet",
               "--summary", os.devnull] + a.extra
        p = subprocess.run(cmd, input=target + "\n", text=True, capture_output=True)
        if p.returncode not in (0, 1):  # 1 = this target failed: its record says why
            sys.stderr.write(p.stderr)
            return p.returncode
    late -= done_keys(a.output)  # caught up in a spare slot
    if late:
        late = sorted(t for t, _ in late)
        print(f"lwsweep: {len(late)} target(s) left for the next run (late): {' '.join(late)}",
              file=sys.stderr)
        return 4
    return 0


def load_records(fetched: str) -> List[dict]:
    merged: Dict[Tuple[str, str, str], dict] = {}
    for host in sorted(os.listdir(fetched)):
        path = os.path.join(fetched, host, "sweep.jsonl")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                sw = rec.get("sweep") if isinstance(rec, dict) else None
                if not isinstance(sw, dict):
                    continue
                rec["vantage"] = host
                merged[(host, sw.get("target"), sw.get("mode"))] = rec
    return list(merged.values())


def _mbps(v) -> str:
    return f"{v / 1e6:.3f}" if isinstance(v, (int, float)) else ""


def cmd_merge(a) -> int:
    recs = load_records(a.fetched)
    recs.sort(key=lambda r: (r["vantage"], r["sweep"].get("target"), r["sweep"].get("mode")))
    with open(a.output, "w") as f:
        for r in recs:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.makedirs(a.summary_dir, exist_ok=True)
    vantages = sorted({r["vantage"] for r in recs})
    targets = sorted({r["sweep"].get("target") for r in recs})
    cell = {(r["vantage"], r["sweep"].get("target")): r for r in recs}
    for field, name in (("capacity_bps", "capacity.csv"), ("availbw_bps", "availbw.csv")):
        with open(os.path.join(a.summary_dir, name), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["vantage \\ target (Mbit/s)"] + targets)
            for v in vantages:
                row = [v]
                for t in targets:
                    r = cell.get((v, t))
                    row.append(_mbps(r.get(field)) if r and not r.get("error") else
                               ("error:" + str(r["error"].get("code")) if r and
                                isinstance(r.get("error"), dict) else ""))
                w.writerow(row)
    fails: Dict[str, List[str]] = {}
    for r in recs:
        err = r.get("error")
        if isinstance(err, dict):
            fails.setdefault(str(err.get("code")), []).append(f"{r['vantage']}:{r['sweep'].get('target')}")
    with open(os.path.join(a.summary_dir, "failures.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["error_code", "count", "where"])
        for code in sorted(fails):
            w.writerow([code, len(fails[code]), " ".join(fails[code])])
    heat = os.path.join(a.summary_dir, "heatmap.png")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import math
        data = [[(cell[(v, t)].get("capacity_bps") or math.nan) / 1e6
                 if (v, t) in cell and not cell[(v, t)].get("error") else math.nan
                 for t in targets] for v in vantages]
        fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(targets), 1.2 + 0.6 * len(vantages)))
        im = ax.imshow(data, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(targets)), targets, rotation=30, ha="right")
        ax.set_yticks(range(len(vantages)), vantages)
        for y, v in enumerate(vantages):
            for x, t in enumerate(targets):
                r = cell.get((v, t))
                txt = ("-" if r is None else
                       r["error"].get("code", "error") if isinstance(r.get("error"), dict) else
                       f"{data[y][x]:.1f}")
                ax.text(x, y, txt, ha="center", va="center", fontsize=7, color="w")
        fig.colorbar(im, ax=ax, label="capacity, Mbit/s")
        ax.set_title("linkwidth: capacity per vantage point and target")
        fig.tight_layout()
        fig.savefig(heat, dpi=100)
        plt.close(fig)
    except ImportError:
        print("lwsweep: matplotlib not installed: no heat map", file=sys.stderr)
    print(json.dumps({"records": len(recs), "vantage_points": len(vantages),
                      "targets": len(targets), "failures": {k: len(v) for k, v in fails.items()}}))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="lwsweep.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("schedule")
    s.add_argument("--hosts", required=True)
    s.add_argument("--targets", required=True)
    s.add_argument("--mode", default="capacity", choices=MODES)
    s.add_argument("--split", default="all", choices=("all", "split"))
    s.add_argument("--slot", type=float, default=40.0)
    s.add_argument("--target-time", type=float, default=30.0)
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_schedule)
    r = sub.add_parser("run")
    r.add_argument("--schedule", required=True)
    r.add_argument("--t0", type=float, required=True, help="UNIX time of slot 0")
    r.add_argument("--output", required=True)
    r.add_argument("--linkwidth", default="linkwidth")
    r.add_argument("--tolerance", type=float, default=1.0,
                   help="seconds a slot may have begun before this host starts it")
    r.add_argument("extra", nargs="*", help="options for every measurement (after --)")
    r.set_defaults(func=cmd_run)
    m = sub.add_parser("merge")
    m.add_argument("--fetched", required=True)
    m.add_argument("--output", required=True)
    m.add_argument("--summary-dir", required=True)
    m.set_defaults(func=cmd_merge)
    a = ap.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
