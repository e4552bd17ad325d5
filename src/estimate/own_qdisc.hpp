#pragma once
// The sustained rate of the shaper on this host's own interface, from its
// configuration (tc: a root tbf, or a root htb and the class unclassified
// traffic goes to). When that qdisc shapes our probes and the host's other
// traffic alike, the link's avail-bw is its rate less the other traffic
// (estimate/own_traffic.hpp): a bound the path's avail-bw cannot exceed,
// whatever the trains read beyond it. Pure functions over what netlink gave
// (app/plumbing/own_qdisc reads it).
#include <cstdint>
#include <string>
#include <vector>

namespace lw {

// A rate as tc holds it: bytes per second of the packets' length as the
// qdisc counts it (the link header included), plus `overhead` bytes per
// packet; linklayer 2 is ATM (cells: not modelled).
struct QdiscRate {
  double bytes_per_s = 0;
  int overhead = 0;
  int linklayer = 1;
};

struct HtbClass {
  std::uint32_t handle = 0;  // major:minor
  std::uint32_t parent = 0;  // a class's handle, or the qdisc's (minor 0)
  QdiscRate rate, ceil;
};

struct QdiscConfig {
  std::string root_kind;     // "" = none read; "tbf", "htb", "noqueue", ...
  std::uint32_t root_handle = 0;
  QdiscRate tbf_rate;        // root tbf
  std::uint32_t htb_default = 0;  // root htb's default class minor (0: unshaped)
  std::vector<HtbClass> classes;  // root htb's classes
  bool filters = false;      // filters attached to the root: traffic is classified
  bool size_table = false;   // a size table (stab) changes what the rate counts
};

struct OwnQdisc {
  bool known = false;
  std::string kind;           // tbf / htb
  double rate_bps = 0;        // the sustained rate in bits/s of counted bytes
  int overhead = 0;           // bytes added per packet before the rate is applied
  std::string why_not;        // when not known: why (a classifier, no shaper, ...)
};

// The rate our probes and the host's unclassified traffic share: a root
// tbf's rate; under a root htb, the least ceil on the way from the default
// class to the root (what that class may borrow up to). Not known: no
// shaping root, filters (traffic may go to other classes), a default class
// that does not exist or is 0 (unshaped), a size table, an ATM link layer.
OwnQdisc own_qdisc_rate(const QdiscConfig& q);

// The IP-layer capacity a qdisc of `rate_bps` (counted bytes, `overhead`
// added per packet) leaves packets of `packet_size` bytes: its rate over
// packet_size + l2_header + overhead counted bytes each; 0 without a rate.
double qdisc_ip_capacity(double rate_bps, int overhead, int packet_size, int l2_header);

}  // namespace lw
