#include "plan/hops_plan.hpp"

#include <algorithm>
#include <cmath>

#include "plan/target_marker.hpp"

namespace lw {

namespace {

Probe syn_probe(const FlowId& flow, int train_id, SeqAllocator& seqs) {
  Probe q;
  q.src = flow.src;
  q.dst = flow.dst;
  q.sport = flow.sport;
  q.dport = flow.dport;
  q.flow_label = flow.flow_label;
  q.flags = kSyn;
  q.seq = seqs.next();
  q.ip_len = bare_tcp_len(flow.dst);
  q.role = Role::kMarker;
  q.train = train_id;
  return q;
}

void push(Train& t, Probe q) {
  q.index = static_cast<int>(t.probes.size());
  q.ip_id = static_cast<std::uint16_t>(q.index);
  t.probes.push_back(q);
}

}  // namespace

MarkerKind initial_marker_kind(HopMarkers mode, bool last, bool addressable,
                               bool answers_tcp) {
  if (last) return MarkerKind::kTarget;
  if (mode == HopMarkers::kAddr && addressable) return MarkerKind::kAddr;
  if (mode == HopMarkers::kAuto && addressable && answers_tcp) return MarkerKind::kAddr;
  return MarkerKind::kTtl;
}

bool MarkerChoice::record(bool got_reply, bool answers_tcp, int patience) {
  ++asked;
  answered += got_reply ? 1 : 0;
  if (switched || kind == MarkerKind::kTarget || asked < patience || answered > 0) return false;
  if (kind == MarkerKind::kAddr) {
    kind = MarkerKind::kTtl;
  } else if (answers_tcp) {
    kind = MarkerKind::kAddr;
  } else {
    return false;
  }
  switched = true;
  asked = answered = 0;
  return true;
}

Train make_ttl_sweep(const FlowId& flow, const std::vector<int>& ttls, Nanos spacing, int train_id,
                     SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  for (std::size_t i = 0; i < ttls.size(); ++i) {
    Probe q = syn_probe(flow, train_id, seqs);
    q.ttl = static_cast<std::uint8_t>(ttls[i]);
    q.offset = static_cast<Nanos>(i) * spacing;
    t.markers.push_back(static_cast<int>(t.probes.size()));
    push(t, q);
  }
  // Every TTL may reach the target: each SYN that does gets its closer.
  apply_target_marker(t, flow, seqs);
  return t;
}

Train make_addr_check(const FlowId& flow, const std::vector<IpAddr>& addrs, Nanos spacing,
                      int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    Probe q = syn_probe(flow, train_id, seqs);
    q.dst = addrs[i];
    q.offset = static_cast<Nanos>(i) * spacing;
    t.markers.push_back(static_cast<int>(t.probes.size()));
    push(t, q);
  }
  apply_target_marker(t, flow, seqs);  // only the SYNs addressed to the target
  return t;
}

RecursiveTrain make_recursive_train(const RecursiveTrainParams& p, int train_id,
                                    SeqAllocator& seqs) {
  RecursiveTrain rt;
  Train& t = rt.train;
  t.id = train_id;
  const int H = static_cast<int>(p.hops.size());
  auto marker = [&](const HopMarker& h) {
    Probe q = syn_probe(p.flow, train_id, seqs);
    if (h.kind == MarkerKind::kTtl) q.ttl = static_cast<std::uint8_t>(h.ttl);
    if (h.kind == MarkerKind::kAddr) q.dst = h.addr;
    return q;
  };
  auto rst = [&](Role role) {
    Probe q;
    q.src = p.flow.src;
    q.dst = p.flow.dst;
    q.sport = p.flow.sport;
    q.dport = p.flow.dport;
    q.flow_label = p.flow.flow_label;
    q.flags = kRst;
    q.seq = seqs.next();
    q.ip_len = p.packet_size;
    q.role = role;
    q.train = train_id;
    return q;
  };
  // Everything leaves back to back (offset 0): the pacer sends as fast as it can.
  for (int i = 0; i < p.drain_packets; ++i) push(t, rst(Role::kDrain));
  rt.head.assign(H, -1);
  rt.tail.assign(H, -1);
  for (int k = 0; k < H; ++k) {  // head: TTL 1..H (Figure 4)
    rt.head[k] = static_cast<int>(t.probes.size());
    push(t, marker(p.hops[k]));
  }
  for (int i = 0; i < p.load_packets; ++i) push(t, rst(Role::kLoad));
  for (int k = H - 1; k >= 0; --k) {  // tail: TTL H..1
    rt.tail[k] = static_cast<int>(t.probes.size());
    push(t, marker(p.hops[k]));
  }
  for (int k = 0; k < H; ++k) t.markers.push_back(rt.head[k]);
  for (int k = H - 1; k >= 0; --k) t.markers.push_back(rt.tail[k]);
  // The target's own markers (full TTL); TTL-limited ones expire at routers.
  const std::vector<int> moved = apply_target_marker(t, p.flow, seqs, 64);
  for (int k = 0; k < H; ++k) {
    rt.head[k] = moved[static_cast<std::size_t>(rt.head[k])];
    rt.tail[k] = moved[static_cast<std::size_t>(rt.tail[k])];
  }
  rt.bits.assign(H, 0.0);
  for (int k = 0; k < H; ++k) {
    double bits = 0;
    for (int i = rt.head[k] + 1; i <= rt.tail[k]; ++i) bits += 8.0 * t.probes[i].ip_len;
    rt.bits[k] = bits;
  }
  return rt;
}

double IcmpBudget::tokens(Nanos now) const {
  if (!started_) return burst_;
  return std::min(burst_, tokens_ + rate_ * to_seconds(std::max<Nanos>(0, now - last_)));
}

Nanos IcmpBudget::ready_at(double need, Nanos now) const {
  const double have = tokens(now);
  if (have >= need || rate_ <= 0) return now;
  return now + static_cast<Nanos>(std::ceil((need - have) / rate_ * 1e9));
}

void IcmpBudget::spend(double n, Nanos now) {
  tokens_ = std::max(0.0, tokens(now) - n);
  last_ = now;
  started_ = true;
}

void IcmpBudget::drain(Nanos now) {
  tokens_ = 0;
  last_ = now;
  started_ = true;
}

}  // namespace lw
