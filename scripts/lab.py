#!/usr/bin/env python3
"""linkwidth network-namespace test lab.

A chain ``prober - r1 - ... - target`` of network namespaces joined by veth
pairs, with per-link, per-direction tbf/htb shaping, optional cross-traffic
hosts per link, a target firewall, and counter-based ground truth.  Python 3
standard library only; needs root, iproute2 (ip, tc, ss), ethtool, iperf3
(cross traffic) and optionally nftables (ICMP-reject firewall) -- see
scripts/install-deps.sh.  Implementation lives in scripts/lablib/.

Hard rules it keeps: addresses only in 198.18.0.0/15 and only inside lab
namespaces (``lw-<id>-<node>``); the root namespace's interfaces, routes and
qdiscs are never touched; everything is torn down on exit, exceptions,
SIGINT/SIGTERM/SIGHUP (context manager + atexit + signal handlers).

Topology and addresses (N links, node 0 = prober, node N = target)
-------------------------------------------------------------------
* link i = veth between node i-1 (``dn``, 198.18.i.1) and node i (``up``,
  198.18.i.2), subnet 198.18.i.0/24; target_ip = 198.18.N.2, prober 198.18.1.1.
* forward direction of link i is shaped on the egress of node i-1 ``dn``,
  reverse on node i ``up``.  Default ``tbf rate R burst 3028 limit L`` with
  L = max(2 MB, 100 ms x R); ``shaper="htb"``: one class rate=ceil=R,
  burst=cburst=3028, bfifo leaf with limit L.
* every lab interface: MTU 1500, ``ethtool -K tso off gso off gro off tx off
  rx off`` (each frame meets the shaper as itself, real checksums); IPv6 off,
  rp_filter off, ip_forward on in chain nodes, static routes for every lab
  subnet (no default route: anything outside 198.18.0.0/15 is unreachable).
* cross hosts for link i (built on demand): xs{i} on node i-1
  (198.19.i.2), xr{i} on node i (198.19.(100+i).2); xs{i}->xr{i} crosses
  exactly link i.
* ground truth: tbf/htb charge the 14-byte Ethernet header, so IP-layer
  capacity for L-byte packets is R*L/(L+14) (``ip_capacity``).  veth byte
  counters also include the 14-byte header, so measured IP-layer rate is
  (dbytes - 14*dpackets)*8/dt.

Measured on this 2-core VM (see the self-tests)
------------------------------------------------
* veth rx/tx byte counters include the 14-byte Ethernet header (20 pings of
  1000-byte IP packets add exactly 20 x 1014 bytes).
* tbf, burst 3028: TCP cubic through a 50 Mbit/s link gets ~97-99 % of
  R*1448/1514; 20 Mbit/s iperf3 UDP (1472-byte payload) measures 20.38
  Mbit/s IP-layer = 20e6*1500/1472; trains at 10/50 Mbit/s arrive spaced at
  1514*8/R (+-0.5 %).  High rates are timer/CPU-bound: a tbf with burst 3028
  delivers ~97 % of R at 300 Mbit/s, ~91-95 % at 500-700 Mbit/s and only
  ~63-66 % at 1 Gbit/s (htb ~94 %; tbf burst 6056 ~99 %).  So keep narrow
  links <= ~300 Mbit/s and make fast links unshaped (rate=None, ~3 Gbit/s)
  or give them burst=6056.
* No act_gact/netem/flower/matchall in this kernel: "drop" is tc u32 +
  mirred redirect to an ifb whose root qdisc is ``pfifo limit 0``.
  icmp_msgs_per_sec/burst = 0 does NOT silence ICMP errors here, so silent
  routers drop their own ICMP on egress the same way.

Python API
----------
    import sys; sys.path.insert(0, "scripts"); import lab
    spec = lab.Spec(links=[lab.Link(rate=1e9), lab.Link(rate="50M"), lab.Link(rate=1e9)],
                    silent_routers=(), cross_links=())
    with lab.Lab(spec) as L:                       # or L = lab.Lab(spec).start(); L.close()
        L.prober_ns, L.target_ns, L.prober_ip, L.target_ip, L.nodes, L.n
        L.ns(node) / L.node_ns(k) / L.node_ip(k)   # node: index, "prober", "r1", "target", "xs2"
        L.exec(node, [cmd...], check=False, timeout=None, input=None, capture=True)
        L.run_in_prober(["build/linkwidth", "capacity", L.target_ip, "--json"], timeout=60)
        L.popen(node, [cmd...], log=None)          # tracked background process
        L.ground_truth_capacity(ip_len=1500, direction="fwd")   # min over links
        L.link_capacity(i, ip_len, direction), L.link_rate(i, direction), L.narrow_link()
        with L.cross(link=2, kind="udp", rate=20e6, size=1472, duration=None) as x:
            x.measured_bps()        # IP-layer bit/s from xr2's rx counters since start
            x.measure(seconds)      # fresh window
        L.cross(2, "tcp", flows=4)  # iperf3 -C cubic -P 4; L.cross(2, "poisson", rate="10M")
        L.cross(2, "http", rate=3, size=65536)   # httperf 3 conn/s on xr2, http.server on xs2
        w = L.cross_window(2); ...; w.stop().bps   # CounterWindow on xr2 (IP layer)
        L.measure_cross(2, seconds)
        L.link_counters(i, "fwd")   # raw counters of the shaped iface (probe + cross)
        L.qdisc_stats(i, "fwd")     # shaper bytes/packets/drops/backlog
        L.iface_stats(node, ifname)
        L.set_target_firewall(drop_syn=True, port=None) # or reject=True; () = off
        L.firewall_drops()
        L.set_middlebox(1, "reset")     # r1 answers SYNs to the target with a TCP reset
        L.set_middlebox(1, "drop_rst")  # r1 drops RSTs outside established connections
        L.set_middlebox(1, "reset", limit="40/second")  # acts on some packets only
        L.set_middlebox(1, None); L.middlebox_hits(1)   # off; packets reset/dropped
        L.listen(port, node="target")              # open TCP port (tracked process)
        L.set_rate(i, rate, "fwd"), L.set_router_icmp(k, enabled)
        L.info()                                    # JSON-able description + truth
    lab.ip_capacity(rate_bps, ip_len=1500); lab.parse_rate("50M"); lab.cleanup_all()
    lab.register_cross_kind(name, CrossTrafficSubclass)

Command line
------------
    lab.py up --name NAME --links 1000M,50M,1000M [--rev R,...] [--shaper tbf|htb]
              [--limit BYTES] [--burst BYTES] [--silent 1,2] [--cross 2]
    lab.py info NAME | lab.py list
    lab.py exec NAME NODE -- CMD ...
    lab.py cross NAME --link I (--udp RATE [--size B] | --tcp N | --poisson RATE) [--duration S]
    lab.py firewall NAME (--drop-syn | --reject | --off) [--port P]
    lab.py middlebox NAME --router K (--reset | --drop-rst | --off) [--limit RATE]
    lab.py rate NAME --link I [--rev] RATE
    lab.py down NAME
    lab.py cleanup        # every lw-* namespace, its processes, all state files
Rates take K/M/G suffixes (decimal).  State: /run/linkwidth-lab/NAME.json.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lablib import *            # noqa: E402,F401,F403  (public API)
from lablib import __all__      # noqa: E402,F401
from lablib.cli import main     # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
