"""linkwidth network-namespace test lab (implementation package).

Import through ``scripts/lab.py`` (``import lab``); see its docstring for the
API and CLI.  Modules: util (rates, netns helpers), topology (Link, Spec, Lab),
traffic (CounterWindow, cross-traffic generators), cli (command line).
"""

from .util import (DEFAULT_BURST, ETH_HDR, LAB_NET, MTU, PREFIX, STATE_DIR,
                   LabError, LabUnsupported, cleanup_all, default_limit,
                   format_rate, ip_capacity, list_namespaces, parse_rate)
from .topology import SAME, Lab, Link, Spec
from .traffic import (CROSS_KINDS, CounterWindow, CrossTraffic, IperfTCP,
                      IperfUDP, PoissonUDP, measure, register_cross_kind)

__all__ = [
    "DEFAULT_BURST", "ETH_HDR", "LAB_NET", "MTU", "PREFIX", "STATE_DIR", "SAME",
    "LabError", "LabUnsupported", "cleanup_all", "default_limit", "format_rate", "ip_capacity",
    "list_namespaces", "parse_rate", "Lab", "Link", "Spec", "CROSS_KINDS",
    "CounterWindow", "CrossTraffic", "IperfTCP", "IperfUDP", "PoissonUDP",
    "measure", "register_cross_kind",
]
