#include "plan/capacity_plan.hpp"

#include <algorithm>
#include <cmath>

#include "plan/target_marker.hpp"

namespace lw {

const char kProbeSignature[] =
    "linkwidth bandwidth probe: TCP RST load to a closed port, dropped by design. "
    "See the linkwidth README.";

namespace {

Probe base_probe(const FlowId& flow, std::uint8_t ttl, int train_id) {
  Probe q;
  q.src = flow.src;
  q.dst = flow.dst;
  q.sport = flow.sport;
  q.dport = flow.dport;
  q.flow_label = flow.flow_label;
  q.ttl = ttl;
  q.train = train_id;
  return q;
}

}  // namespace

void push_flow_probe(Train& t, const FlowId& flow, std::uint8_t ttl, std::uint8_t flags,
                     std::uint32_t seq, std::uint16_t ip_len, Role role, Nanos offset) {
  Probe q = base_probe(flow, ttl, t.id);
  q.flags = flags;
  q.seq = seq;
  q.ip_len = ip_len;
  q.role = role;
  q.offset = offset;
  q.index = static_cast<int>(t.probes.size());
  q.ip_id = static_cast<std::uint16_t>(q.index);
  t.probes.push_back(q);
}

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
    Probe q = base_probe(p.flow, p.ttl, train_id);
    q.flags = kSyn;
    q.seq = seqs.next();
    q.ip_len = bare_tcp_len(p.flow.dst);
    q.role = role;
    q.offset = offset;
    return q;
  };
  auto rst = [&](Role role, Nanos offset) {
    Probe q = base_probe(p.flow, p.ttl, train_id);
    q.flags = kRst;
    q.seq = seqs.next();
    q.ip_len = p.packet_size;
    q.role = role;
    q.offset = offset;
    return q;
  };

  const Nanos t_train = p.warmup ? p.warmup_lead : 0;
  if (p.warmup) push(syn(Role::kWarmup, 0));
  for (int i = 0; i < p.drain_packets; ++i) push(rst(Role::kDrain, t_train + i * p.drain_gap));
  // The head leaves after the drain packets (at once when they go back to back).
  const Nanos t_head = t_train + p.drain_packets * p.drain_gap;

  // Markers split the N load packets into (n_markers - 1) nearly equal
  // segments, or the first first_segment long and the rest nearly equal.
  // Paced: load packet i leaves (i + 1) gaps after the head, and a marker
  // after the head rides right behind the load packet before it, so the
  // markers do not thin out the offered rate.
  double bits = 0;
  const int segments = n_markers - 1;
  const int first = n_markers > 2 ? std::clamp(p.first_segment, 0, p.load_packets) : 0;
  auto ahead = [&](int m) {  // load packets ahead of marker m
    if (first == 0 || m == 0) return p.load_packets * m / segments;
    return first + (p.load_packets - first) * (m - 1) / (segments - 1);
  };
  for (int m = 0; m < n_markers; ++m) {
    const int before = ahead(m);
    Probe mk = syn(Role::kMarker, t_head + before * p.gap);
    if (m > 0) bits += 8.0 * mk.ip_len;
    t.markers.push_back(static_cast<int>(t.probes.size()));
    t.bits_from_head.push_back(bits);
    push(mk);
    if (m == segments) break;
    const int to = ahead(m + 1);
    for (int i = before; i < to; ++i) {
      push(rst(Role::kLoad, t_head + (i + 1) * p.gap));
      bits += 8.0 * p.packet_size;
    }
  }
  // An inserted closer after the tail waits one gap: a train paced at the
  // --max-rate cap has the tokens for it then.
  apply_target_marker(t, p.flow, seqs, 1, p.gap);
  return t;
}

Train make_pair_train(const PairTrainParams& p, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  auto probe = [&](std::uint8_t flags, std::uint16_t len, Role role, Nanos offset) {
    push_flow_probe(t, p.flow, p.ttl, flags, seqs.next(), len, role, offset);
  };
  // Head SYN with the first load packet right behind it; pair j's packets
  // Δr_i apart, pairs Δr_t apart; the tail SYN right behind the last load
  // packet. Head-to-tail send span R_o = m·Δr_i + (m-1)·Δr_t (Figure 6; the
  // packet send times are inside the gaps of our deadline pacer).
  t.markers.push_back(0);
  t.bits_from_head.push_back(0);
  const std::uint16_t bare = bare_tcp_len(p.flow.dst);
  probe(kSyn, bare, Role::kMarker, 0);
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
  t.bits_from_head.push_back(bits + 8.0 * bare);
  probe(kSyn, bare, Role::kMarker, at);
  apply_target_marker(t, p.flow, seqs, 1, p.inter_gap);
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

Nanos min_gap_for_rate(double rate_bps, int packet_size) {
  return static_cast<Nanos>(std::ceil(8.0 * packet_size * 1e9 / rate_bps));
}

double slow_train_rate(double fast_bps, double capacity_bps) {
  if (!(fast_bps > 0) || !(capacity_bps > 0)) return 0;
  const double slow = std::max(fast_bps / 2.5, 2 * capacity_bps);
  return slow * 1.5 <= fast_bps ? slow : 0;
}

bool slow_train_turn(int measured) {
  return (measured / 2) % kSlowTrainCycle == kSlowTrainCycle - 1;
}

void apply_rate_cap(CapacityTrainParams& p, double max_rate_bps) {
  const int bare = bare_tcp_len(p.flow.dst);  // a marker: 40 bytes over IPv4, 60 over IPv6
  p.gap = std::max(p.gap, min_gap_for_rate(max_rate_bps, p.packet_size + bare));
  if (p.drain_packets * static_cast<double>(p.packet_size) + 2 * bare > kRateBurstBytes) {
    p.drain_gap = std::max(p.drain_gap, min_gap_for_rate(max_rate_bps, p.packet_size));
  }
}

void space_to_rate(Train& t, double rate_bps, double burst_bytes) {
  double tokens = burst_bytes;
  Nanos shift = 0;
  Nanos prev = 0;
  for (std::size_t i = 0; i < t.probes.size(); ++i) {
    Nanos at = t.probes[i].offset + shift;
    if (i > 0) {
      tokens = std::min(burst_bytes, tokens + static_cast<double>(std::max<Nanos>(0, at - prev)) *
                                                  rate_bps / 8e9);
    }
    const double need = t.probes[i].ip_len;
    if (tokens < need) {
      const Nanos wait = static_cast<Nanos>(std::ceil((need - tokens) * 8e9 / rate_bps)) + 1;
      at += wait;
      shift += wait;
      tokens = need;
    }
    tokens -= need;
    t.probes[i].offset = at;
    prev = at;
  }
}

int first_over_rate(const Train& t, double rate_bps, double burst_bytes) {
  double tokens = burst_bytes;  // bytes
  for (std::size_t i = 0; i < t.probes.size(); ++i) {
    if (i > 0) {
      const double dt = static_cast<double>(t.probes[i].offset - t.probes[i - 1].offset);
      tokens = std::min(burst_bytes, tokens + std::max(0.0, dt) * rate_bps / 8e9);
    }
    // A millibyte of slack for the rounding of gaps to whole nanoseconds.
    if (tokens + 1e-3 < t.probes[i].ip_len) return static_cast<int>(i);
    tokens -= t.probes[i].ip_len;
  }
  return -1;
}

}  // namespace lw
