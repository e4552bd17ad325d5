#include "plan/policer_plan.hpp"

#include <algorithm>
#include <cmath>

#include "plan/target_marker.hpp"

namespace lw {

std::vector<int> policer_bucket_positions(int load_packets, int markers) {
  std::vector<int> pos;
  if (load_packets < 4 || markers < 1) return pos;
  const double lo = 3, hi = load_packets - 1;
  for (int i = 0; i < markers; ++i) {
    const double f = markers == 1 ? 1.0 : static_cast<double>(i) / (markers - 1);
    const int p = static_cast<int>(std::lround(lo * std::pow(hi / lo, f)));
    if (pos.empty() || p > pos.back()) pos.push_back(p);
  }
  return pos;
}

Train make_policer_train(const PolicerStreamParams& p, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  const Nanos gap = std::max<Nanos>(1, p.gap);
  double bits = 0;
  Nanos at = 0;
  auto push = [&](std::uint8_t flags, Role role) {
    if (role == Role::kMarker) {
      t.markers.push_back(static_cast<int>(t.probes.size()));
      t.bits_from_head.push_back(bits);
    }
    push_flow_probe(t, p.flow, p.ttl, flags, seqs.next(), p.packet_size, role, at);
    bits += 8.0 * p.packet_size;
  };
  // A bare SYN ahead, as the shaper streams: it wakes the send path and the
  // target's reply path (not a marker: no byte of the stream is before it).
  push_flow_probe(t, p.flow, p.ttl, kSyn, seqs.next(),
                  static_cast<std::uint16_t>(bare_tcp_len(p.flow.dst)), Role::kWarmup, 0);
  at = 50 * kUs;
  const std::vector<int> pos = policer_bucket_positions(p.load_packets, p.bucket_markers);
  std::size_t next = 0;
  for (int i = 0; i < p.load_packets; ++i, at += gap) {
    if (next < pos.size() && pos[next] == i) {
      for (int m = 0; m < std::max(1, p.markers_per_position); ++m, at += gap) {
        push(kSyn, Role::kMarker);
      }
      ++next;
    }
    push(kRst, Role::kLoad);
  }
  const double step = std::pow(2.0, 1.0 / std::max(1, p.per_octave));
  double g = static_cast<double>(gap);
  for (int k = 0; k < p.chirp_markers; ++k) {
    push(kSyn, Role::kMarker);
    g *= step;
    at += static_cast<Nanos>(std::llround(g));
  }
  apply_target_marker(t, p.flow, seqs);
  return t;
}

}  // namespace lw
