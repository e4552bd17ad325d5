#pragma once
// Result of `linkwidth hops`: plain data filled by the session (app/hops_run),
// rendered by report/hops_writers. Hop k is the node that answers at TTL k;
// the target is the last hop.
#include <cstdint>
#include <string>
#include <vector>

#include "linkwidth/run_names.hpp"
#include "nlohmann/json.hpp"
#include "report/result.hpp"
#include "report/stop_reason.hpp"

namespace lw {

struct HopRecord {
  int ttl = 0;
  std::string addr;          // empty = unknown (never answered the TTL sweep)
  MarkerKind marker_kind = MarkerKind::kTtl;  // what its markers were in the last train
  bool answers_tcp = false;  // answered a SYN to its own address with RST/ACK
  int replies = 0;           // trains in which both of its markers were answered
  bool used = false;         // answered often enough to take part in the vote
  double dispersion_s = 0;   // median head-to-tail reply gap (0 = none)
  double rate_bps = 0;       // median train bits / dispersion (0 = none)
  double choke_fraction = 0;
  double bottleneck_fraction = 0;
  double passed_fraction = 0;  // HopEstimate::passed_fraction
  int passed_trains = 0;       // HopEstimate::passed_trains
  double compressed_fraction = 0;  // HopEstimate::compressed_fraction
  bool compressed = false;         // HopEstimate::compressed(): takes no part
  double rate_low_bps = 0, rate_high_bps = 0;
};

struct HopsResult {
  std::string target;
  std::string target_addr;
  int port = 0;
  // What the markers to the target were (plan/target_marker.hpp).
  TargetMarker marker_kind = TargetMarker::kClosedSyn;
  std::string source;
  std::string interface;
  int source_port = 0;
  double rtt_s = 0;
  ReplierInfo replier;

  HopMarkers hop_markers = HopMarkers::kAuto;  // as asked
  bool target_reached = false;
  std::vector<HopRecord> hops;
  int bottleneck_hop = 0;  // 0 = none named; k = the link arriving at hop k
  // Hops before bottleneck_hop that gave no usable replies hide where the
  // dispersion rose: the narrow link is one of the links into hops
  // bottleneck_earliest_hop..bottleneck_hop (equal when nothing is hidden).
  int bottleneck_earliest_hop = 0;
  std::string bottleneck_addr;
  double bottleneck_confidence = 0;
  double bottleneck_rate_bps = 0;
  double no_choke_fraction = 0;

  int load_packets = 0;
  int trains_sent = 0;
  int trains_voting = 0;
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
  StopReason stop_reason = StopReason::kNone;
  std::vector<Warning> warnings;
  nlohmann::json params;
};

}  // namespace lw
