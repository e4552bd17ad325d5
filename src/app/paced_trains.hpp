#pragma once
// Where the avail-bw search's trains go: the live runner sends them
// (app/availbw_run.cpp), the replay runner of `linkwidth analyze` hands back
// what a recorded run saw for the same trains (app/analyze.cpp). The search
// itself (search_availbw) is the same code either way.
#include "linkwidth/time.hpp"

namespace lw {

struct Train;
struct PacedSample;

class PacedTrains {
 public:
  virtual ~PacedTrains() = default;
  // Sends (or replays) `train` and evaluates it into *out. Returns false, with
  // the result's stop_reason set, when a cap, the time budget or a signal
  // ended the run before this train.
  virtual bool run(const Train& train, PacedSample* out, Nanos min_idle = 0) = 0;
  // CLOCK_MONOTONIC as the search sees it (live: now; replay: as recorded).
  virtual Nanos now() = 0;
};

}  // namespace lw
