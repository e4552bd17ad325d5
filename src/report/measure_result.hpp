#pragma once
// `availbw` and `measure`: the capacity phase, the hops phase (measure) and the
// avail-bw search, in one result.
#include <cstdint>
#include <string>

#include "linkwidth/run_names.hpp"
#include "report/hops_result.hpp"
#include "report/result.hpp"

namespace lw {

struct MeasureResult {
  Command command = Command::kMeasure;  // availbw or measure
  CapacityResult capacity;
  bool capacity_given = false;  // --capacity: no capacity phase ran
  AvailbwResult availbw;
  bool has_hops = false;  // `measure` ran the hops phase
  HopsResult hops;
  // The whole run (discovery and every phase).
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
};

}  // namespace lw
