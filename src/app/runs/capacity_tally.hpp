#pragma once
// What turns the capacity trains of a run into a result, shared by the live
// run (app/capacity_run.cpp) and `linkwidth analyze` (app/analyze.cpp): each
// matched train is evaluated, recorded and counted; finish() draws the
// estimate and the warnings that qualify it. No sockets or clocks here.
//
//   CapacityTally tally(two_lengths, verbose);
//   for each train: TallyStep s = tally.add(train, outcome, n, group, sizing, res);
//   tally.finish(res, max_rate_bps);
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "estimate/capacity.hpp"
#include "estimate/quantisation.hpp"
#include "report/result.hpp"

namespace lw {

struct Train;
struct TrainOutcome;

// The train lengths trains are cut down to, at least.
constexpr int kMinLoadPackets = 8;
// ... except when our own queue drops their load (SampleVerdict::kLostLoad):
// a queue of a few packets then decides, not the reply noise.
constexpr int kMinLocalLoadPackets = 2;
// The load packets of the first (sizing) train when --load-packets is automatic.
constexpr int kSizingLoadPackets = 16;
// `want` load packets within [floor, bound] (truncated); a floor above the
// bound (--max-load-packets) yields to it: the user's bound holds for every
// train, the sizing ones too.
inline int load_packets_within(double want, int floor, int bound) {
  return static_cast<int>(
      std::clamp(want, static_cast<double>(std::min(floor, bound)), static_cast<double>(bound)));
}
inline int sizing_load_packets(int max_load_packets) {
  return load_packets_within(kSizingLoadPackets, kSizingLoadPackets, max_load_packets);
}

// What one train did to the run, beyond its samples.
struct TallyStep {
  CapacitySample sample;
  int path_mtu = 0;      // > 0: a router reported this smaller path MTU (samples forgotten)
  int shortened_to = 0;  // > 0: long trains kept losing their tail, our own queue
                         // dropped load, or a queue on the path did unseen
                         // (long trains' dispersion hardly grew): trains halved to this
};

class CapacityTally {
 public:
  // `precision`: --precision (a two-length slope wider than max(10%, 2 x it)
  // gives way to the per-train estimate, estimate/capacity.hpp).
  CapacityTally(bool two_lengths, bool verbose, double precision = 0.01)
      : two_lengths_(two_lengths), verbose_(verbose), precision_(precision) {}

  // One sent train of `n_train` load packets; `n_short` is the short length
  // in effect, `group` 0 (short) or 1 (long), `sizing` true for the trains
  // that size the rest (recorded, not used). Appends its TrainRecord to
  // res.trains and counts it in res.trains_sent; `packet_size` is L.
  TallyStep add(const Train& train, const TrainOutcome& outcome, int n_train, int n_short,
                int group, bool sizing, int packet_size, CapacityResult& res);

  // The last train's lost replies were the target's reply limit, not the
  // path (a reply check found it): they do not count towards shortening.
  void forgive_losses() {
    long_losses_ = 0;
    forgiven_ = true;
  }

  // Forget every sample (after the train size or packet size changed).
  void restart();

  // The estimate from the samples so far (slope of two lengths, else KDE).
  const CapacityEstimate& estimate();
  bool enough(int min_trains) const;
  // The last estimate() extrapolated over two offered rates (cross traffic
  // on the narrow link showed in the dispersions; estimate/capacity.hpp).
  bool rate_corrected() const { return two_rate_.rate_corrected; }
  const TwoRateEstimate& two_rate() const { return two_rate_; }
  // Trains the last estimate() lifted for load lost unseen, and whether each
  // length has at least `n` kept trains.
  int lifted() const { return lifted_; }
  bool kept_per_length(std::size_t n) const {
    return sm_.disp[0].size() >= n && (!two_lengths_ || sm_.disp[1].size() >= n);
  }
  // Trains counted since sizing ended (or the last restart): picks the group.
  int measured() const { return measured_; }

  // The final estimate with its warnings, including max_rate_limited against
  // `max_rate_bps` and timestamps_quantised (reported as a lower bound).
  void finish(CapacityResult& res, double max_rate_bps);

 private:
  struct Samples {
    std::vector<double> disp[2];    // kept reply dispersions: 0 = short, 1 = long trains
    double group_bits[2] = {0, 0};  // bits after the head marker, per length
    std::vector<double> kept;       // per-train capacity samples (both lengths)
    std::vector<double> kept_by_group[2];
    std::vector<double> uncompressed;  // reply rates of trains the path did not compress
    std::map<std::string, int> rejected;
    std::vector<double> left_ratio;  // left dispersion / reply dispersion, kept trains
    std::vector<double> kept_bits;   // bits after the head of each kept train
    std::vector<double> kept_disp;   // and its reply dispersion
    std::vector<TrainDispersion> trains;  // kept trains, for the two-rate fit
  };
  // The samples with trains that lost load unseen lifted onto the whole
  // trains' dispersion (estimate/capacity.hpp, lift_lost_load), where the
  // path lost marker replies; else the samples as they came.
  // `short_only`: the short trains' lifted rates where only they are a
  // ladder (else left empty).
  Samples lifted_samples(std::vector<double>* short_only) const;
  void conclude(CapacityResult& res) const;
  // The long trains' median dispersion grew by under half what their bits
  // did (load lost in a queue on the path), and halved short trains of
  // `n_short` load packets of `packet_size` bytes would still span enough
  // time to measure.
  bool queue_drops_load(int n_short, int packet_size) const;
  // The trains were halved for load lost unseen (queue_drops_load): the
  // short trains' samples become the long length's, the long ones' go.
  void keep_short_as_long();
  void check_quantisation(CapacityResult& res) const;

  bool two_lengths_;
  bool verbose_;
  double precision_;
  Samples sm_;
  Samples view_;     // what estimate() last drew from: sm_ or lifted()
  int lifted_ = 0;   // trains view_ lifted
  std::vector<double> short_only_;  // lifted_samples()'s short-only rates
  int path_losses_ = 0;  // marker replies the path lost (not the target's limit)
  int markers_sent_ = 0;  // markers of the measured trains
  bool forgiven_ = false;
  double load_bits_ = 0;
  int measured_ = 0;
  int long_losses_ = 0;
  bool halved_ = false;  // keep_short_as_long() since the last restart()
  CapacityEstimate est_;
  TwoRateEstimate two_rate_;
  double offset_s_ = 0;
  // Every reply's arrival, per train (all trains of the run): the timestamp
  // quantisation check looks at their gaps.
  std::vector<std::vector<Nanos>> reply_times_;
};

}  // namespace lw
