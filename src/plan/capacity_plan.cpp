#include "plan/capacity_plan.hpp"

#include <algorithm>

namespace lw {

const char kProbeSignature[] =
    "linkwidth bandwidth probe: TCP RST load to a closed port, dropped by design. "
    "See the linkwidth README.";

namespace {

Probe base_probe(const CapacityTrainParams& p, int train_id) {
  Probe q;
  q.src = p.flow.src;
  q.dst = p.flow.dst;
  q.sport = p.flow.sport;
  q.dport = p.flow.dport;
  q.ttl = p.ttl;
  q.train = train_id;
  return q;
}

}  // namespace

Train make_capacity_train(const CapacityTrainParams& p, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  const int n_markers = std::max(2, p.markers);
  auto push = [&](Probe q) {
    q.index = static_cast<int>(t.probes.size());
    q.ip_id = static_cast<std::uint16_t>(q.index);
    t.probes.push_back(q);
  };
  auto syn = [&](Role role, Nanos offset) {
    Probe q = base_probe(p, train_id);
    q.flags = kSyn;
    q.seq = seqs.next();
    q.ip_len = 40;
    q.role = role;
    q.offset = offset;
    return q;
  };
  auto rst = [&](Role role, Nanos offset) {
    Probe q = base_probe(p, train_id);
    q.flags = kRst;
    q.seq = seqs.next();
    q.ip_len = p.packet_size;
    q.role = role;
    q.offset = offset;
    return q;
  };

  const Nanos t_train = p.warmup ? p.warmup_lead : 0;
  if (p.warmup) push(syn(Role::kWarmup, 0));
  for (int i = 0; i < p.drain_packets; ++i) push(rst(Role::kDrain, t_train));

  // Markers split the N load packets into (n_markers - 1) nearly equal
  // segments. Paced: load packet i leaves (i + 1) gaps after the head, and a
  // marker after the head rides right behind the load packet before it, so
  // the markers do not thin out the offered rate.
  double bits = 0;
  const int segments = n_markers - 1;
  for (int m = 0; m < n_markers; ++m) {
    const int before = p.load_packets * m / segments;  // load packets ahead of marker m
    Probe mk = syn(Role::kMarker, t_train + before * p.gap);
    if (m > 0) bits += 8.0 * mk.ip_len;
    t.markers.push_back(static_cast<int>(t.probes.size()));
    t.bits_from_head.push_back(bits);
    push(mk);
    if (m == segments) break;
    const int to = p.load_packets * (m + 1) / segments;
    for (int i = before; i < to; ++i) {
      push(rst(Role::kLoad, t_train + (i + 1) * p.gap));
      bits += 8.0 * p.packet_size;
    }
  }
  return t;
}

Train make_pair_train(const PairTrainParams& p, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  auto probe = [&](std::uint8_t flags, std::uint16_t len, Role role, Nanos offset) {
    Probe q;
    q.src = p.flow.src;
    q.dst = p.flow.dst;
    q.sport = p.flow.sport;
    q.dport = p.flow.dport;
    q.ttl = p.ttl;
    q.train = train_id;
    q.flags = flags;
    q.seq = seqs.next();
    q.ip_len = len;
    q.role = role;
    q.offset = offset;
    q.index = static_cast<int>(t.probes.size());
    q.ip_id = static_cast<std::uint16_t>(q.index);
    t.probes.push_back(q);
  };
  // Head SYN with the first load packet right behind it; pair j's packets
  // Δr_i apart, pairs Δr_t apart; the tail SYN right behind the last load
  // packet. Head-to-tail send span R_o = m·Δr_i + (m-1)·Δr_t (Figure 6; the
  // packet send times are inside the gaps of our deadline pacer).
  t.markers.push_back(0);
  t.bits_from_head.push_back(0);
  probe(kSyn, 40, Role::kMarker, 0);
  Nanos at = 0;
  double bits = 0;
  for (int j = 0; j < p.pairs; ++j) {
    if (j > 0) at += p.inter_gap;
    probe(kRst, p.packet_size, Role::kLoad, at);
    at += p.intra_gap;
    probe(kRst, p.packet_size, Role::kLoad, at);
    bits += 16.0 * p.packet_size;
  }
  t.markers.push_back(static_cast<int>(t.probes.size()));
  t.bits_from_head.push_back(bits + 8.0 * 40);
  probe(kSyn, 40, Role::kMarker, at);
  return t;
}

PairGaps pair_gaps_for_rate(double rate_bps, int pairs, int packet_size, Nanos inter_gap) {
  // §3.5.1: O = trainLen·8 / R_o with R_o = m·Δr_i + (m-1)·Δr_t, solved for
  // Δr_i exactly (the paper approximates m-1 by m and subtracts packetSendTime,
  // which our deadline pacer keeps inside the gaps).
  PairGaps g;
  g.inter_gap = inter_gap;
  const double train_bits = 8.0 * (2.0 * pairs * packet_size + 40);
  const double intra = (train_bits / rate_bps - (pairs - 1) * to_seconds(inter_gap)) / pairs;
  g.intra_gap = from_seconds(std::max(0.0, intra));
  g.reachable = intra >= 0;
  return g;
}

Nanos gap_for_rate(double rate_bps, int packet_size) {
  return static_cast<Nanos>(8.0 * packet_size / rate_bps * 1e9 + 0.5);
}

}  // namespace lw
