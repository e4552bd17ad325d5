#!/usr/bin/env python3
"""Re-records the captures in tests/data (root: builds network-namespace labs).

    flock /tmp/lw-lab.lock python3 tests/data/make_captures.py [--only NAME ...]

Each recorded capture NAME.pcap is `linkwidth capacity TARGET --json --trains N
--save-pcap NAME.pcap` (one is a `measure --no-hops` run, one a `hops` run) in a lab named
"anadata"; the live JSON document is
kept beside it as NAME.json, the lab's ground truth in captures.json. The
edited captures are then made from recorded ones by transform_capture.py.
README.md in this folder lists what each one is.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402

BIN = os.environ.get("LINKWIDTH_BIN", os.path.join(ROOT, "build", "linkwidth"))


def no_setup(L):
    return "none"


def random_loss(L):
    # 10% of every packet r1 forwards (both directions) dropped at random.
    cmds = ["nft add table ip analoss",
            "nft add chain ip analoss drops '{ type filter hook forward priority 0; }'",
            "nft add rule ip analoss drops numgen random mod 10 == 0 drop"]
    for c in cmds:
        L.exec("r1", ["sh", "-c", c], check=True)
    return "nft on r1: forward chain, numgen random mod 10 == 0 drop (10% loss both ways)"


def gro_timer(L):
    # The real coalescing mechanism we could set up on veth: GRO turns on
    # NAPI for the prober's interface; the NAPI poll is then deferred by a
    # 1 ms timer (gro_flush_timeout) instead of running at once.
    c = ("ethtool -K dn gro on && echo 1000000 > /sys/class/net/dn/gro_flush_timeout && "
         "echo 100 > /sys/class/net/dn/napi_defer_hard_irqs")
    L.exec("prober", ["sh", "-c", c], check=True)
    return "prober dn: ethtool -K dn gro on; gro_flush_timeout 1000000 ns; napi_defer_hard_irqs 100"


# name: (link rates prober -> target, None = unshaped; linkwidth arguments; setup)
RECORDED = {
    "clean_10m": ([None, 10e6], ["capacity", "--trains", "10"], no_setup),
    "clean_100m": ([None, 100e6], ["capacity", "--trains", "10"], no_setup),
    "loss_10m": ([None, 10e6], ["capacity", "--trains", "16"], random_loss),
    "gro_timer_10m": ([None, 10e6], ["capacity", "--trains", "10"], gro_timer),
    "measure_20m": ([None, 20e6], ["measure", "--no-hops", "--trains", "10", "--max-time", "4",
                                   "--fleet", "3", "--calibration-trains", "4"], no_setup),
    "hops_50m": ([None, 50e6, None], ["hops"], no_setup),
    # A token bucket (issue 13): tbf 10 Mbit/s with a 30 KB burst; the shaper
    # probe's streams and the avail-bw from the bucket's refill.
    "shaper_10m": ([None, {"rate": 10e6, "burst": 30_000}],
                   ["measure", "--no-hops", "--trains", "10"], no_setup),
}
# name: (source capture, transform_capture.py arguments)
TRANSFORMED = {
    "reordered_10m": ("clean_10m", ["reorder", "--every", "2"]),
    "quantised_100m": ("clean_100m", ["quantise", "--period-us", "125", "--phase-us", "37"]),
}


def link_name(r):
    if r is None:
        return "unshaped"
    if isinstance(r, dict):
        return f"tbf {r['rate'] / 1e6:g} Mbit/s, burst {r['burst']} bytes"
    return f"tbf {r / 1e6:g} Mbit/s"


def record(name, truth_db):
    rates, targs, setup = RECORDED[name]
    # A link is its rate (None: unshaped) or lab.Link's arguments.
    spec = lab.Spec(links=[lab.Link(**r) if isinstance(r, dict) else lab.Link(rate=r)
                           for r in rates])
    with lab.Lab(spec, name="anadata") as L:
        how = setup(L)
        tmp = tempfile.mkdtemp(prefix="lw-anadata-")
        os.chmod(tmp, 0o777)  # linkwidth writes the pcap before it drops to nobody
        pcap = os.path.join(tmp, name + ".pcap")
        args = [targs[0], L.target_ip, *targs[1:], "--json", "--save-pcap", pcap]
        p = L.run_in_prober([BIN, *args], timeout=60)
        doc = json.loads(p.stdout)
        shutil.copyfile(pcap, os.path.join(HERE, name + ".pcap"))
        shutil.rmtree(tmp)
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        truth_db[name] = {
            "truth_capacity_bps": L.ground_truth_capacity(ip_len=1500),
            "lab": " - ".join(["prober"] + [f"({link_name(r)})" for r in rates] + ["target"]),
            "narrow_link": L.narrow_link(),
            "setup": how,
            "command": "linkwidth " + " ".join(args[:1] + ["TARGET"] + args[2:-1] + [name + ".pcap"]),
            "live_capacity_bps": doc.get("capacity_bps"),
            "live_availbw_bps": doc.get("availbw_bps"),
            "live_bottleneck_hop": doc.get("bottleneck_hop"),
            "transformed": False,
        }
        for r in rates:
            if isinstance(r, dict) and "burst" in r:
                # tbf counts the 14-byte Ethernet header: the bucket in IP bytes.
                truth_db[name]["truth_bucket_bytes"] = r["burst"] * 1500 / 1514
        print(f"{name}: live {doc.get('capacity_bps')}, truth {truth_db[name]['truth_capacity_bps']:.0f}")


def transform(name, truth_db):
    src, targs = TRANSFORMED[name]
    subprocess.run([sys.executable, os.path.join(HERE, "transform_capture.py"), targs[0],
                    os.path.join(HERE, src + ".pcap"), os.path.join(HERE, name + ".pcap"),
                    *targs[1:]], check=True)
    t = dict(truth_db[src])
    t.update({"transformed": True, "from": src + ".pcap",
              "transform": "tests/data/transform_capture.py " + " ".join(targs)})
    t.pop("live_capacity_bps", None)
    t.pop("live_availbw_bps", None)
    t.pop("live_bottleneck_hop", None)
    truth_db[name] = t


def main():
    ap = argparse.ArgumentParser(description="re-record tests/data captures (root)")
    ap.add_argument("--only", nargs="*", help="names to redo (default: all)")
    a = ap.parse_args()
    db_path = os.path.join(HERE, "captures.json")
    truth_db = json.load(open(db_path)) if os.path.exists(db_path) else {}
    names = a.only or [*RECORDED, *TRANSFORMED]
    for n in names:
        if n in RECORDED:
            record(n, truth_db)
    for n in names:
        if n in TRANSFORMED:
            transform(n, truth_db)
    with open(db_path, "w") as f:
        json.dump(truth_db, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
