#include "estimate/own_traffic.hpp"

#include <algorithm>

namespace lw {

namespace {

// Bits of other traffic between two samples (0 when ours exceed the count).
bool other_bits(const CounterSample& a, const CounterSample& b, int l2_header, double& bits) {
  if (b.tx_bytes < a.tx_bytes || b.tx_packets < a.tx_packets || b.our_bytes < a.our_bytes ||
      b.our_packets < a.our_packets) {
    return false;
  }
  double all = static_cast<double>(b.tx_bytes - a.tx_bytes);
  // What arrived at the queue: what left, plus what was queued at the end,
  // less what was at the start (CounterSample).
  if (a.backlog_bytes >= 0 && b.backlog_bytes >= 0) {
    all += static_cast<double>(b.backlog_bytes - a.backlog_bytes);
  }
  const double ours = static_cast<double>(b.our_bytes - a.our_bytes) +
                      static_cast<double>(l2_header) * static_cast<double>(b.our_packets - a.our_packets);
  bits = 8.0 * std::max(0.0, all - ours);
  return true;
}

}  // namespace

OwnTraffic own_traffic(const std::vector<CounterSample>& s, int l2_header, double bin_s,
                       double min_window_s) {
  OwnTraffic o;
  if (s.size() < 2) return o;
  const CounterSample& first = s.front();
  const CounterSample& last = s.back();
  o.window_s = last.t_s - first.t_s;
  if (!(o.window_s >= min_window_s)) return o;
  double bits = 0;
  if (!other_bits(first, last, l2_header, bits)) return o;
  o.link_bps = bits / o.window_s;
  o.low_bps = o.high_bps = o.link_bps;
  // Bins: consecutive samples merged until a bin spans bin_s (the last bin
  // joins the one before when it is shorter).
  std::vector<std::size_t> cuts = {0};
  for (std::size_t i = 1; i < s.size(); ++i) {
    if (s[i].t_s - s[cuts.back()].t_s >= bin_s) cuts.push_back(i);
  }
  if (cuts.back() != s.size() - 1) {
    if (cuts.size() > 1) cuts.back() = s.size() - 1;
    else cuts.push_back(s.size() - 1);
  }
  o.bins = static_cast<int>(cuts.size()) - 1;
  for (std::size_t k = 1; k < cuts.size(); ++k) {
    const CounterSample& a = s[cuts[k - 1]];
    const CounterSample& b = s[cuts[k]];
    double x = 0;
    if (!(b.t_s > a.t_s) || !other_bits(a, b, l2_header, x)) return OwnTraffic{};
    const double r = x / (b.t_s - a.t_s);
    o.low_bps = std::min(o.low_bps, r);
    o.high_bps = std::max(o.high_bps, r);
  }
  o.valid = true;
  return o;
}

double link_availbw(double capacity_bps, double other_link_bps, int packet_size, int l2_header) {
  const double share = static_cast<double>(packet_size) / (packet_size + std::max(0, l2_header));
  return std::max(0.0, capacity_bps - other_link_bps * share);
}

}  // namespace lw
