#pragma once
// The available-bandwidth measurement (issue 3): paced trains of RST load
// between SYN markers at rates chosen by a search, with the narrow-link
// capacity as the upper end.
//   fleet      (default) fleets of K trains per rate, thresholds from the
//              path's own timing noise, a grey region, a response-curve fit
//              for the point estimate and the tight-link capacity;
//   linkwidth  the paper's TOPP binary search as published (§3.4-3.5.1).
#include <atomic>

#include "app/config.hpp"
#include "linkwidth/time.hpp"
#include "report/measure_result.hpp"
#include "report/result.hpp"

namespace lw {

struct Session;

// Runs the search on an open session, ending by t_cap (CLOCK_MONOTONIC).
// `capacity_bps` is the upper end of the search.
AvailbwResult run_availbw_phase(Session& s, const Config& c, const std::atomic<bool>& stop,
                                double capacity_bps, Nanos t_cap);

// `availbw` and `measure`: capacity first (unless --capacity), then avail-bw.
MeasureResult run_measure(const Config& c, const std::atomic<bool>& stop);

}  // namespace lw
