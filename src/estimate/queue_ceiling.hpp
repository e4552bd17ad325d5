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
// A full queue holds the markers that reach it at one delay (within a
// packet's time and the timing noise): of the markers that rose to half the
// level or more, at least kCeilingPileUp lie within
// max(kCeilingBandFloor, kCeilingBandShare x level) of it. Bursts of bounded
// size (an application's writes, e.g. iperf3's 128 KB blocks of a
// rate-limited TCP flow) leave the markers spread over the range under their
// top, and trains still end flat on it and peak near it: the random-path
// benchmark's path 14 (TCP through a 62 Mbit/s link with a 177 ms queue) had
// a "ceiling" at 17.6-19.5 ms in 5 of 6 runs; replayed on four of their
// captures (scripts/ceiling_replay.py), 5-12% of the risen markers lay
// within 3% of it, against 18-45% on the full queues of path 15 and of the
// lab's small-queue scenarios (seven captures). Trains read up to it had
// their ratios doubled (1.5 to 3.0: the estimate read -61%).
constexpr double kCeilingBandShare = 0.03;
constexpr double kCeilingBandFloor = 0.00025;
constexpr double kCeilingPileUp = 0.15;
// Our overload fills a queue to its limit; cross traffic alone seldom brings
// it half way there (else the bursts, not our trains, set the level). Light
// trains (offered at kCeilingLightShare of C or less: the calibration's, at a
// tenth) show what the cross traffic alone does: at least kCeilingLightTrains
// of them must have been seen, and under kCeilingLightRisen of them may have
// risen to half the level. Replayed on captures: path 14's bursts took 45-70%
// of its light trains to half its top plateau in five (the same TCP flow
// through one 62 Mbit/s link: 50-57% in two, where up to 40% of the risen
// markers piled on that level, more than on some full queues; path 56: 61%),
// the full queues of path 15 and of the lab's small-queue scenarios 0-31%
// (seven captures).
constexpr double kCeilingLightShare = 0.25;
constexpr int kCeilingLightTrains = 6;
constexpr double kCeilingLightRisen = 0.4;
// A queue that fills at the rate of our trains and the cross traffic rises
// by (R + X - C)/C per second: 70% of an 11 ms level within one marker
// interval of 4 ms would need twice C on top of C. A burst that lands at an
// upstream line rate does it (path 14: 5-16 trains of 46-74 in four
// captures, against none in the seven full-queue captures), and the
// level then is where such bursts top out: no ceiling once
// kCeilingJumpTrains trains rose by kCeilingJumpShare of it between two
// consecutive markers.
constexpr double kCeilingJumpShare = 0.7;
constexpr int kCeilingJumpTrains = 2;
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
  // A train's replied markers, in send order (the ratio's markers on);
  // `light`: it was offered at kCeilingLightShare of the capacity or less.
  void observe(const std::vector<MarkerDelay>& m, bool light);
  // The queueing delay of the ceiling (s): the median of the plateaus on the
  // highest level that kCeilingTrains trains ended on (within the tolerance
  // of one of them), at most
  // kCeilingOutliers of the markers (a late reply of a descheduled host) lay
  // more than two tolerances above it, kCeilingPeakShare of the trains
  // that rose to half of it peaked on it, kCeilingPileUp of the markers that
  // rose to half of it sit on it, under kCeilingLightRisen of at least
  // kCeilingLightTrains light trains rose to half of it, fewer than
  // kCeilingJumpTrains trains rose by kCeilingJumpShare of it between two
  // markers, and it is kCeilingMinLevel or more; else 0.
  double ceiling_s() const;
  double base_s() const { return base_; }

 private:
  // The checks ceiling_s() runs in turn, each on queueing delays over base_:
  // the highest level kCeilingTrains plateaus share (0: none)...
  double plateau_level() const;
  // ... at most kCeilingOutliers of the markers more than two tolerances over it,
  bool few_markers_over(double level) const;
  // ... kCeilingPeakShare of the trains risen to half of it peaked on it,
  bool risen_trains_peak_on(double level) const;
  // ... kCeilingPileUp of the markers risen to half of it lie on it,
  bool markers_pile_up_on(double level) const;
  // ... under kCeilingLightRisen of at least kCeilingLightTrains light
  // trains rose to half of it,
  bool light_trains_stay_under(double level) const;
  // ... and fewer than kCeilingJumpTrains trains jumped kCeilingJumpShare of it.
  bool few_jumps_to(double level) const;

  // One-way delays are kept raw: the base may still fall.
  std::vector<double> plateau_owd_;  // each plateau's one-way delay level
  std::vector<double> owd_;          // every marker's
  std::vector<double> peak_owd_;     // each train's highest
  std::vector<double> light_peak_owd_;  // ... of each light train
  std::vector<double> jump_;            // each train's largest rise between two markers
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
