#include "plan/target_marker.hpp"

#include <algorithm>
#include <numeric>

namespace lw {

namespace {

constexpr std::uint8_t kFullTtl = 64;

bool is_plain_syn(const Probe& p) { return (p.flags & (kSyn | kRst | kAck)) == kSyn; }

bool same_flow(const Probe& a, const Probe& b) {
  return a.src == b.src && a.dst == b.dst && a.sport == b.sport && a.dport == b.dport;
}

}  // namespace

std::vector<int> apply_target_marker(Train& t, TargetMarker k, const IpAddr& target,
                                     std::uint8_t min_ttl, Nanos closer_delay,
                                     SeqAllocator& seqs) {
  const std::size_t n = t.probes.size();
  std::vector<int> map(n);
  std::iota(map.begin(), map.end(), 0);
  if (k == TargetMarker::kClosedSyn) return map;
  for (Probe& p : t.probes) {
    if (!is_plain_syn(p) || p.ttl < min_ttl) continue;
    if (p.dst != target) {
      p.dport = kRouterMarkerPort;
    } else if (k == TargetMarker::kAck) {
      p.flags = kAck;
      p.ack = seqs.next();  // the tag the target's RST carries back as its seq
    }
  }
  const auto touched = [&](const Probe& p) { return is_plain_syn(p) && p.ttl >= min_ttl; };

  // Find each SYN's closer among the RSTs that follow it, before the next SYN
  // that reaches the same host in the same 4-tuple.
  std::vector<char> taken(n, 0);
  std::vector<char> insert_after(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Probe& s = t.probes[i];
    if (!touched(s)) continue;
    bool found = false;
    for (std::size_t j = i + 1; j < n; ++j) {
      const Probe& q = t.probes[j];
      if (!same_flow(q, s)) continue;
      if (touched(q)) break;
      if (q.flags == kRst && !taken[j] && q.ttl >= s.ttl) {
        taken[j] = 1;
        t.probes[j].seq = s.seq + 1u;  // the SYN's ISN + 1: rcv_nxt of its request
        found = true;
        break;
      }
    }
    insert_after[i] = found ? 0 : 1;
  }

  if (std::find(insert_after.begin(), insert_after.end(), 1) == insert_after.end()) return map;

  std::vector<Probe> out;
  out.reserve(n + 4);
  for (std::size_t i = 0; i < n; ++i) {
    map[i] = static_cast<int>(out.size());
    out.push_back(t.probes[i]);
    if (!insert_after[i]) continue;
    const Probe& s = t.probes[i];
    Probe c = s;
    c.flags = kRst;
    c.seq = s.seq + 1u;
    c.ack = 0;
    c.ip_len = kCloserBytes;
    c.ttl = std::max(s.ttl, kFullTtl);
    c.role = Role::kCloser;
    c.offset = s.offset + closer_delay;
    if (i + 1 < n) c.offset = std::min(c.offset, t.probes[i + 1].offset);
    out.push_back(c);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].index = static_cast<int>(i);
    out[i].ip_id = static_cast<std::uint16_t>(i);
  }
  t.probes = std::move(out);
  for (int& m : t.markers) m = map[static_cast<std::size_t>(m)];
  if (!t.bits_from_head.empty() && !t.markers.empty()) {
    const int head = t.markers.front();
    for (std::size_t m = 0; m < t.markers.size() && m < t.bits_from_head.size(); ++m) {
      double bits = 0;
      for (int i = head + 1; i <= t.markers[m]; ++i) bits += 8.0 * t.probes[i].ip_len;
      t.bits_from_head[m] = bits;
    }
  }
  return map;
}

Train make_port_probes(const FlowId& flow,
                       const std::vector<std::pair<std::uint16_t, TargetMarker>>& probes,
                       Nanos spacing, int train_id, SeqAllocator& seqs) {
  Train t;
  t.id = train_id;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    Probe p;
    p.src = flow.src;
    p.dst = flow.dst;
    p.sport = flow.sport;
    p.dport = probes[i].first;
    p.flags = kSyn;
    p.seq = seqs.next();
    p.ip_len = bare_tcp_len(flow.dst);
    p.flow_label = flow.flow_label;
    p.role = Role::kMarker;
    p.train = train_id;
    p.offset = static_cast<Nanos>(i) * spacing;  // spread out: no burst at the target
    if (probes[i].second == TargetMarker::kAck) {
      p.flags = kAck;
      p.ack = seqs.next();
    }
    t.markers.push_back(static_cast<int>(t.probes.size()));
    t.probes.push_back(p);
  }
  apply_target_marker(t, TargetMarker::kOpenSyn, flow.dst, 1, 0, seqs);
  return t;
}

}  // namespace lw
