#pragma once
// The decisions of marker discovery as pure functions (no sockets, no clock):
// which probes a round sends, and what the answers so far mean. app/discovery
// runs them against the prober. Order of preference (README, "Open-port
// markers"):
//   1. a closed port: SYN -> RST/ACK                        (closed_syn)
//   2. a listening port: SYN -> SYN/ACK, closed at once     (open_syn)
//   3. a bare ACK drawing an RST: only on a host without a  (ack)
//      stateful firewall in front of it
//
//   DiscoveryPorts ports = discovery_ports(0);            // or --port P
//   std::vector<PortAnswer> seen;
//   for (int r = 0;; ++r) {
//     for (PortProbe p : discovery_round(ports, r, seen)) ... send, record in seen
//     DiscoveryChoice d = decide_marker(ports, seen, r, rounds);
//     if (d.outcome != DiscoveryChoice::kAskAgain) break;
//   }
#include <cstdint>
#include <string>
#include <vector>

#include "match/match.hpp"
#include "plan/probe.hpp"

namespace lw {

struct DiscoveryPorts {
  std::vector<int> closed;   // closed-port candidates (SYN), or the user's --port
  std::vector<int> service;  // listening-port candidates (SYN), from the second round
  bool user_port = false;    // --port P given: closed = {P}, no service ports
};

// Closed-port candidates when the user names none: high, unassigned, rarely served.
std::vector<int> default_candidate_ports();
// Ports that commonly listen on servers reachable from anywhere (HTTPS, HTTP,
// SSH, mail, DNS over TCP, alternative HTTP).
std::vector<int> default_service_ports();
// --port P (0 = none given).
DiscoveryPorts discovery_ports(int user_port);

// Rounds discovery runs at most: --tries, but at least one with each kind of
// probe (closed SYNs; service SYNs; bare ACKs).
int discovery_rounds(int tries);

struct PortProbe {
  int port = 0;
  // kClosedSyn: SYN to a closed-port candidate; kOpenSyn: SYN to a service
  // port; kAck: bare ACK. Every discovery SYN is followed by a closer RST (any
  // candidate may be open: we never leave a half-open connection behind).
  TargetMarker kind = TargetMarker::kClosedSyn;
};

struct PortAnswer {
  PortProbe probe;
  int round = 0;
  ReplyKind reply = ReplyKind::kNone;
  std::uint8_t icmp_type = 0, icmp_code = 0;
  IpAddr from;  // source of the reply
  double rtt_s = 0;
  int ttl = 0;
  std::uint16_t ip_id = 0;
};

// Round `round` (0-based): SYNs to the closed candidates that have not
// answered SYN/ACK; from round 1 also SYNs to the service ports; from round 2
// also bare ACKs to the closed candidates, then the service ports.
std::vector<PortProbe> discovery_round(const DiscoveryPorts& ports, int round,
                                       const std::vector<PortAnswer>& seen);

struct DiscoveryChoice {
  enum Outcome { kUse, kAskAgain, kFail } outcome = kAskAgain;
  TargetMarker kind = TargetMarker::kClosedSyn;
  int port = 0;
  int answer = -1;              // index into `seen` of the answer that decided (kUse)
  std::vector<int> open_ports;  // closed candidates that answered SYN/ACK (skipped)
  std::string code, message;    // kFail: error code (target_filtered, ...) and sentence
};

// What the answers of rounds 0..round mean; `rounds` is discovery_rounds().
// The first answer (in round, then send order) of the most preferred kind
// wins. ICMP net/host unreachable ends discovery at once (nothing else will
// come back); other ICMP errors (a firewall rejecting closed ports) do not.
DiscoveryChoice decide_marker(const DiscoveryPorts& ports, const std::vector<PortAnswer>& seen,
                              int round, int rounds, const IpAddr& target);

}  // namespace lw
