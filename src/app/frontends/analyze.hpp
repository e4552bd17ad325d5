#pragma once
// `linkwidth analyze FILE [--json] [-v]`: re-runs the estimators on a capture
// written by `--save-pcap` (capacity, availbw, measure --no-hops) and prints
// the live command's result document,
// with an "offline" object naming the file. The capture's run records
// (capture/run_record.hpp) give each train's probes, send times, phase and
// length group; its packets give the departures and the replies. The trains
// go through the live run's own path (match_train, then CapacityTally).
// Needs no privileges; bad files are one sentence and exit 2.
#include <string>
#include <vector>

#include "capture/offline_capture.hpp"
#include "report/hops_result.hpp"
#include "report/measure_result.hpp"
#include "report/result.hpp"

namespace lw {

// The capacity result of the run recorded in `r`. Throws lw::Error (exit 2)
// when the file holds no capacity run this can re-run; `name` labels errors.
CapacityResult analyze_capacity(const OfflineRead& r, const std::string& name, bool verbose);

// Whatever run the file holds: capacity; availbw / measure (capacity phase,
// the hops phase replayed through run_hops_on, the avail-bw search through
// search_availbw); hops. Throws lw::Error (exit 2) for anything else.
struct AnalyzedRun {
  enum Kind { kCapacity, kMeasure, kHops } kind = kCapacity;
  CapacityResult capacity;  // kCapacity
  MeasureResult measure;    // kMeasure (availbw, measure)
  HopsResult hops;          // kHops
};
AnalyzedRun analyze_run(const OfflineRead& r, const std::string& name, bool verbose);

// The command: args[0] == "analyze". Returns the exit code.
int run_analyze_main(const std::vector<std::string>& args);

}  // namespace lw
