#!/usr/bin/env python3
"""linkwidth's commands through long round trips (the lab's delay element).

Lab: prober --link 1 (unshaped, one-way delay RTT/2 each way, lw_delay)-- r1
--link 2 (50 Mbit/s)-- target. For each RTT (0 = no delay node, 100, 300 ms):

  capacity TARGET                       vs 50 Mbit/s at the IP layer (1500/1514)
  measure TARGET, UDP cross 20 Mbit/s   avail-bw vs capacity - cross measured
  availbw TARGET, same cross            on link 2's counters over the run
  hops TARGET                           bottleneck hop 2
  sweep (r1, target)                    both capacities

Per run: exit code, estimate and error, wall time and the CPU time linkwidth
used (user + sys of the child, from wait4), so a busy wait shows as CPU time
close to the wall time. The prober runs on CPU 0 and the cross traffic on CPU 1.

    flock /tmp/lw-lab.lock python3 scripts/bench_rtt.py [--rtts 0,100,300] [--runs 1]
        [--commands capacity,measure,availbw,hops,sweep] [--out results/rtt_benchmark]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("LINKWIDTH_BIN", os.path.join(ROOT, "build", "linkwidth"))
RATE, CROSS = 50e6, 20e6
PROBER_CPU, CROSS_CPU = 0, 1


def run_lw(L, args, timeout=300):
    """(exit code, JSON doc or None, wall s, cpu s, stderr)"""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = L.run_in_prober(["taskset", "-c", str(PROBER_CPU), BIN, *args], timeout=timeout)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        doc = None
    return p.returncode, doc, wall, cpu, (p.stderr or "").strip()[-300:]


def one(L, cmd, tmp):
    truth_cap = L.ground_truth_capacity(ip_len=1500)
    row = {"command": cmd}
    if cmd == "capacity":
        code, doc, wall, cpu, err = run_lw(L, ["capacity", L.target_ip, "--json"])
        est = doc.get("capacity_bps") if doc else None
        row |= {"truth_bps": truth_cap, "estimate_bps": est}
    elif cmd in ("measure", "availbw"):
        x = L.cross(2, "udp", rate=CROSS * 1472 / 1500, cpu=CROSS_CPU)
        try:
            time.sleep(0.5)
            w = L.cross_window(2)
            code, doc, wall, cpu, err = run_lw(L, [cmd, L.target_ip, "--json"])
            cross = w.stop().bps
        finally:
            x.stop()
        est = doc.get("availbw_bps") if doc else None
        row |= {"truth_bps": truth_cap - cross, "estimate_bps": est,
                "capacity_bps": doc.get("capacity_bps") if doc else None}
    elif cmd == "hops":
        code, doc, wall, cpu, err = run_lw(L, ["hops", L.target_ip, "--json"])
        row |= {"bottleneck_hop": doc.get("bottleneck_hop") if doc else None, "truth_hop": 2}
        est = None
    elif cmd == "sweep":
        targets = os.path.join(tmp, "targets.txt")
        out = os.path.join(tmp, "sweep.jsonl")
        if os.path.exists(out):
            os.unlink(out)
        with open(targets, "w") as f:
            f.write(f"{L.node_ip(1)}\n{L.target_ip}\n")
        code, _, wall, cpu, err = run_lw(L, ["sweep", "--targets", targets, "--output", out])
        recs = []
        if os.path.exists(out):
            with open(out) as f:
                recs = [json.loads(line) for line in f if line.strip()]
        doc = {"records": [{k: r.get(k) for k in ("target", "capacity_bps", "error", "elapsed_s")}
                           for r in recs]}
        est = recs[-1].get("capacity_bps") if recs else None
        row |= {"truth_bps": truth_cap, "estimate_bps": est}
    row |= {"exit_code": code, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
    if row.get("estimate_bps") and row.get("truth_bps"):
        row["error"] = round(row["estimate_bps"] / row["truth_bps"] - 1, 4)
    if doc:
        row["rtt_s"] = doc.get("rtt_s")
        row["error_doc"] = doc.get("error")
        row["warnings"] = [w.get("code") for w in doc.get("warnings", []) if isinstance(w, dict)]
        row["stop_reason"] = doc.get("stop_reason")
        row["trains"] = {k: v for k, v in (
            ("capacity", doc.get("trains_sent") or (doc.get("capacity") or {}).get("trains_sent")),
            ("availbw", sum(len(r.get("trains", [])) for r in doc.get("rates", [])) or None),
            ("hops", doc.get("trains_sent") if cmd == "hops" else None)) if v}
        if cmd == "sweep":
            row["records"] = doc["records"]
    if code != 0:
        row["stderr"] = err
    return row, doc


def markdown(rows, cmd, load, binary=BIN):
    out = ["# linkwidth through long round trips", "", f"Command: `{cmd}`", "",
           f"Binary: `{binary}`. Lab: prober -(unshaped, lw_delay RTT/2 each way; RTT 0: no delay "
           "element, the veth path's own ~0.1 ms)- r1 -(50 Mbit/s)- "
           "target; measure/availbw under 20 Mbit/s UDP cross traffic on link 2. CPU = user+sys "
           f"of linkwidth. Load average at start / end: {load[0]:.1f} / {load[1]:.1f}.", "",
           "| RTT ms | command | runs | exit codes | median error | errors | median wall s | "
           "median CPU s | notes |", "|---|---|---|---|---|---|---|---|---|"]
    keys = []
    for r in rows:
        k = (r["rtt_ms"], r["command"])
        if k not in keys:
            keys.append(k)
    base = {}
    lowest = min(k[0] for k in keys)
    for k in keys:
        rs = [r for r in rows if (r["rtt_ms"], r["command"]) == k]
        errs = [r["error"] for r in rs if "error" in r]
        wall = statistics.median(r["wall_s"] for r in rs)
        if k[0] == lowest:
            base[k[1]] = wall
        ratio = (f" ({wall / base[k[1]]:.1f}x RTT {lowest})"
                 if k[1] in base and k[0] != lowest else "")
        notes = set()
        for r in rs:
            if r.get("error_doc"):
                notes.add(r["error_doc"].get("code", "?"))
            if r["command"] == "hops":
                notes.add(f"bottleneck hop {r.get('bottleneck_hop')}")
            for w in r.get("warnings") or []:
                notes.add(w)
        out.append(f"| {k[0]} | {k[1]} | {len(rs)} | {','.join(str(r['exit_code']) for r in rs)} | "
                   + (f"{statistics.median(errs):+.1%}" if errs else "") + " | "
                   + " ".join(f"{e:+.1%}" for e in errs) + f" | {wall:.1f}{ratio} | "
                   f"{statistics.median(r['cpu_s'] for r in rs):.2f} | {', '.join(sorted(notes))} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rtts", default="0,100,300")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--commands", default="capacity,measure,availbw,hops,sweep")
    ap.add_argument("--out", default=None)
    ap.add_argument("--render", metavar="JSON", help="rewrite JSON's markdown beside it, no lab")
    a = ap.parse_args()
    if a.render:
        with open(a.render) as f:
            d = json.load(f)
        rows = [r for r in d["rows"] if r["command"] != "lw_delay"]
        md = markdown(rows, d["command"], d["loadavg_start_end"], d.get("binary", BIN))
        with open(a.render[:-len(".json")] + ".md", "w") as f:
            f.write(md)
        print(md)
        return
    rows = []
    if a.out and os.path.isdir(a.out + "_runs"):
        shutil.rmtree(a.out + "_runs")  # no document of an earlier run stays beside these rows
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lw-benchrtt-") as tmp:
        for rtt in (float(x) for x in a.rtts.split(",")):
            rtt = int(rtt) if rtt == int(rtt) else rtt
            spec = lab.Spec(links=[lab.Link(rate=None, delay_ms=rtt / 2 or None),
                                   lab.Link(rate=RATE)], delay_cpu=CROSS_CPU)
            with lab.Lab(spec) as L:
                for cmd in a.commands.split(","):
                    for i in range(a.runs):
                        r, doc = one(L, cmd, tmp)
                        r |= {"rtt_ms": rtt}
                        if a.out and doc:  # every document, so an outlier can be read later
                            os.makedirs(a.out + "_runs", exist_ok=True)
                            name = f"rtt{rtt}_{cmd}_{i + 1}.json"
                            with open(os.path.join(a.out + "_runs", name), "w") as f:
                                json.dump(doc, f, indent=1)
                            r["document"] = os.path.basename(a.out) + "_runs/" + name
                        rows.append(r)
                        print(json.dumps(r), flush=True)
                if rtt:
                    st = L.stop_delays().get(1, {})
                    rows.append({"rtt_ms": rtt, "command": "lw_delay", "stats": st,
                                 "wall_s": 0, "cpu_s": 0, "exit_code": 0})
    rows_cmd = [r for r in rows if r["command"] != "lw_delay"]
    cmd = "python3 scripts/bench_rtt.py " + " ".join(sys.argv[1:])
    load = (load0, os.getloadavg()[0])
    md = markdown(rows_cmd, cmd, load)
    if a.out:
        with open(a.out + ".json", "w") as f:
            json.dump({"command": cmd, "binary": BIN, "loadavg_start_end": load, "rows": rows},
                      f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write(md)
    print(md)


if __name__ == "__main__":
    main()
