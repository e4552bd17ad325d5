#pragma once
// Available-bandwidth search as pure state machines over observed trains
// (issue 3). Nothing here sends, sleeps or reads a clock: the session asks for
// the next rate, runs the trains, and reports what it saw.
//
// Notation (LinkWidth §3.1): a train offered at rate O leaves with dispersion
// R_o and arrives with R_m. Below the available bandwidth A the ratio
// R_m/R_o = O/M stays at its baseline (1 plus timing bias); above it, the
// fluid model gives O/M = O/C_t + (1 - A/C_t), a line in O whose slope is
// 1/C_t (C_t: tight-link capacity, PRC-MT eq. 4) and which meets the
// baseline at O = A.
#include <vector>

namespace lw {

// ---- The paper's method, as published: LinkWidth §3.4 steps 1-6 ----------

struct LinkWidthSearchParams {
  double capacity_bps = 0;  // upper end of the search, C from the capacity run
  double theta_bps = 0;     // granularity θ: stop when O_max - O_min < θ
  double epsilon = 0.1;     // convergence ε: "within" when 1-ε <= R_m/R_o <= 1
};

class LinkWidthSearch {
 public:
  explicit LinkWidthSearch(const LinkWidthSearchParams& p);
  bool done() const { return max_ - min_ < p_.theta_bps; }  // step 2
  double next_rate() const { return (min_ + max_) / 2; }    // O_mid
  // Steps 4-6 for the train sent at next_rate(): ratio = R_m / R_o.
  void observe(double ratio);
  double estimate() const { return (min_ + max_) / 2; }     // step 2's report
  double low() const { return min_; }
  double high() const { return max_; }

 private:
  LinkWidthSearchParams p_;
  double min_ = 0;
  double max_ = 0;
};

// ---- The default method: fleets, noise-derived thresholds, grey region ---

enum class TrainVerdict { kBelow, kAbove, kUnclear };
enum class FleetVerdict { kBelow, kAbove, kGrey };
const char* train_verdict_name(TrainVerdict v);
const char* fleet_verdict_name(FleetVerdict v);

// What the path's own timing noise looks like, from trains sent far below
// any plausible avail-bw (pathload's idea of letting the path set the scale,
// instead of LinkWidth's hand-tuned ε).
struct NoiseModel {
  double baseline = 1.0;   // median ratio of the calibration trains
  double threshold = 0.0;  // a ratio above baseline + threshold is "above"
};

// Baseline = median, threshold = max(k × 1.4826 × MAD, floor): k = 4 keeps
// a calibration-like train "below" with very high probability; the floor
// covers a calibration set that happens to be too quiet.
NoiseModel calibrate_noise(const std::vector<double>& calibration_ratios, double k = 4.0,
                           double floor = 0.002);

// One train: lost packets or a ratio clearly above the noise band is "above";
// within half the threshold of the baseline "below"; between them unclear.
TrainVerdict classify_train(double ratio, bool lost, const NoiseModel& noise);

// A fleet is above (below) if at least a fraction eta of its trains say so,
// else grey (pathload §IV, PRC-MT §II-D).
FleetVerdict decide_fleet(const std::vector<TrainVerdict>& trains, double eta);

struct FleetSearchParams {
  double capacity_bps = 0;    // upper bound of the search (narrow-link capacity)
  double resolution_bps = 0;  // ω: stop when the bracket is narrower
  double start_fraction = 0.5;
};

struct RatePoint {
  double offered_bps = 0;
  double ratio = 0;  // median R_m/R_o of the fleet
  FleetVerdict verdict = FleetVerdict::kGrey;
};

// Bracket search with a grey region (pathload §IV-D): `low` is the highest
// rate seen below, `high` the lowest seen above; grey fleets narrow a grey
// band inside the bracket, and the search probes the larger gap next.
class FleetSearch {
 public:
  explicit FleetSearch(const FleetSearchParams& p);
  bool done() const;
  double next_rate() const;
  void observe(double offered_bps, double ratio, FleetVerdict v);
  double low() const { return low_; }
  double high() const { return high_; }
  const std::vector<RatePoint>& history() const { return history_; }

 private:
  FleetSearchParams p_;
  double low_ = 0;
  double high_ = 0;
  double grey_lo_ = -1;  // grey band seen so far, -1 = none
  double grey_hi_ = -1;
  std::vector<RatePoint> history_;
};

// Point estimate and tight-link capacity from the response curve: a robust
// (Theil-Sen) line through the fleets above the avail-bw, extrapolated back
// to the baseline. A fixed threshold decides "above" only once the ratio has
// climbed δ over the baseline, which overestimates A by about δ·C_t; the
// line's crossing removes that bias.
struct ResponseFit {
  bool valid = false;
  double availbw_bps = 0;           // where the line meets the baseline
  double tight_capacity_bps = 0;    // 1 / slope (PRC-MT eq. 4)
  int points = 0;
};
ResponseFit fit_response(const std::vector<RatePoint>& points, double baseline);

// The point estimate: the fitted crossing when it falls inside [low, high]
// (widened by one resolution step), else the middle of the bracket.
double availbw_point(const ResponseFit& fit, double low, double high, double resolution_bps);

}  // namespace lw
