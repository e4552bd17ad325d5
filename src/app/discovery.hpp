#pragma once
// Closed-port discovery: a few SYNs; a port answering RST/ACK is usable, one
// answering SYN/ACK is open and skipped; silence on every port after all tries
// is "target is filtered".
#include <cstdint>
#include <vector>

#include "app/prober.hpp"
#include "plan/capacity_plan.hpp"
#include "report/result.hpp"

namespace lw {

struct DiscoveryResult {
  int port = 0;
  double rtt_s = 0;
  int reply_ttl = 0;  // TTL and IP ID of the RST/ACK that named the port
  std::uint16_t reply_ip_id = 0;
  std::vector<int> open_ports;
  std::vector<Warning> warnings;
};

// Ports we try when the user names none: high, unassigned, rarely served.
std::vector<int> default_candidate_ports();

// The round trip of a round of SYNs, seconds (0 = no RST/ACK): the smallest
// reply time after the capture saw the SYN leave.
double round_trip_s(const TrainOutcome& o);

// Throws Error with code target_filtered / unreachable / no_closed_port.
DiscoveryResult discover_closed_port(Prober& prober, const FlowId& flow,
                                     const std::vector<int>& candidates, int tries,
                                     Nanos timeout, SeqAllocator& seqs);

}  // namespace lw
