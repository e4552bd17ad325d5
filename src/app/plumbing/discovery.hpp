#pragma once
// Marker discovery: SYNs to closed-port candidates, then SYNs to listening
// service ports, then bare ACKs (app/discovery_rules.hpp decides); the first
// kind that draws replies is the run's marker kind. Every SYN it sends is
// followed by a closer RST, so no candidate that turns out to listen keeps a
// half-open connection. Silence everywhere is "target is filtered".
#include <cstdint>
#include <vector>

#include "app/plumbing/discovery_rules.hpp"
#include "app/plumbing/prober.hpp"
#include "plan/capacity_plan.hpp"
#include "report/result.hpp"

namespace lw {

struct DiscoveryResult {
  int port = 0;
  TargetMarker kind = TargetMarker::kClosedSyn;
  double rtt_s = 0;
  int reply_ttl = 0;  // TTL and IP ID of the reply that named the port
  std::uint16_t reply_ip_id = 0;
  int replies_asked = 0;  // probes of the last round (each may have drawn a reply)
  std::vector<int> open_ports;
  std::vector<Warning> warnings;
};

// The round trip of a round of probes, seconds (0 = no TCP answer): the
// smallest reply time after the capture saw the probe leave.
double round_trip_s(const TrainOutcome& o);

// Throws Error with code target_filtered / target_unreachable / interrupted.
DiscoveryResult discover_marker(Prober& prober, const FlowId& flow, const DiscoveryPorts& ports,
                                int tries, Nanos timeout, SeqAllocator& seqs);

}  // namespace lw
