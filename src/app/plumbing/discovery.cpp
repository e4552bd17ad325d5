#include "app/plumbing/discovery.hpp"

#include <algorithm>

#include "linkwidth/error.hpp"
#include "plan/target_marker.hpp"

namespace lw {

namespace {

// How long to keep listening after the first reply of a round: the other
// probes left within the round's send span and answer about one RTT later.
constexpr Nanos kSettle = 50 * kMs;

}  // namespace

double round_trip_s(const TrainOutcome& o) {
  // From when the capture saw the probe leave, not from the send call: the
  // first packets to a neighbour wait in the kernel for its ARP answer, which
  // is no part of the path's RTT (behind a long link it is a whole RTT more).
  // The smallest over the replies: the others may have queued behind them.
  Nanos best = 0;
  for (const ProbeOutcome& p : o.probes) {
    if (!is_tcp_answer(p.kind) || p.reply == 0) continue;
    const Nanos from = p.left > 0 && p.left <= p.reply ? p.left : p.sent;
    const Nanos rtt = p.reply - from;
    if (rtt > 0 && (best == 0 || rtt < best)) best = rtt;
  }
  return to_seconds(best);
}

DiscoveryResult discover_marker(Prober& prober, const FlowId& flow, const DiscoveryPorts& ports,
                                int tries, Nanos timeout, SeqAllocator& seqs) {
  DiscoveryResult res;
  const auto interrupted = [] {
    return Error("discovery", "interrupted before a marker port was found", "interrupted",
                 ExitCode::kInterrupted);
  };
  // 1 ms apart, or further under a --max-rate that a SYN and its closer (40
  // and 60 bytes; IPv6: 60 and 60) per ms would pass.
  const std::uint16_t bare = bare_tcp_len(flow.dst);
  const Nanos spacing = prober.max_rate_bps() > 0
                            ? std::max<Nanos>(kMs, min_gap_for_rate(prober.max_rate_bps(), bare + kCloserBytes))
                            : kMs;
  const int rounds = discovery_rounds(tries);
  std::vector<PortAnswer> seen;
  for (int round = 0;; ++round) {
    if (prober.stopped()) throw interrupted();
    const std::vector<PortProbe> probes = discovery_round(ports, round, seen);
    std::vector<std::pair<std::uint16_t, TargetMarker>> spec;
    for (const PortProbe& p : probes) spec.emplace_back(static_cast<std::uint16_t>(p.port), p.kind);
    const Train t = make_port_probes(flow, spec, spacing, -1 - round, seqs);
    const Nanos span = static_cast<Nanos>(probes.size()) * spacing;
    const TrainRun run = prober.run(t, t.markers, timeout, false, 0, span + kSettle);
    if (prober.stopped()) throw interrupted();
    for (std::size_t i = 0; i < probes.size(); ++i) {
      const ProbeOutcome& o = run.outcome.probes[static_cast<std::size_t>(t.markers[i])];
      PortAnswer a;
      a.probe = probes[i];
      a.round = round;
      a.reply = o.kind;
      a.icmp_type = o.icmp_type;
      a.icmp_code = o.icmp_code;
      a.from = o.reply_from;
      // From when the capture saw the probe leave (not the send call: the first
      // packets to a neighbour wait for its ARP/ND answer, no part of the RTT).
      const Nanos from = o.left > 0 && o.left <= o.reply ? o.left : o.sent;
      a.rtt_s = o.reply != 0 && from != 0 ? to_seconds(o.reply - from) : 0;
      a.ttl = o.reply_ttl;
      a.ip_id = o.reply_ip_id;
      seen.push_back(a);
    }
    res.replies_asked = static_cast<int>(probes.size());
    const DiscoveryChoice d = decide_marker(ports, seen, round, rounds, flow.dst);
    if (d.outcome == DiscoveryChoice::kAskAgain) continue;
    if (d.outcome == DiscoveryChoice::kFail) throw Error("discovery", d.message, d.code);
    const PortAnswer& a = seen[static_cast<std::size_t>(d.answer)];
    res.port = d.port;
    res.kind = d.kind;
    res.rtt_s = a.rtt_s;
    res.reply_ttl = a.ttl;
    res.reply_ip_id = a.ip_id;
    res.open_ports = d.open_ports;
    if (!res.open_ports.empty()) {
      res.warnings.push_back({WarningCode::kOpenPortsSkipped,
                              std::to_string(res.open_ports.size()) +
                                  " candidate port(s) answered SYN/ACK (open) and were skipped"});
    }
    return res;
  }
}

}  // namespace lw
