#include "app/discovery.hpp"

#include <algorithm>

#include "linkwidth/error.hpp"

namespace lw {

std::vector<int> default_candidate_ports() { return {47391, 33871, 58213, 41777}; }

namespace {

std::string icmp_unreach_text(int code) {
  switch (code) {
    case 0:
      return "network unreachable";
    case 1:
      return "host unreachable";
    case 2:
      return "protocol unreachable";
    case 3:
      return "port unreachable";
    case 9:
    case 10:
    case 13:
      return "administratively prohibited";
    default:
      return "unreachable (code " + std::to_string(code) + ")";
  }
}

}  // namespace

DiscoveryResult discover_closed_port(Prober& prober, const FlowId& flow,
                                     const std::vector<int>& candidates, int tries, Nanos timeout,
                                     SeqAllocator& seqs) {
  DiscoveryResult res;
  std::vector<int> ports = candidates;
  std::string icmp_reason;
  std::uint32_t icmp_from = 0;
  const auto interrupted = [] {
    return Error("discovery", "interrupted before a closed port was found", "interrupted",
                 ExitCode::kInterrupted);
  };
  // 1 ms apart, or further under a --max-rate that 40 bytes per ms would pass.
  const Nanos spacing = prober.max_rate_bps() > 0
                            ? std::max<Nanos>(kMs, min_gap_for_rate(prober.max_rate_bps(), 40))
                            : kMs;
  for (int attempt = 0; attempt < tries && !ports.empty(); ++attempt) {
    if (prober.stopped()) throw interrupted();
    Train t;
    t.id = -1 - attempt;
    for (std::size_t i = 0; i < ports.size(); ++i) {
      Probe p;
      p.src = flow.src;
      p.dst = flow.dst;
      p.sport = flow.sport;
      p.dport = static_cast<std::uint16_t>(ports[i]);
      p.flags = kSyn;
      p.seq = seqs.next();
      p.ip_len = 40;
      p.role = Role::kMarker;
      p.train = t.id;
      p.index = static_cast<int>(i);
      p.offset = static_cast<Nanos>(i) * spacing;  // spread out: no burst at the target
      t.probes.push_back(p);
    }
    std::vector<int> all(t.probes.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    const TrainRun run = prober.run(t, all, timeout, /*any=*/true);
    if (prober.stopped()) throw interrupted();

    int best = -1;
    for (std::size_t i = 0; i < t.probes.size(); ++i) {
      const ProbeOutcome& o = run.outcome.probes[i];
      if (o.kind == ReplyKind::kRstAck && best < 0) best = static_cast<int>(i);
      if (o.kind == ReplyKind::kSynAck) res.open_ports.push_back(ports[i]);
      if (o.kind == ReplyKind::kIcmp && o.icmp_type == 3) {
        icmp_reason = icmp_unreach_text(o.icmp_code);
        icmp_from = o.reply_from;
      }
    }
    if (best >= 0) {
      const ProbeOutcome& o = run.outcome.probes[best];
      res.port = ports[best];
      res.rtt_s = to_seconds(o.reply - o.sent);
      res.reply_ttl = o.reply_ttl;
      res.reply_ip_id = o.reply_ip_id;
      if (!res.open_ports.empty()) {
        res.warnings.push_back({WarningCode::kOpenPortsSkipped,
                                std::to_string(res.open_ports.size()) +
                                    " candidate port(s) answered SYN/ACK (open) and were skipped"});
      }
      return res;
    }
    // Open ports are never used; keep asking only the silent ones.
    ports.erase(std::remove_if(ports.begin(), ports.end(),
                               [&](int p) {
                                 return std::find(res.open_ports.begin(), res.open_ports.end(),
                                                  p) != res.open_ports.end();
                               }),
                ports.end());
    if (!icmp_reason.empty()) break;
  }
  const std::string target = format_ipv4(flow.dst);
  if (!icmp_reason.empty()) {
    const bool filtered = icmp_reason == "administratively prohibited";
    throw Error("discovery",
                "target " + target + " is " + (filtered ? "filtered" : "unreachable") + ": " +
                    format_ipv4(icmp_from) + " answered ICMP " + icmp_reason,
                filtered ? "target_filtered" : "target_unreachable");
  }
  if (ports.empty()) {
    throw Error("discovery",
                "no closed port found on " + target +
                    ": every candidate port is open (SYN/ACK); name a closed one with --port",
                "no_closed_port");
  }
  throw Error(
      "discovery",
      "target " + target + " is filtered: no reply to SYNs on port(s) " +
          [&] {
            std::string s;
            for (int p : ports) s += (s.empty() ? "" : ",") + std::to_string(p);
            return s;
          }() +
          " after " + std::to_string(tries) + " tries",
      "target_filtered");
}

}  // namespace lw
