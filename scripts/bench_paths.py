#!/usr/bin/env python3
"""Random-path benchmark: `linkwidth measure` on seeded random lab paths.

Each path is a chain prober --l1-- r1 --l2-- ... --lN-- target (N = 1..5
links, every link shaped by tbf or htb at 5 Mbit/s..1 Gbit/s, queue 10..200 ms
of its rate) with cross traffic on a random subset of links. Cross traffic on
link i runs from host xs{i} (on node i-1) to xr{i} (on node i), so it crosses
exactly link i; on link 1 xs{i} hangs off the prober's own namespace and its
packets leave through the same shaped `dn` qdisc as our probes (a shaped
uplink shared with other applications). Kinds: `cbr` (iperf3 constant-rate
UDP), `poisson` (lw_crossgen: Poisson departures, IP sizes 1500/576/64 B at
40/20/40 %), `onoff` (lw_crossgen on/off: Pareto on and off periods, shape 1.5,
Poisson departures at the peak rate while on), `tcp` (iperf3 cubic, throttled
with -b to the planned rate).

The generator plans where the tight link is (the prober's own link 1 in part
of the paths, a remote link otherwise; a link other than the narrow one in
part of them), but the ground truth is taken from the lab itself, per run:

* capacity = min over links of the configured IP-layer capacity R x 1500/1514
  (the narrow link; its rate is at least 15 % below every other link's);
* cross traffic X_i = IP-layer bit/s received by xr{i} (interface counters)
  DURING the `measure` run;
* avail-bw = min over links of (C_i - X_i), the tight link its argmin;
* bottleneck hop = the narrow link's index (the tight one is recorded too).

`linkwidth measure TARGET --json` (hops phase included) runs pinned to CPU 0,
every cross-traffic sender pinned to CPU 1. On every --iperf-every'th path an
iperf3 TCP cubic flow (5 s, pinned to CPU 0) runs after it under the same
cross traffic, with its own truth window. One path at a time; each lab is
built and torn down per path (also on failure and Ctrl-C); with --lock the
flock is held around each path.

Writes OUT/paths_benchmark.{csv,json,md} (rewritten after every path, so an
interrupted run keeps what it measured), OUT/paths_runs/pathNNN.json (the
path, its truth and counters, and linkwidth's document) and the plots
OUT/paths_error_vs_util.png, OUT/paths_worst_*.png. Reads only linkwidth's
and iperf3's JSON output.

    python3 scripts/bench_paths.py --seed 1 --paths 60 --iperf-every 4 --lock /tmp/lw-lab.lock
"""
import argparse
import contextlib
import csv
import datetime
import json
import math
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402
from benchlib import CROSS_CPU, PROBER_CPU, held, pinned  # noqa: E402

M = 1e6
KINDS = ("cbr", "poisson", "onoff", "tcp")
LAB_KIND = {"cbr": "udp", "poisson": "bursty", "onoff": "onoff", "tcp": "tcp"}
NARROW_RATE = (5e6, 200e6)     # the narrow link (L2 rate); above ~300M tbf is timer-bound here
LINK_MAX = 1e9
MARGIN = 1.15                  # narrow unique by this factor; planned tight by this factor
QUEUE_MS = (10.0, 200.0)
# Cross traffic one sender can produce on CPU 1 (IP-layer bit/s), and all of
# them together: a plan above it is capped (the truth is measured anyway).
CROSS_CAP = 250e6
CROSS_TOTAL_CAP = 400e6
IPERF_PORT = 5299


# --------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------

def _logu(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _link(rng, rate, quick):
    q_ms = _logu(rng, *QUEUE_MS)
    return {
        "rate_bps": round(rate), "shaper": rng.choice(("tbf", "htb")),
        "queue_ms": round(q_ms, 1),
        "limit_bytes": max(2 * (lab.MTU + lab.ETH_HDR), int(rate * q_ms / 1e3 / 8)),
        # A bucket of two frames is timer-bound above ~300 Mbit/s on this VM
        # (lab.py notes: 1 Gbit/s tbf with burst 3028 gives ~65 %); four frames
        # give ~99 %.
        "burst_bytes": 2 * (lab.MTU + lab.ETH_HDR) if rate <= 300e6 else 4 * (lab.MTU + lab.ETH_HDR),
    }


def _cross(rng, link, ip_bps, cap_bps, kinds):
    kind = rng.choice(kinds)
    c = {"link": link, "kind": kind, "planned_bps": round(ip_bps), "seed": rng.randrange(1 << 30)}
    if kind == "onoff":
        duty = rng.uniform(0.3, 0.7)
        duty = min(1.0, max(duty, ip_bps / (0.95 * cap_bps)))   # peak at most 95 % of C
        cycle = rng.uniform(0.05, 0.2)
        c.update(on_s=round(duty * cycle, 4), off_s=round((1 - duty) * cycle, 4), alpha=1.5)
    return c


def gen_path(seed, idx, quick=False):
    """Path number idx of seed `seed` (the same whatever --paths is)."""
    rng = random.Random(f"linkwidth-paths-{seed}-{idx}")
    n = rng.randint(1, 2) if quick else rng.randint(1, 5)
    kinds = ("cbr", "poisson") if quick else KINDS
    lo, hi = (20e6, 50e6) if quick else NARROW_RATE
    top = 100e6 if quick else LINK_MAX
    local = n == 1 or rng.random() < 0.25
    differ = n >= 2 and rng.random() < 0.4          # tight != narrow
    if local:
        tight = 1
        narrow = 1 if not differ else rng.randint(2, n)
    else:
        tight = rng.randint(2, n)
        narrow = tight if not differ else rng.choice([i for i in range(1, n + 1) if i != tight])
    cn = _logu(rng, lo, hi)
    rates = {narrow: cn}
    # Utilisation of the narrow link.
    if tight == narrow:
        u_n = 0.0 if rng.random() < 0.1 else rng.uniform(0.05, 0.9)
        if quick:
            u_n = rng.uniform(0.3, 0.6)
    else:
        u_n = 0.0 if rng.random() < 0.3 else rng.uniform(0.05, 0.5)
    cap = lambda r: lab.ip_capacity(r)  # noqa: E731
    x = {narrow: u_n * cap(cn)} if u_n > 0 else {}
    a_n = cap(cn) - x.get(narrow, 0.0)
    a_t = a_n
    if tight != narrow:
        # Its avail-bw below the narrow link's, its utilisation drawn (it
        # sets the tight link's rate), the rate at least 1.2 x the narrow's.
        a_t = rng.uniform(0.5, 1 / MARGIN) * a_n
        u_t = rng.uniform(0.1, 0.9)
        ct = min(max(a_t / (1 - u_t) * 1514 / 1500, 1.2 * cn), top)
        a_t = max(a_t, 0.1 * cap(ct))                # at most 90 % utilisation
        if cap(ct) - a_t > CROSS_CAP:                # the sender could not make it
            ct = (CROSS_CAP + a_t) * 1514 / 1500
        rates[tight] = ct
        x[tight] = cap(ct) - a_t
    for i in range(1, n + 1):
        if i in rates:
            continue
        rates[i] = _logu(rng, MARGIN * cn, top)
        if not quick and rng.random() < 0.4:
            room = min(cap(rates[i]) - MARGIN * a_t, 0.9 * cap(rates[i]), CROSS_CAP)
            if room > 0:
                x[i] = rng.uniform(0.05, 1.0) * room
    # All senders share CPU 1: cap the total, the links that are not tight first.
    excess = sum(x.values()) - CROSS_TOTAL_CAP
    for i in sorted(x, key=lambda i: i == tight):
        if excess <= 0:
            break
        cut = min(excess, x[i] if i != tight else max(0.0, x[i] - 1e6))
        x[i] -= cut
        excess -= cut
    links = [_link(rng, rates[i], quick) for i in range(1, n + 1)]
    cross = [_cross(rng, i, x[i], cap(rates[i]), kinds) for i in sorted(x) if x[i] >= 0.5e6]
    return {"index": idx, "seed": seed, "n_links": n, "links": links,
            "planned_narrow": narrow, "planned_tight": tight, "cross": cross}


# --------------------------------------------------------------------------
# one path in the lab
# --------------------------------------------------------------------------

def start_cross(L, c):
    kind, bps, cpu = LAB_KIND[c["kind"]], c["planned_bps"], CROSS_CPU
    if kind == "udp":       # iperf3 -b counts UDP payload: 1472 of every 1500 IP bytes
        return L.cross(c["link"], "udp", rate=bps * 1472 / 1500, cpu=cpu)
    if kind == "tcp":       # -b counts TCP payload: 1448 of every 1500 IP bytes
        return L.cross(c["link"], "tcp", rate=bps * 1448 / 1500, cpu=cpu)
    if kind == "onoff":
        return L.cross(c["link"], "onoff", rate=bps, on_s=c["on_s"], off_s=c["off_s"],
                       alpha=c["alpha"], seed=c["seed"], cpu=cpu)
    return L.cross(c["link"], "bursty", rate=bps, seed=c["seed"], cpu=cpu)


class Window:
    """Counter windows over one interval: cross traffic received by every
    xr{i} and bytes/drops on every link's shaped interface."""

    def __init__(self, L, cross_links):
        self.L, self.cross_links = L, list(cross_links)

    def start(self):
        self.w = {i: self.L.cross_window(i) for i in self.cross_links}
        self.l0 = {i: self.L.link_counters(i) for i in range(1, self.L.n + 1)}
        self.q0 = {i: self.L.qdisc_stats(i) for i in range(1, self.L.n + 1)}
        self.t0 = time.monotonic()
        return self

    def stop(self):
        t1 = time.monotonic()
        cross = {i: w.stop().bps for i, w in self.w.items()}
        out = {"seconds": t1 - self.t0, "links": []}
        for i in range(1, self.L.n + 1):
            c1, q1 = self.L.link_counters(i), self.L.qdisc_stats(i)
            d = {k: c1[k] - self.l0[i][k] for k in ("tx_bytes", "tx_packets")}
            out["links"].append({
                "link": i, "cross_bps": cross.get(i, 0.0),
                "cross_counted": i in cross,
                # everything that left through link i's shaper (probes + cross), IP layer
                "link_tx_bps": (d["tx_bytes"] - lab.ETH_HDR * d["tx_packets"]) * 8 / out["seconds"],
                "qdisc_drops": q1.get("drops", 0) - self.q0[i].get("drops", 0),
            })
        return out


SAMPLER = r"""
import sys, time
base = "/sys/class/net/eth0/statistics/"
fb, fp = open(base + "rx_bytes"), open(base + "rx_packets")
while True:
    fb.seek(0); fp.seek(0)
    print(f"{time.monotonic():.6f} {fb.read().strip()} {fp.read().strip()}", flush=True)
    time.sleep(0.1)
"""


class Sampler:
    """Cross traffic per link sampled every 0.1 s during one run (a small
    reader of xr{i}'s counters inside its namespace, pinned to the cross
    traffic's CPU), so the truth can be taken over any part of the run: the
    avail-bw phase's own interval (truth_over)."""

    def __init__(self, L, cross_links):
        self.procs = {}
        for i in cross_links:
            self.procs[i] = subprocess.Popen(
                ["ip", "netns", "exec", L.ns(f"xr{i}"), "taskset", "-c", str(CROSS_CPU),
                 sys.executable, "-c", SAMPLER], stdout=subprocess.PIPE, text=True)

    def stop(self):
        """{link: [(monotonic s, cumulative IP-layer bytes)]}"""
        out = {}
        for i, p in self.procs.items():
            p.terminate()
            try:
                text, _ = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            pts = []
            for line in text.splitlines():
                f = line.split()
                if len(f) == 3:
                    pts.append((float(f[0]), int(f[1]) - lab.ETH_HDR * int(f[2])))
            out[i] = pts
        return out


def _at(pts, t):
    """Cumulative bytes at time t, linear between samples (None outside them)."""
    for (t0, b0), (t1, b1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b0
    return None


def truth_over(links, samples, t0, t1):
    """truth_from over [t0, t1] (monotonic s) from the Sampler's samples, or
    None when a link's samples do not cover it."""
    if not (t1 - t0 > 0.5):
        return None
    xs = []
    for i in range(1, len(links) + 1):
        if i not in samples:
            xs.append(0.0)
            continue
        a, b = _at(samples[i], t0), _at(samples[i], t1)
        if a is None or b is None:
            return None
        xs.append(8 * (b - a) / (t1 - t0))
    window = {"links": [{"cross_bps": x} for x in xs]}
    return truth_from(links, window)


def held_ip_capacity(rate_bps):
    """The IP-layer capacity of a link configured at rate_bps, at the rate the
    kernel holds: tbf and htb keep whole bytes per second (115544323 bit/s is
    enforced as 115544320), the rate `linkwidth` reads from its own qdisc.
    (With the configured one an exact estimate of our own shaper's rate, its
    range ending at it, missed the truth by 3 bit/s: path 48 at f20f70a.)"""
    return lab.ip_capacity(8 * (int(round(rate_bps)) // 8))


def truth_from(links, window):
    """Ground truth from configured capacities (held_ip_capacity) and the
    counter window."""
    caps = [held_ip_capacity(l["rate_bps"]) for l in links]
    xs = [w["cross_bps"] for w in window["links"]]
    avail = [c - x for c, x in zip(caps, xs)]
    narrow = min(range(len(caps)), key=lambda i: caps[i]) + 1
    tight = min(range(len(avail)), key=lambda i: avail[i]) + 1
    return {"capacity_bps": caps[narrow - 1], "narrow_link": narrow,
            "availbw_bps": avail[tight - 1], "tight_link": tight,
            "tight_capacity_bps": caps[tight - 1],
            "tight_util": xs[tight - 1] / caps[tight - 1],
            "max_util": max(x / c for c, x in zip(caps, xs)),
            "link_capacity_bps": caps, "link_cross_bps": xs, "link_avail_bps": avail}


def run_measure(L, binary, max_time, extra, cross_links):
    cmd = pinned([binary, "measure", L.target_ip, "--json", "--max-time", f"{max_time:g}",
                  *extra], PROBER_CPU)
    sampler = Sampler(L, cross_links)
    try:
        time.sleep(0.3)  # the samplers' first readings
        win = Window(L, cross_links).start()
        t0 = time.monotonic()
        try:
            p = L.exec("prober", cmd, timeout=3 * max_time + 60)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            code, out, err = "timeout", "", "timed out"
        t_exit = time.monotonic()
        wall = t_exit - t0
        # Debugging aid: LW_BENCH_STDERR=DIR keeps each run's stderr (with
        # --tool-args=-v, the tool's trace) as DIR/<target>-<time>.err.
        if os.environ.get("LW_BENCH_STDERR"):
            d = os.environ["LW_BENCH_STDERR"]
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"{L.target_ip}-{int(time.time())}.err"), "w") as fh:
                fh.write(err or "")
        window = win.stop()
        time.sleep(0.3)
    finally:
        samples = sampler.stop()
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {"error": {"code": "no_json", "message": (err or "").strip()[:300]}}
    # The avail-bw phase is measure's last: it ended when the process did
    # (its JSON written a few ms later at most).
    window["availbw_phase"] = None
    ae = doc.get("availbw_elapsed_s")
    if isinstance(ae, (int, float)) and ae > 0:
        window["availbw_phase"] = {"t0": t_exit - ae, "t1": t_exit}
    window["samples"] = {str(i): pts for i, pts in samples.items()}
    return code, doc, window, wall


def run_iperf(L, seconds, cross_links):
    """iperf3 TCP cubic prober -> target: goodput and its own truth window."""
    srv = L.popen("target", ["iperf3", "-s", "-1", "-p", str(IPERF_PORT)])
    out = {"bps": None, "window": None}
    try:
        time.sleep(0.5)
        win = Window(L, cross_links).start()
        p = L.exec("prober", pinned(["iperf3", "-c", L.target_ip, "-p", str(IPERF_PORT), "-t",
                                     str(seconds), "-C", "cubic", "-J"], PROBER_CPU),
                   timeout=seconds + 30)
        out["window"] = win.stop()
        out["bps"] = json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"]
    except (ValueError, KeyError, subprocess.TimeoutExpired):
        pass
    finally:
        L.stop_process(srv)
    return out


def _num(x):
    return "" if x is None else x


def run_path(path, args, runs_dir):
    links = [lab.Link(rate=l["rate_bps"], shaper=l["shaper"], limit=l["limit_bytes"],
                      burst=l["burst_bytes"]) for l in path["links"]]
    cross_links = [c["link"] for c in path["cross"]]
    iperf = args.iperf_every > 0 and path["index"] % args.iperf_every == 0
    rec = {"path": path, "started": datetime.datetime.now().isoformat(timespec="seconds")}
    t_wait = time.monotonic()
    with held("" if args.lock_whole_run else args.lock), \
            lab.Lab(lab.Spec(links=links, cross_links=cross_links)) as L:
        t_path = time.monotonic()      # the lab is built: lock wait and build apart
        rec["lock_and_build_s"] = t_path - t_wait
        gens = []
        try:
            for c in path["cross"]:
                gens.append(start_cross(L, c))
            time.sleep(args.settle)
            code, doc, window, wall = run_measure(L, args.bin, args.max_time,
                                                  shlex.split(args.tool_args), cross_links)
            rec.update(exit=code, wall_s=wall, window=window, doc=doc)
            if iperf:
                rec["iperf3"] = run_iperf(L, args.iperf_seconds, cross_links)
        finally:
            for g in gens:
                try:
                    g.stop()
                except Exception:
                    pass
    rec["path_wall_s"] = time.monotonic() - t_path   # cross traffic start .. lab torn down
    rec["truth"] = truth_from(path["links"], rec["window"])
    ph = rec["window"].get("availbw_phase")
    rec["truth_availbw_phase"] = None if not ph else truth_over(
        path["links"], {int(k): v for k, v in rec["window"].get("samples", {}).items()},
        ph["t0"], ph["t1"])
    if rec.get("iperf3", {}).get("window"):
        rec["iperf3"]["truth"] = truth_from(path["links"], rec["iperf3"]["window"])
    with open(os.path.join(runs_dir, f"path{path['index']:03d}.json"), "w") as f:
        json.dump(rec, f, separators=(",", ":"))
    return rec


def row_of(rec):
    p, t, d = rec["path"], rec["truth"], rec["doc"]
    n = p["n_links"]
    kinds = {c["link"]: c["kind"] for c in p["cross"]}
    cap, clo, chi = d.get("capacity_bps"), d.get("capacity_low_bps"), d.get("capacity_high_bps")
    av, alo, ahi = d.get("availbw_bps"), d.get("availbw_low_bps"), d.get("availbw_high_bps")
    hop, early = d.get("bottleneck_hop"), d.get("bottleneck_earliest_hop")
    tight_util = t["tight_util"]
    tp = rec.get("truth_availbw_phase")
    band = "0-30" if tight_util < 0.3 else "30-60" if tight_util < 0.6 else "60-90"
    r = {
        "path": p["index"], "n_links": n,
        "rates_mbps": " ".join(f"{l['rate_bps'] / M:.1f}" for l in p["links"]),
        "shapers": " ".join(l["shaper"] for l in p["links"]),
        "queues_ms": " ".join(f"{l['queue_ms']:.0f}" for l in p["links"]),
        "cross": " ".join(f"{c['link']}:{c['kind']}" for c in p["cross"]) or "none",
        "planned_narrow": p["planned_narrow"], "planned_tight": p["planned_tight"],
        "narrow_link": t["narrow_link"], "tight_link": t["tight_link"],
        "tight_local": int(t["tight_link"] == 1), "tight_is_narrow": int(t["tight_link"] == t["narrow_link"]),
        "tight_util": round(tight_util, 4), "util_band": band,
        "max_util": round(t["max_util"], 4), "tight_kind": kinds.get(t["tight_link"], "none"),
        "link_cross_mbps": " ".join(f"{x / M:.2f}" for x in t["link_cross_bps"]),
        "planned_cross_mbps": " ".join(f"{c['link']}:{c['planned_bps'] / M:.2f}" for c in p["cross"]),
        "qdisc_drops": " ".join(str(w["qdisc_drops"]) for w in rec["window"]["links"]),
        "window_s": round(rec["window"]["seconds"], 3),
        "exit": rec["exit"], "error": (d.get("error") or {}).get("code", ""),
        "capacity_truth_bps": round(t["capacity_bps"]), "capacity_bps": _num(cap),
        "capacity_low_bps": _num(clo), "capacity_high_bps": _num(chi),
        "capacity_err_pct": "" if not cap else round(100 * (cap / t["capacity_bps"] - 1), 3),
        "capacity_range_holds": "" if not cap or clo is None or chi is None
        else int(clo <= t["capacity_bps"] <= chi),
        "availbw_truth_bps": round(t["availbw_bps"]), "availbw_bps": _num(av),
        "availbw_low_bps": _num(alo), "availbw_high_bps": _num(ahi),
        "availbw_err_pct": "" if av is None or t["availbw_bps"] <= 0
        else round(100 * (av / t["availbw_bps"] - 1), 3),
        "availbw_range_holds": "" if av is None or alo is None or ahi is None
        else int(alo <= t["availbw_bps"] <= ahi),
        "availbw_phase_truth_bps": "" if not tp else round(tp["availbw_bps"]),
        "availbw_phase_err_pct": "" if av is None or not tp or tp["availbw_bps"] <= 0
        else round(100 * (av / tp["availbw_bps"] - 1), 3),
        "availbw_phase_range_holds": "" if av is None or alo is None or ahi is None or not tp
        else int(alo <= tp["availbw_bps"] <= ahi),
        "tight_link_capacity_bps": _num(d.get("tight_link_capacity_bps")),
        "tight_capacity_truth_bps": round(t["tight_capacity_bps"]),
        "bottleneck_hop": _num(hop), "bottleneck_earliest_hop": _num(early),
        "hop_right": "" if hop is None else int(hop == t["narrow_link"]),
        "hop_err": "" if hop is None else abs(hop - t["narrow_link"]),
        "hop_range_holds": "" if hop is None
        else int((early or hop) <= t["narrow_link"] <= hop),
        "hop_is_tight": "" if hop is None else int(hop == t["tight_link"]),
        "elapsed_s": _num(d.get("elapsed_s")), "wall_s": round(rec["wall_s"], 3),
        "availbw_elapsed_s": _num(d.get("availbw_elapsed_s")),
        "capacity_elapsed_s": _num(d.get("capacity_elapsed_s")),
        "probe_bytes": _num(d.get("probe_bytes")),
        "stop_reason": d.get("stop_reason", ""), "hops_stop_reason": d.get("hops_stop_reason", ""),
        "warnings": " ".join(w.get("code", "") for w in d.get("warnings", [])),
        "iperf3_bps": "", "iperf3_truth_bps": "", "iperf3_err_pct": "",
        "path_wall_s": round(rec["path_wall_s"], 2),
    }
    ip = rec.get("iperf3")
    if ip:
        r["iperf3_bps"] = _num(ip.get("bps"))
        if ip.get("truth"):
            r["iperf3_truth_bps"] = round(ip["truth"]["availbw_bps"])
            if ip.get("bps") is not None and ip["truth"]["availbw_bps"] > 0:
                r["iperf3_err_pct"] = round(100 * (ip["bps"] / ip["truth"]["availbw_bps"] - 1), 3)
    return r


FIELDS = list(row_of({
    "path": {"index": 0, "n_links": 1, "links": [{"rate_bps": 1, "shaper": "", "queue_ms": 0}],
             "cross": [], "planned_narrow": 1, "planned_tight": 1},
    "truth": {"capacity_bps": 1, "narrow_link": 1, "availbw_bps": 1, "tight_link": 1,
              "tight_capacity_bps": 1, "tight_util": 0, "max_util": 0, "link_cross_bps": [0]},
    "window": {"seconds": 1, "links": [{"qdisc_drops": 0}]}, "doc": {}, "exit": 0,
    "wall_s": 0, "path_wall_s": 0}).keys())


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def pct(xs, q):
    """Nearest-rank percentile of xs (q in 0..100)."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)] if xs else None


def summary(rows):
    """Per-estimate numbers for a set of rows (a class)."""
    def errs(key):
        return [abs(r[key]) for r in rows if r[key] != ""]

    def holds(key):
        v = [r[key] for r in rows if r[key] != ""]
        return sum(v), len(v)

    s = {"paths": len(rows)}
    for est in ("capacity", "availbw", "availbw_phase"):
        e = errs(f"{est}_err_pct")
        # A path without an estimate (or without a range) counts as a miss:
        # the denominator of range_holds is every path.
        s[est] = {"estimates": len(e),
                  "median_abs_err_pct": statistics.median(e) if e else None,
                  "p90_abs_err_pct": pct(e, 90), "worst_abs_err_pct": max(e) if e else None,
                  "range_holds": holds(f"{est}_range_holds")[0], "ranges": len(rows)}
    he = errs("hop_err")
    s["hop"] = {"estimates": len(he), "right": holds("hop_right")[0],
                "median_abs_err_hops": statistics.median(he) if he else None,
                "p90_abs_err_hops": pct(he, 90), "worst_abs_err_hops": max(he) if he else None,
                "range_holds": holds("hop_range_holds")[0],
                "names_tight": holds("hop_is_tight")[0]}
    t = [r["elapsed_s"] for r in rows if r["elapsed_s"] != ""]
    b = [r["probe_bytes"] for r in rows if r["probe_bytes"] != ""]
    s["time_s"] = {"median": statistics.median(t) if t else None, "p90": pct(t, 90),
                   "max": max(t) if t else None}
    ph = [r["capacity_elapsed_s"] + r["availbw_elapsed_s"] for r in rows
          if r["capacity_elapsed_s"] != "" and r["availbw_elapsed_s"] != ""]
    s["phases_time_s"] = {"median": statistics.median(ph) if ph else None, "p90": pct(ph, 90),
                          "max": max(ph) if ph else None}
    s["probe_bytes"] = {"median": statistics.median(b) if b else None, "p90": pct(b, 90),
                        "max": max(b) if b else None}
    ie = [abs(r["iperf3_err_pct"]) for r in rows if r["iperf3_err_pct"] != ""]
    le = [abs(r["availbw_err_pct"]) for r in rows
          if r["iperf3_err_pct"] != "" and r["availbw_err_pct"] != ""]
    s["iperf3"] = {"runs": len(ie), "median_abs_err_pct": statistics.median(ie) if ie else None,
                   "p90_abs_err_pct": pct(ie, 90), "worst_abs_err_pct": max(ie) if ie else None,
                   "linkwidth_same_paths_median_abs_err_pct":
                   statistics.median(le) if le else None}
    return s


CLASSES = [
    ("tight link", lambda r: "local (link 1)" if r["tight_local"] else "remote"),
    ("tight vs narrow", lambda r: "tight = narrow" if r["tight_is_narrow"] else "tight ≠ narrow"),
    ("tight-link utilisation %", lambda r: r["util_band"]),
    ("cross traffic on the tight link", lambda r: r["tight_kind"]),
    ("links", lambda r: str(r["n_links"])),
    ("narrow link shaper", lambda r: r["shapers"].split()[r["narrow_link"] - 1]),
]


def classes(rows):
    out = {}
    for name, key in CLASSES:
        groups = {}
        for r in rows:
            groups.setdefault(key(r), []).append(r)
        out[name] = {k: summary(v) for k, v in sorted(groups.items())}
    return out


def _f(x, d=1, suffix=""):
    return "–" if x is None else f"{x:.{d}f}{suffix}"


def sig(x):
    return "–" if x == "" else f"{x:+.1f}%"


def _frac(a, b):
    return "–" if not b else f"{a}/{b}"


def table_rows(label, s):
    c, a, h, ip = s["capacity"], s["availbw"], s["hop"], s["iperf3"]
    return (f"| {label} | {s['paths']} | {c['estimates']} / {a['estimates']} "
            f"| {_f(c['median_abs_err_pct'], 2)} | {_f(c['p90_abs_err_pct'], 2)} "
            f"| {_f(c['worst_abs_err_pct'], 1)} | {_frac(c['range_holds'], c['ranges'])} "
            f"| {_f(a['median_abs_err_pct'], 1)} | {_f(a['p90_abs_err_pct'], 1)} "
            f"| {_f(a['worst_abs_err_pct'], 0)} | {_frac(a['range_holds'], a['ranges'])} "
            f"| {_frac(h['right'], s['paths'])} | {_frac(h['range_holds'], s['paths'])} "
            f"| {_f(s['time_s']['median'], 1)} | {_f(s['time_s']['p90'], 1)} "
            f"| {_f((s['probe_bytes']['median'] or 0) / 1e6 if s['probe_bytes']['median'] else None, 2)} "
            f"| {_f(ip['median_abs_err_pct'], 1)} ({ip['runs']}) "
            f"| {_f(ip['linkwidth_same_paths_median_abs_err_pct'], 1)} |")


HEADER = ("| class | paths | estimates cap. / avail | cap. median \\|err\\| % | cap. p90 % "
          "| cap. worst % | cap. range holds "
          "| avail median \\|err\\| % | avail p90 % | avail worst % | avail range holds "
          "| hop right | hop range holds | median time s | p90 time s | median probe MB "
          "| iperf3 median \\|err\\| % (runs) | linkwidth avail median \\|err\\| % on those paths |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def overall_table(s):
    c, a, h, ip = s["capacity"], s["availbw"], s["hop"], s["iperf3"]
    ap = s["availbw_phase"]
    t, b, n = s["time_s"], s["probe_bytes"], s["paths"]
    mb = lambda x: None if x is None else x / 1e6  # noqa: E731
    return [
        "| estimate | paths with an estimate | median \\|error\\| | 90th percentile | worst "
        "| range holds the truth |",
        "|---|---|---|---|---|---|",
        f"| capacity | {c['estimates']}/{n} | {_f(c['median_abs_err_pct'], 2, ' %')} "
        f"| {_f(c['p90_abs_err_pct'], 2, ' %')} | {_f(c['worst_abs_err_pct'], 1, ' %')} "
        f"| {c['range_holds']}/{n} |",
        f"| avail-bw | {a['estimates']}/{n} | {_f(a['median_abs_err_pct'], 1, ' %')} "
        f"| {_f(a['p90_abs_err_pct'], 1, ' %')} | {_f(a['worst_abs_err_pct'], 0, ' %')} "
        f"| {a['range_holds']}/{n} |",
        f"| avail-bw, truth over the avail-bw phase alone | {ap['estimates']}/{n} "
        f"| {_f(ap['median_abs_err_pct'], 1, ' %')} "
        f"| {_f(ap['p90_abs_err_pct'], 1, ' %')} | {_f(ap['worst_abs_err_pct'], 0, ' %')} "
        f"| {ap['range_holds']}/{n} |",
        f"| bottleneck hop (right: {h['right']}/{n}; names the tight link: {h['names_tight']}/{n}) "
        f"| {h['estimates']}/{n} | {_f(h['median_abs_err_hops'], 1, ' hops')} "
        f"| {_f(h['p90_abs_err_hops'], 0, ' hops')} | {_f(h['worst_abs_err_hops'], 0, ' hops')} "
        f"| {h['range_holds']}/{n} |",
        f"| iperf3 TCP cubic against the avail-bw truth | {ip['runs']}/{n} "
        f"| {_f(ip['median_abs_err_pct'], 1, ' %')} | {_f(ip['p90_abs_err_pct'], 1, ' %')} "
        f"| {_f(ip['worst_abs_err_pct'], 0, ' %')} | – |",
        "",
        "| cost of `measure` | median | 90th percentile | max |",
        "|---|---|---|---|",
        f"| time (`elapsed_s`) | {_f(t['median'], 1, ' s')} | {_f(t['p90'], 1, ' s')} "
        f"| {_f(t['max'], 1, ' s')} |",
        f"| capacity + avail-bw phases (`capacity_elapsed_s` + `availbw_elapsed_s`, no hops "
        f"phase) | {_f(s['phases_time_s']['median'], 1, ' s')} | {_f(s['phases_time_s']['p90'], 1, ' s')} "
        f"| {_f(s['phases_time_s']['max'], 1, ' s')} |",
        f"| probe bytes | {_f(mb(b['median']), 2, ' MB')} | {_f(mb(b['p90']), 2, ' MB')} "
        f"| {_f(mb(b['max']), 2, ' MB')} |",
    ]


def write_report(out, rows, meta, plots):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "paths_benchmark.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    overall = summary(rows)
    per_class = classes(rows)
    with open(os.path.join(out, "paths_benchmark.json"), "w") as f:
        json.dump({"meta": meta, "overall": overall, "classes": per_class, "rows": rows}, f,
                  indent=1)
    L = ["# Random-path benchmark (`linkwidth measure`)", "",
         f"Produced by `{meta['command']}` at commit {meta['commit']} on {meta['date']} "
         f"({meta['cpus']} cores; load average {meta['loadavg']} at the start), seed "
         f"**{meta['seed']}**, {len(rows)} of "
         + (f"the {len(meta['only'].split(','))} paths of --only {meta['only']}"
            if meta.get("only") else f"{meta['paths_planned']} paths") + " done"
         + (f" in {meta['wall_s'] / 60:.1f} min (from {meta.get('started', '?')})"
            if meta.get("wall_s") else "")
         + (f" (stopped early: {meta['stopped']})" if meta.get("stopped") else "") + ". "
         "Raw rows: `paths_benchmark.csv`; summary as JSON: `paths_benchmark.json`; every run's "
         "path, truth, counters and linkwidth document: `paths_runs/pathNNN.json`.", "",
         f"**CPU pinning:** `linkwidth measure` and the iperf3 client ran pinned to CPU "
         f"{PROBER_CPU} (`taskset -c {PROBER_CPU}`), every cross-traffic sender to CPU {CROSS_CPU}. "
         f"linkwidth ran as `linkwidth measure TARGET --json --max-time {meta['max_time']:g}"
         + (f" {meta['tool_args']}" if meta["tool_args"] else "") + "` (hops phase included). "
         + ("The lab lock was held for the whole run (no other lab user ran meanwhile)."
            if meta.get("lock_whole_run") else
            "The lab lock was taken per path (other lab users may have run between paths)."
            if meta.get("lock") else "No lab lock was taken."), "",
         "**Paths:** 1-5 links, every link shaped (tbf or htb) at 5 Mbit/s-1 Gbit/s, queue "
         "10-200 ms of its rate (at least two frames); the narrow link's rate is 5-200 Mbit/s "
         "(tbf is timer-bound above ~300 Mbit/s on this VM) and at least 15 % below every other "
         "link's. Cross traffic on link i runs xs{i} -> xr{i} and crosses only link i; on link 1 "
         "it leaves through the prober's own shaped interface, with the probes. Kinds: `cbr` "
         "(iperf3 UDP), `poisson` (lw_crossgen: Poisson departures, IP sizes 1500/576/64 B at "
         "40/20/40 %), `onoff` (lw_crossgen: Pareto on/off periods of shape 1.5, Poisson at the "
         "peak rate while on), `tcp` (iperf3 cubic throttled with -b). A sender is planned at "
         f"most {CROSS_CAP / M:.0f} Mbit/s and all of them together {CROSS_TOTAL_CAP / M:.0f} Mbit/s "
         "(all share CPU 1); what really crossed is measured.", "",
         "**Truth per run:** capacity = the narrow link's configured rate x 1500/1514; cross "
         "traffic per link = IP-layer bit/s received by xr{i} (interface counters) during the "
         "`measure` run; avail-bw = min over links of (capacity - cross traffic), the tight link "
         "its argmin (classes use this measured tight link); bottleneck hop = the narrow link's "
         "index. Error = estimate / truth - 1; p90 = nearest-rank 90th percentile of |error|. "
         "Hop right = `bottleneck_hop` equals the narrow link; hop range holds = the narrow link "
         "lies in `bottleneck_earliest_hop..bottleneck_hop`. Error statistics are over the paths "
         "with an estimate (`estimates`); a path without an estimate counts as a miss in `range "
         "holds` and `hop right` (their denominator is every path). Utilisation bands are of the "
         "measured tight link; a measured utilisation above 90 % falls in 60-90. "
         "iperf3: one TCP cubic flow, "
         f"{meta['iperf_seconds']} s, on every {meta['iperf_every']}th path, against the avail-bw "
         "truth measured during its own run. The avail-bw is also compared with the truth over "
         "the avail-bw phase alone (`measure`'s last phase: the `availbw_elapsed_s` before the "
         "process ended), from the cross-traffic counters sampled every 0.1 s (a reader per "
         "link, pinned to CPU 1, linear between samples): bursty cross traffic (on/off with "
         "heavy-tailed periods, TCP) averages differently over the whole run and over the "
         "seconds the estimate describes.", "",
         "## Overall", "", *overall_table(overall), "", HEADER, table_rows("all paths", overall), ""]
    counts = {}
    for r in rows:
        k = r["stop_reason"] or f"error {r['error'] or r['exit']}"
        counts[k] = counts.get(k, 0) + 1
    L += ["Stop reasons / errors of `measure`: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) + ".", ""]
    for fail in meta.get("lab_failures", []):
        L += [f"Path {fail['path']} could not be run (the lab failed, not linkwidth): "
              f"`{fail['error'].splitlines()[0]}`", ""]
    L += ["## Per class", ""]
    for name, groups in per_class.items():
        L += [f"### {name}", "", HEADER]
        L += [table_rows(k, s) for k, s in groups.items()]
        L.append("")
    if plots:
        L += ["## Plots", ""]
        L += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plots]
        L.append("")
    L += ["## Every path", "",
          "Rates are the links' configured (L2) rates; cross = measured on the counters per link "
          "during the run.", "",
          "| path | rates Mbit/s | shapers | queues ms | cross kinds | cross Mbit/s | narrow | tight "
          "| tight util | cap. truth | cap. est | cap. err | avail truth | avail est [range] "
          "| avail err | avail truth, err over the avail-bw phase | hop | time s | probe MB "
          "| iperf3 (truth) | stop | warnings |",
          "|" + "---|" * 22]
    for r in rows:
        def mb(x, d=2):
            return "–" if x == "" else f"{x / M:.{d}f}"
        ip = ("" if r["iperf3_bps"] == "" else
              f"{mb(r['iperf3_bps'])} ({mb(r['iperf3_truth_bps'])})")
        L.append(
            f"| {r['path']} | {r['rates_mbps']} | {r['shapers']} | {r['queues_ms']} | {r['cross']} "
            f"| {r['link_cross_mbps']} | {r['narrow_link']} | {r['tight_link']} "
            f"| {100 * r['tight_util']:.0f}% | {mb(r['capacity_truth_bps'])} | {mb(r['capacity_bps'])} "
            f"| {sig(r['capacity_err_pct'])} "
            f"| {mb(r['availbw_truth_bps'])} | {mb(r['availbw_bps'])} "
            f"[{mb(r['availbw_low_bps'])}, {mb(r['availbw_high_bps'])}] "
            f"| {sig(r['availbw_err_pct'])} "
            f"| {mb(r['availbw_phase_truth_bps'])}, {sig(r['availbw_phase_err_pct'])} "
            f"| {r['bottleneck_hop'] or '–'} | {_f(r['elapsed_s'] or None, 1)} "
            f"| {_f(r['probe_bytes'] / 1e6 if r['probe_bytes'] != '' else None, 2)} | {ip} "
            f"| {r['stop_reason'] or r['error']} | {r['warnings']} |")
    with open(os.path.join(out, "paths_benchmark.md"), "w") as f:
        f.write("\n".join(L) + "\n")


# --------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------

KIND_COLOURS = {"none": "0.5", "cbr": "tab:blue", "poisson": "tab:orange", "onoff": "tab:red",
                "tcp": "tab:green"}


def plot_error_vs_util(rows, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = [("tight link local (link 1)", lambda r: r["tight_local"]),
            ("tight link remote", lambda r: not r["tight_local"])]
    # (name, column, symlog linear range, issue 11's bar for the median |error|)
    ests = [("capacity", "capacity_err_pct", 2.0, 1.0), ("avail-bw", "availbw_err_pct", 10.0, 4.0)]
    fig, axes = plt.subplots(len(ests), len(cols), figsize=(13, 8.5), squeeze=False)
    for i, (ename, key, lin, bar) in enumerate(ests):
        for j, (cname, sel) in enumerate(cols):
            ax = axes[i][j]
            seen = set()
            for r in rows:
                if not sel(r) or r[key] == "":
                    continue
                k = r["tight_kind"]
                marker = "o" if r["tight_is_narrow"] else "^"
                lab_ = f"{k}, {'tight = narrow' if r['tight_is_narrow'] else 'tight ≠ narrow'}"
                ax.scatter(100 * r["tight_util"], r[key], c=KIND_COLOURS.get(k, "k"),
                           marker=marker, s=40, edgecolor="k", linewidth=0.4,
                           label=None if lab_ in seen else lab_)
                ax.annotate(str(r["path"]), (100 * r["tight_util"], r[key]), fontsize=6,
                            xytext=(3, 2), textcoords="offset points")
                seen.add(lab_)
            ax.axhline(0, color="k", lw=0.8)
            ax.axhspan(-bar, bar, color="tab:green", alpha=0.12,
                       label=f"±{bar:g} % (issue 11's median bar)")
            ax.set_yscale("symlog", linthresh=lin)
            ax.set_xlim(-3, 100)
            ax.set_xlabel("tight-link utilisation (%), measured on the counters")
            ax.set_ylabel(f"{ename} error (%, symlog: linear within ±{lin:g})")
            ax.set_title(f"{ename}: {cname}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    fig.suptitle("linkwidth measure on random paths: error against the tight link's utilisation "
                 "(colour: cross traffic on the tight link; triangle: tight ≠ narrow; "
                 "numbers: path)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)


def plot_worst(rows, runs_dir, out, k_avail=3, k_cap=2):
    """Response curves (scripts/plot_measure.py) of the worst runs."""
    import plot_measure
    made = []
    picks = []
    av = sorted((r for r in rows if r["availbw_err_pct"] != ""),
                key=lambda r: -abs(r["availbw_err_pct"]))
    cp = sorted((r for r in rows if r["capacity_err_pct"] != ""),
                key=lambda r: -abs(r["capacity_err_pct"]))
    picks += [("availbw", r) for r in av[:k_avail]]
    picks += [("capacity", r) for r in cp if r not in [p for _, p in picks]][:k_cap]
    for rank, (what, r) in enumerate(picks, 1):
        with open(os.path.join(runs_dir, f"path{r['path']:03d}.json")) as f:
            rec = json.load(f)
        doc = rec["doc"]
        if not doc.get("rates"):
            continue
        png = os.path.join(out, f"paths_worst_{what}_{rank}_path{r['path']:03d}.png")
        title = (f"path {r['path']}: {r['n_links']} links {r['rates_mbps']} Mbit/s, cross {r['cross']}, "
                 f"narrow {r['narrow_link']}, tight {r['tight_link']} "
                 f"({100 * r['tight_util']:.0f}% used); capacity {r['capacity_err_pct']:+.1f}%, "
                 f"avail-bw {r['availbw_err_pct']:+.1f}%" if r["availbw_err_pct"] != "" else "")
        plot_measure.plot(doc, png, title=title, truth_bps=rec["truth"]["availbw_bps"])
        made.append(png)
    return made


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def make_plots(rows, out, runs_dir):
    png = os.path.join(out, "paths_error_vs_util.png")
    plot_error_vs_util(rows, png)
    return [png] + plot_worst(rows, runs_dir, out)


def report_only(out, no_plots):
    runs_dir = os.path.join(out, "paths_runs")
    with open(os.path.join(out, "paths_benchmark.json")) as f:
        meta = json.load(f)["meta"]
    recs = []
    for fn in sorted(os.listdir(runs_dir)):
        if fn.startswith("path") and fn.endswith(".json"):
            with open(os.path.join(runs_dir, fn)) as f:
                recs.append(json.load(f))
    rows = [row_of(r) for r in sorted(recs, key=lambda r: r["path"]["index"])]
    for fn in os.listdir(out):
        if fn.startswith("paths_worst_") and fn.endswith(".png"):
            os.unlink(os.path.join(out, fn))
    plots = [] if no_plots or not rows else make_plots(rows, out, runs_dir)
    write_report(out, rows, meta, plots)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--paths", type=int, default=60)
    ap.add_argument("--quick", action="store_true",
                    help="tiny paths (1-2 links, 20-100 Mbit/s, cbr/poisson cross traffic), "
                         "short runs: for the lab test")
    ap.add_argument("--iperf-every", type=int, default=4, help="iperf3 on every K-th path (0: never)")
    ap.add_argument("--iperf-seconds", type=int, default=None, help="default 5 (2 with --quick)")
    ap.add_argument("--max-time", type=float, default=None,
                    help="linkwidth --max-time (default 15 s, 6 s with --quick)")
    ap.add_argument("--tool-args", default="", help="extra linkwidth measure arguments")
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds between starting cross traffic and measuring (default 1, 0.5 quick)")
    ap.add_argument("--bin", default=os.environ.get("LINKWIDTH_BIN",
                                                    os.path.join(ROOT, "build", "linkwidth")))
    ap.add_argument("--out", default=os.path.join(ROOT, "results"))
    ap.add_argument("--lock", default="", help="flock this file around each path")
    ap.add_argument("--lock-whole-run", action="store_true",
                    help="hold the --lock flock for the whole run instead of per path")
    ap.add_argument("--only", default="",
                    help="run only these path indices of the seed's plan (comma-separated, "
                         "e.g. 8,11,24): the same paths as in a full run, for an A/B comparison")
    ap.add_argument("--list", action="store_true", help="print the planned paths and exit")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild the report and plots in --out from its paths_runs/ and "
                         "paths_benchmark.json (no lab)")
    args = ap.parse_args()
    if args.report_only:
        return report_only(args.out, args.no_plots)
    # SIGTERM (and SIGINT, which a shell's background job ignores) end the run
    # like Ctrl-C: the current lab is torn down and what was measured is written.
    def _interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    if args.paths < 1:
        ap.error("--paths must be >= 1")
    if args.lock_whole_run and not args.lock:
        ap.error("--lock-whole-run needs --lock FILE")
    if args.iperf_seconds is None:
        args.iperf_seconds = 2 if args.quick else 5
    if args.max_time is None:
        args.max_time = 6.0 if args.quick else 15.0
    if args.settle is None:
        args.settle = 0.5 if args.quick else 1.0
    paths = [gen_path(args.seed, i, args.quick) for i in range(args.paths)]
    if args.only:
        try:
            only = sorted({int(x) for x in args.only.split(",") if x.strip()})
        except ValueError:
            ap.error(f"--only takes comma-separated path indices, not {args.only!r}")
        if not only or only[0] < 0 or only[-1] >= args.paths:
            ap.error(f"--only indices must lie in 0..{args.paths - 1}")
        paths = [paths[i] for i in only]
    if args.list:
        for p in paths:
            print(json.dumps(p))
        return 0
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"bench_paths.py: {args.bin} is not an executable (build first)")
    # Before the runs of an earlier invocation are deleted below: their
    # deletion is not a change to the code under test.
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "?"
    runs_dir = os.path.join(args.out, "paths_runs")
    os.makedirs(runs_dir, exist_ok=True)
    for fn in os.listdir(runs_dir):         # runs of an earlier invocation
        if fn.startswith("path") and fn.endswith(".json"):
            os.unlink(os.path.join(runs_dir, fn))
    for fn in os.listdir(args.out):
        if fn.startswith("paths_worst_") and fn.endswith(".png"):
            os.unlink(os.path.join(args.out, fn))
    meta = {"command": "python3 scripts/bench_paths.py " + " ".join(map(shlex.quote, sys.argv[1:])),
            "commit": commit, "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "seed": args.seed, "paths_planned": args.paths, "only": args.only or None,
            "quick": args.quick,
            "max_time": args.max_time, "tool_args": args.tool_args,
            "iperf_every": args.iperf_every, "iperf_seconds": args.iperf_seconds,
            "cpus": os.cpu_count(), "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
            "prober_cpu": PROBER_CPU, "cross_cpu": CROSS_CPU, "binary": args.bin,
            "lock": args.lock, "lock_whole_run": args.lock_whole_run}
    rows = []
    t0 = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            if args.lock_whole_run:
                stack.enter_context(held(args.lock))
            t0 = time.monotonic()
            meta["started"] = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
            for p in paths:
                try:
                    rec = run_path(p, args, runs_dir)
                except lab.LabError as e:     # the lab, not the tool, failed: say so, go on
                    meta.setdefault("lab_failures", []).append(
                        {"path": p["index"], "error": str(e)[:300]})
                    print(f"path {p['index']}: lab failure: {e}", file=sys.stderr, flush=True)
                    continue
                r = row_of(rec)
                rows.append(r)
                print(f"[{time.monotonic() - t0:6.0f}s] path {p['index']}: {r['n_links']} links "
                      f"{r['rates_mbps']} cross {r['cross']} narrow {r['narrow_link']} tight "
                      f"{r['tight_link']} ({100 * r['tight_util']:.0f}%): cap {r['capacity_err_pct']}% "
                      f"avail {r['availbw_err_pct']}% hop {r['bottleneck_hop']} "
                      f"t {r['elapsed_s']} s exit {r['exit']}", flush=True)
                meta["wall_s"] = round(time.monotonic() - t0, 1)
                write_report(args.out, rows, meta, [])
    except KeyboardInterrupt:
        meta["stopped"] = "interrupted"
        print("interrupted: writing what was measured", file=sys.stderr)
    meta["wall_s"] = round(time.monotonic() - t0, 1)
    plots = []
    if rows and not args.no_plots:
        try:
            plots = make_plots(rows, args.out, runs_dir)
        except Exception as e:      # a plot must not lose the numbers
            print(f"plots failed: {e}", file=sys.stderr)
    write_report(args.out, rows, meta, plots)
    print(open(os.path.join(args.out, "paths_benchmark.md")).read().split("## Every path")[0])
    return 130 if meta.get("stopped") else 0


if __name__ == "__main__":
    sys.exit(main())
