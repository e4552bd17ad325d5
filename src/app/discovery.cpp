#include "app/discovery.hpp"

#include <algorithm>

#include "linkwidth/error.hpp"
#include "plan/target_marker.hpp"

namespace lw {

namespace {

// How long to keep listening after the first reply of a round: the other
// probes left within the round's send span and answer about one RTT later.
constexpr Nanos kSettle = 50 * kMs;

}  // namespace

DiscoveryResult discover_marker(Prober& prober, const FlowId& flow, const DiscoveryPorts& ports,
                                int tries, Nanos timeout, SeqAllocator& seqs) {
  DiscoveryResult res;
  const auto interrupted = [] {
    return Error("discovery", "interrupted before a marker port was found", "interrupted",
                 ExitCode::kInterrupted);
  };
  // 1 ms apart, or further under a --max-rate that 100 bytes (a SYN and its
  // closer) per ms would pass.
  const Nanos spacing = prober.max_rate_bps() > 0
                            ? std::max<Nanos>(kMs, min_gap_for_rate(prober.max_rate_bps(), 100))
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
      a.rtt_s = o.reply != 0 && o.sent != 0 ? to_seconds(o.reply - o.sent) : 0;
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
