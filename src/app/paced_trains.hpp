#pragma once
// Where the avail-bw search's trains go: the live runner sends them
// (app/availbw_run.cpp), the replay runner of `linkwidth analyze` hands back
// what a recorded run saw for the same trains (app/analyze.cpp). The search
// itself (search_availbw) is the same code either way.
#include "linkwidth/time.hpp"

namespace lw {

struct Train;
struct PacedSample;
struct AvailbwResult;

class PacedTrains {
 public:
  virtual ~PacedTrains() = default;
  // Sends (or replays) `train` and evaluates it into *out. Returns false, with
  // the result's stop_reason set, when a cap, the time budget or a signal
  // ended the run before this train.
  virtual bool run(const Train& train, PacedSample* out, Nanos min_idle = 0) = 0;
  // CLOCK_MONOTONIC as the search sees it (live: now; replay: as recorded).
  virtual Nanos now() = 0;
  // Replies a train may ask of the target at once (ReplyGovernor::max_burst;
  // live: what the reply checks found so far; replay: as recorded).
  virtual int reply_burst() = 0;

  // Both runners, after evaluating a train: a train whose replies the target's
  // reply limit took is no sample (neither above nor below); stalls of our own
  // host are counted for warn_stalls().
  void settle(PacedSample* out, bool replies_limited);
  // The send_stalls warning, if any train was stalled.
  void warn_stalls(AvailbwResult& res) const;

 protected:
  int stalls_ = 0;
  double worst_stall_s_ = 0;
};

}  // namespace lw
