#include "estimate/own_qdisc.hpp"

#include <algorithm>

namespace lw {

namespace {

constexpr int kLinkLayerAtm = 2;

bool usable_rate(const QdiscRate& r) { return r.bytes_per_s > 0 && r.linklayer != kLinkLayerAtm; }

}  // namespace

OwnQdisc own_qdisc_rate(const QdiscConfig& q) {
  OwnQdisc o;
  o.kind = q.root_kind;
  if (q.root_kind != "tbf" && q.root_kind != "htb") {
    o.why_not = q.root_kind.empty() ? "no qdisc read" : "no shaper at the root (" + q.root_kind + ")";
    return o;
  }
  if (q.size_table) {
    o.why_not = "a size table changes what the rate counts";
    return o;
  }
  if (q.root_kind == "tbf") {
    if (!usable_rate(q.tbf_rate)) {
      o.why_not = "tbf rate not usable (none, or ATM cells)";
      return o;
    }
    o.known = true;
    o.rate_bps = 8 * q.tbf_rate.bytes_per_s;
    o.overhead = q.tbf_rate.overhead;
    return o;
  }
  if (q.filters) {
    o.why_not = "filters classify the traffic: ours and the host's may take other classes";
    return o;
  }
  if (q.htb_default == 0) {
    o.why_not = "htb sends unclassified traffic unshaped (default 0)";
    return o;
  }
  const std::uint32_t major = q.root_handle & 0xffff0000u;
  std::uint32_t h = major | q.htb_default;
  double least = 0;
  int overhead = 0;
  // Up from the default class to the root; a loop in the parents (a broken
  // dump) ends at the class count.
  for (std::size_t step = 0; step <= q.classes.size(); ++step) {
    const auto it = std::find_if(q.classes.begin(), q.classes.end(),
                                 [&](const HtbClass& c) { return c.handle == h; });
    if (it == q.classes.end()) break;
    if (!usable_rate(it->ceil)) {
      o.why_not = "htb ceil not usable (none, or ATM cells)";
      return o;
    }
    const double bps = 8 * it->ceil.bytes_per_s;
    if (least == 0 || bps < least) {
      least = bps;
      overhead = it->ceil.overhead;
    }
    if ((it->parent & 0xffffu) == 0) break;  // the qdisc itself
    h = it->parent;
  }
  if (least == 0) {
    o.why_not = "htb's default class does not exist (unclassified traffic goes unshaped)";
    return o;
  }
  o.known = true;
  o.rate_bps = least;
  o.overhead = overhead;
  return o;
}

double qdisc_ip_capacity(double rate_bps, int overhead, int packet_size, int l2_header) {
  if (!(rate_bps > 0) || packet_size <= 0) return 0;
  const double counted = packet_size + std::max(0, l2_header) + overhead;
  return counted > 0 ? rate_bps * packet_size / counted : 0;
}

}  // namespace lw
