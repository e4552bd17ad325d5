#include "plan/syn_train.hpp"

#include <algorithm>

#include "plan/target_marker.hpp"

namespace lw {

Train make_syn_train(const SynTrainParams& p, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  const int markers = std::max(2, p.markers);
  double bits = 0;
  for (int i = 0; i < p.drain + markers; ++i) {
    Probe q;
    q.src = p.flow.src;
    q.dst = p.flow.dst;
    q.sport = p.flow.sport;
    q.dport = p.flow.dport;
    q.flow_label = p.flow.flow_label;
    q.ttl = p.ttl;
    q.flags = kSyn;
    q.seq = seqs.next();
    q.ip_len = p.packet_size;
    q.role = i < p.drain ? Role::kDrain : Role::kMarker;
    q.train = train_id;
    q.index = i;
    q.ip_id = static_cast<std::uint16_t>(i);
    q.offset = 0;  // back to back
    if (q.role == Role::kMarker) {
      if (!t.markers.empty()) bits += 8.0 * q.ip_len;
      t.markers.push_back(i);
      t.bits_from_head.push_back(bits);
    }
    t.probes.push_back(q);
  }
  apply_target_marker(t, p.flow, seqs);
  if (p.max_rate_bps > 0) space_to_rate(t, p.max_rate_bps);
  return t;
}

}  // namespace lw
