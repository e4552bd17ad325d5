#include "app/plumbing/discovery_rules.hpp"

#include <algorithm>

namespace lw {

std::vector<int> default_candidate_ports() { return {47391, 33871, 58213, 41777}; }

std::vector<int> default_service_ports() { return {443, 80, 22, 25, 53, 8080, 8443}; }

DiscoveryPorts discovery_ports(int user_port) {
  DiscoveryPorts p;
  if (user_port > 0) {
    p.closed = {user_port};
    p.user_port = true;
  } else {
    p.closed = default_candidate_ports();
    p.service = default_service_ports();
  }
  return p;
}

int discovery_rounds(int tries) { return std::max(tries, 3); }

namespace {

bool answered(const std::vector<PortAnswer>& seen, int port, TargetMarker kind) {
  for (const PortAnswer& a : seen) {
    if (a.probe.port == port && a.probe.kind == kind && a.reply != ReplyKind::kNone) return true;
  }
  return false;
}

bool is_syn(TargetMarker k) { return k != TargetMarker::kAck; }

// ICMP destination unreachable that says the target is out of reach (not a
// firewall's rejection of one port): network or host unreachable, and the
// other codes that name no port (unknown network/host, isolated, TOS).
// Destination unreachable: ICMP type 3, ICMPv6 type 1 (RFC 4443 §3.1).
bool is_unreachable(const PortAnswer& a, bool v6) {
  return a.reply == ReplyKind::kIcmp && a.icmp_type == (v6 ? 1 : 3);
}

bool unreachable_host(const PortAnswer& a, bool v6) {
  if (!is_unreachable(a, v6)) return false;
  if (v6) return a.icmp_code == 0 || a.icmp_code == 2 || a.icmp_code == 3;
  return a.icmp_code != 3 && a.icmp_code != 9 && a.icmp_code != 10 && a.icmp_code != 13;
}

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

std::string port_list(const std::vector<int>& ports) {
  std::string s;
  for (int p : ports) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

}  // namespace

std::vector<PortProbe> discovery_round(const DiscoveryPorts& ports, int round,
                                       const std::vector<PortAnswer>& seen) {
  std::vector<PortProbe> out;
  // A SYN port is asked again only while it stays silent.
  for (int p : ports.closed) {
    if (!answered(seen, p, TargetMarker::kClosedSyn)) out.push_back({p, TargetMarker::kClosedSyn});
  }
  if (round >= 1) {
    for (int p : ports.service) {
      if (!answered(seen, p, TargetMarker::kOpenSyn)) out.push_back({p, TargetMarker::kOpenSyn});
    }
  }
  if (round >= 2) {
    for (int p : ports.closed) out.push_back({p, TargetMarker::kAck});
    for (int p : ports.service) out.push_back({p, TargetMarker::kAck});
  }
  return out;
}

DiscoveryChoice decide_marker(const DiscoveryPorts& ports, const std::vector<PortAnswer>& seen,
                              int round, int rounds, const IpAddr& target) {
  DiscoveryChoice d;
  const bool v6 = target.is_v6();
  int closed = -1, open = -1, ack = -1, host_gone = -1, icmp = -1;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const PortAnswer& a = seen[i];
    const int k = static_cast<int>(i);
    if (is_syn(a.probe.kind) && a.reply == ReplyKind::kRstAck) {
      if (closed < 0) closed = k;
    } else if (is_syn(a.probe.kind) && a.reply == ReplyKind::kSynAck) {
      if (open < 0) open = k;
      if (a.probe.kind == TargetMarker::kClosedSyn &&
          std::find(d.open_ports.begin(), d.open_ports.end(), a.probe.port) ==
              d.open_ports.end()) {
        d.open_ports.push_back(a.probe.port);
      }
    } else if (a.probe.kind == TargetMarker::kAck && a.reply == ReplyKind::kRst) {
      if (ack < 0) ack = k;
    } else if (is_unreachable(a, v6)) {
      if (unreachable_host(a, v6) && host_gone < 0) host_gone = k;
      if (icmp < 0) icmp = k;
    }
  }
  const int use = closed >= 0 ? closed : open >= 0 ? open : ack;
  if (use >= 0) {
    d.outcome = DiscoveryChoice::kUse;
    d.answer = use;
    d.port = seen[static_cast<std::size_t>(use)].probe.port;
    d.kind = closed >= 0 ? TargetMarker::kClosedSyn
                         : open >= 0 ? TargetMarker::kOpenSyn : TargetMarker::kAck;
    if (d.kind != TargetMarker::kClosedSyn) d.open_ports.clear();  // nothing was skipped
    return d;
  }
  const bool more = host_gone < 0 && round + 1 < rounds &&
                    !discovery_round(ports, round + 1, seen).empty();
  if (more) return d;  // kAskAgain

  d.outcome = DiscoveryChoice::kFail;
  const std::string t = format_ipv4(target);
  const int why = host_gone >= 0 ? host_gone : icmp;
  if (why >= 0) {
    const PortAnswer& a = seen[static_cast<std::size_t>(why)];
    const std::string reason = v6 ? icmp6_unreach_text(a.icmp_code) : icmp_unreach_text(a.icmp_code);
    const bool filtered = reason == "administratively prohibited";
    d.code = filtered ? "target_filtered" : "target_unreachable";
    d.message = "target " + t + " is " + (filtered ? "filtered" : "unreachable") + ": " +
                format_ipv4(a.from) + " answered ICMP" + (v6 ? "v6 " : " ") + reason;
    return d;
  }
  d.code = "target_filtered";
  if (ports.user_port) {
    d.message = "target " + t + " is filtered: no reply to SYNs or bare ACKs on port " +
                port_list(ports.closed) + " in " + std::to_string(round + 1) + " rounds";
  } else {
    d.message = "target " + t + " is filtered: no reply to SYNs on closed-port candidates " +
                port_list(ports.closed) + " or service ports " + port_list(ports.service) +
                ", nor to bare ACKs, in " + std::to_string(round + 1) + " rounds";
  }
  return d;
}

}  // namespace lw
