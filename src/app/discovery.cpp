#include "app/discovery.hpp"

#include <algorithm>

#include "linkwidth/error.hpp"

namespace lw {

std::vector<int> default_candidate_ports() { return {47391, 33871, 58213, 41777}; }

namespace {

// ICMPv6 destination unreachable codes (RFC 4443 §3.1), worded like ICMPv4's.
std::string icmp6_unreach_text(int code) {
  switch (code) {
    case 0:
      return "network unreachable (no route)";
    case 1:
    case 5:  // source address failed ingress/egress policy
    case 6:  // reject route to destination
      return "administratively prohibited";
    case 2:
      return "beyond scope of source address";
    case 3:
      return "host unreachable (address unreachable)";
    case 4:
      return "port unreachable";
    default:
      return "unreachable (ICMPv6 code " + std::to_string(code) + ")";
  }
}

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

double round_trip_s(const TrainOutcome& o) {
  // From when the capture saw the SYN leave, not from the send call: the
  // first packets to a neighbour wait in the kernel for its ARP answer, which
  // is no part of the path's RTT (behind a long link it is a whole RTT more).
  // The smallest over the replies: the others may have queued behind them.
  Nanos best = 0;
  for (const ProbeOutcome& p : o.probes) {
    if (p.kind != ReplyKind::kRstAck || p.reply == 0) continue;
    const Nanos from = p.left > 0 && p.left <= p.reply ? p.left : p.sent;
    const Nanos rtt = p.reply - from;
    if (rtt > 0 && (best == 0 || rtt < best)) best = rtt;
  }
  return to_seconds(best);
}

DiscoveryResult discover_closed_port(Prober& prober, const FlowId& flow,
                                     const std::vector<int>& candidates, int tries, Nanos timeout,
                                     SeqAllocator& seqs) {
  DiscoveryResult res;
  std::vector<int> ports = candidates;
  std::string icmp_reason;
  IpAddr icmp_from;
  const auto interrupted = [] {
    return Error("discovery", "interrupted before a closed port was found", "interrupted",
                 ExitCode::kInterrupted);
  };
  // 1 ms apart, or further under a --max-rate that 40 (IPv6: 60) bytes per ms would pass.
  const std::uint16_t bare = bare_tcp_len(flow.dst);
  const Nanos spacing = prober.max_rate_bps() > 0
                            ? std::max<Nanos>(kMs, min_gap_for_rate(prober.max_rate_bps(), bare))
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
      p.ip_len = bare;
      p.flow_label = flow.flow_label;
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
      if (o.kind == ReplyKind::kIcmp && o.icmp_kind == IcmpKind::kUnreachable) {
        icmp_reason = flow.dst.is_v6() ? icmp6_unreach_text(o.icmp_code)
                                       : icmp_unreach_text(o.icmp_code);
        icmp_from = o.reply_from;
      }
    }
    if (best >= 0) {
      const ProbeOutcome& o = run.outcome.probes[best];
      res.port = ports[best];
      res.rtt_s = round_trip_s(run.outcome);
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
                    format_ipv4(icmp_from) + " answered ICMP" + (flow.dst.is_v6() ? "v6 " : " ") +
                    icmp_reason,
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
