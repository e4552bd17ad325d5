#include "plan/shaper_plan.hpp"

#include <algorithm>
#include <cmath>

#include "plan/target_marker.hpp"

namespace lw {

std::vector<int> shaper_marker_positions(int load_packets, int markers, int shift_at) {
  const int n = std::max(1, load_packets);
  const int m = std::clamp(markers, 2, n + 1);
  const bool split = shift_at > 0 && shift_at < n && m >= 8;
  const int before = split ? m / 4 : m;  // markers up to the shift (quadratic)
  std::vector<int> pos;
  for (int k = 0; k < m; ++k) {
    int p;
    if (k < before) {
      const double u = split ? static_cast<double>(k) / before
                             : static_cast<double>(k) / (m - 1);
      p = static_cast<int>(std::lround((split ? shift_at : n) * u * u));
    } else {
      const double u = static_cast<double>(k - before + 1) / (m - before);
      p = shift_at + static_cast<int>(std::lround((n - shift_at) * u));
    }
    if (!pos.empty()) p = std::max(p, pos.back() + 1);
    // Leave room for the markers still to come.
    p = std::min(p, n - (m - 1 - k));
    pos.push_back(p);
  }
  return pos;
}

int shaper_load_packets(double bytes, int packet_size) {
  return std::max(8, static_cast<int>(std::ceil(bytes / std::max(64, packet_size))));
}

Train make_shaper_train(const ShaperStreamParams& p, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  auto push = [&](std::uint8_t flags, std::uint16_t len, Role role, Nanos offset) {
    push_flow_probe(t, p.flow, p.ttl, flags, seqs.next(), len, role, offset);
  };
  const Nanos lead = 50 * kUs;  // warm-up SYN ahead of the head, as capacity trains
  // Bare SYNs: 40 bytes over IPv4, 60 over IPv6 (the builder refuses less).
  const auto syn_len = static_cast<std::uint16_t>(bare_tcp_len(p.flow.dst));
  push(kSyn, syn_len, Role::kWarmup, 0);
  const std::vector<int> pos = shaper_marker_positions(p.load_packets, p.markers, p.shift_at);
  double bits = 0;
  Nanos at = lead;
  int sent_load = 0;
  for (std::size_t m = 0; m < pos.size(); ++m) {
    for (; sent_load < pos[m]; ++sent_load) {
      push(kRst, p.packet_size, Role::kLoad, at);
      at += p.gap;
      bits += 8.0 * p.packet_size;
    }
    if (m > 0) bits += 8.0 * syn_len;
    t.markers.push_back(static_cast<int>(t.probes.size()));
    t.bits_from_head.push_back(bits);
    push(kSyn, syn_len, Role::kMarker, at);
  }
  // The flow's kind of marker: with a listening port each SYN's closer is
  // the load packet after it (a stream sent with closed-port SYNs left a
  // half-open connection per marker on a target with only 443 open).
  apply_target_marker(t, p.flow, seqs);
  return t;
}

}  // namespace lw
