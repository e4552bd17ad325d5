#pragma once
// A full queue at the tight link (issue 11, small queues under heavy load).
//
// Above the avail-bw a train's markers queue more and more behind each other:
// their one-way delay rises at (R + X - C)/C per second sent, and the ratio
// R_m/R_o over the train is 1 + that. A drop-tail queue stops the rise where
// it is full: from there the markers that get in wait the queue's whole
// length and leave as far apart as they were sent, while load (and cross
// traffic) is dropped. The train's ratio is then capped at about
// 1 + Q/span whatever the load, and its crossing O - C·(ratio - 1) reads the
// avail-bw too high. The random-path benchmark's path 15 (35 Mbit/s, an
// 11.7 ms queue, on/off cross traffic at 69%): markers of trains at 12-37
// Mbit/s rose by 3-5 ms each, then sat at 10.2-12.5 ms; the estimate read
// +37% to +153% in every run. Small markers (SYNs) still fit a byte-limited
// queue that drops our full-size load, so no marker reply is missing.
//
// The queue's ceiling shows as the same delay plateau at the end of several
// trains: the rise stops at one level, the highest queueing delay the run
// has seen. Once seen, a train whose markers reach it is read over the
// markers before it (the fluid part), where that leaves enough of the train.
// Pure: no clocks, no sockets.

#include <vector>

namespace lw {

// One replied marker of a train, in send order: its (offered-schedule) send
// time and its reply's arrival, seconds on one clock.
struct MarkerDelay {
  double sent_s = 0;
  double reply_s = 0;
  double owd() const { return reply_s - sent_s; }  // one-way delay plus a constant
};

// Plateaus closer than max(kCeilingTolFloor, kCeilingTolShare x their level)
// are one level: the timing noise of this VM's replies (20-200 us) and the
// byte content of a full queue of mixed packet sizes (path 15: 10.2-12.5 ms).
constexpr double kCeilingTolFloor = 0.0005;
constexpr double kCeilingTolShare = 0.12;
// Trains that must end on the same level, the highest of the run, before it
// is taken for the queue's ceiling.
constexpr int kCeilingTrains = 3;
constexpr double kCeilingOutliers = 0.02;
// No ceiling under this queueing delay: five times the tolerance's floor,
// where plateaus are timing noise and constant-rate bursts (the random-path
// benchmark's path 19, 78% CBR through queues of 25-163 ms: 11 trains
// "capped" at 1.8 ms).
constexpr double kCeilingMinLevel = 5 * kCeilingTolFloor;
// A full queue stops every train that reaches it: of the trains whose
// markers rose to half the level or more, at least this share peak on it.
// Cross traffic in bounded bursts also leaves a highest delay, but trains
// peak anywhere below it (the random-path benchmark's path 11, CBR bursts
// through a 10.8 ms queue: 15 of 75 trains within the tolerance of the
// top level, against 22 of 49 on path 15's full 11.7 ms queue).
constexpr double kCeilingPeakShare = 0.35;
// A train read up to the ceiling keeps at least this share of its span (one
// marker interval of the default six markers' four after the head).
constexpr double kCeilingMinSpan = 0.2;

double ceiling_tolerance(double level_s);

// The plateau a train's markers (from the ratio's first on) end on: the last
// two replied markers within the tolerance of each other after a rise of more
// than twice it from the first. Its level as queueing delay over `base_s`
// (the least one-way delay of the run); 0 when the train ends on none.
double end_plateau(const std::vector<MarkerDelay>& m, double base_s);

class QueueCeiling {
 public:
  // A train's replied markers, in send order (the ratio's markers on).
  void observe(const std::vector<MarkerDelay>& m);
  // The queueing delay of the ceiling (s): the median of the plateaus on the
  // highest level that kCeilingTrains trains ended on (within the tolerance
  // of one of them), at most
  // kCeilingOutliers of the markers (a late reply of a descheduled host) lay
  // more than two tolerances above it, and kCeilingPeakShare of the trains
  // that rose to half of it peaked on it, and it is kCeilingMinLevel or
  // more; else 0.
  double ceiling_s() const;
  double base_s() const { return base_; }

 private:
  // One-way delays are kept raw: the base may still fall.
  std::vector<double> plateau_owd_;  // each plateau's one-way delay level
  std::vector<double> owd_;          // every marker's
  std::vector<double> peak_owd_;     // each train's highest
  bool has_base_ = false;
  double base_ = 0;
};

// The ratio R_m/R_o of a train whose markers reach `ceiling_s` (queueing
// delay over `base_s`, within its tolerance): from the first marker up to
// the first that reached it (that one's delay is capped too, so this is
// still a lower bound of the fluid ratio, but far closer than the whole
// train's). 0 when no later marker reaches it, the first already sat there,
// or the part up to it is under kCeilingMinSpan of the train's span: the
// train's own ratio stands.
double ratio_below_ceiling(const std::vector<MarkerDelay>& m, double base_s, double ceiling_s);

}  // namespace lw
