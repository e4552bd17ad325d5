#include "estimate/availbw.hpp"

#include <algorithm>
#include <cmath>

#include "estimate/stats.hpp"

namespace lw {

LinkWidthSearch::LinkWidthSearch(const LinkWidthSearchParams& p) : p_(p), max_(p.capacity_bps) {}

void LinkWidthSearch::observe(double ratio) {
  const double mid = next_rate();
  if (ratio >= 1.0 - p_.epsilon && ratio <= 1.0) {
    min_ = mid;  // step 4: within the avail-bw, try faster
  } else {
    max_ = mid;  // step 5 (ratio > 1) and step 6 (ratio < 1 - ε): back off
  }
}

const char* train_verdict_name(TrainVerdict v) {
  switch (v) {
    case TrainVerdict::kBelow:
      return "below";
    case TrainVerdict::kAbove:
      return "above";
    case TrainVerdict::kUnclear:
      return "unclear";
  }
  return "?";
}

const char* fleet_verdict_name(FleetVerdict v) {
  switch (v) {
    case FleetVerdict::kBelow:
      return "below";
    case FleetVerdict::kAbove:
      return "above";
    case FleetVerdict::kGrey:
      return "grey";
  }
  return "?";
}

NoiseModel calibrate_noise(const std::vector<double>& r, double k, double floor) {
  NoiseModel m;
  if (r.empty()) {
    m.threshold = floor;
    return m;
  }
  m.baseline = median(r);
  std::vector<double> dev;
  dev.reserve(r.size());
  for (double x : r) dev.push_back(std::fabs(x - m.baseline));
  m.threshold = std::max(k * 1.4826 * median(dev), floor);
  return m;
}

TrainVerdict classify_train(double ratio, bool lost, const NoiseModel& n) {
  if (lost) return TrainVerdict::kAbove;
  if (ratio > n.baseline + n.threshold) return TrainVerdict::kAbove;
  if (ratio <= n.baseline + n.threshold / 2) return TrainVerdict::kBelow;
  return TrainVerdict::kUnclear;
}

FleetVerdict decide_fleet(const std::vector<TrainVerdict>& t, double eta) {
  if (t.empty()) return FleetVerdict::kGrey;
  const double n = static_cast<double>(t.size());
  const double above = static_cast<double>(std::count(t.begin(), t.end(), TrainVerdict::kAbove));
  const double below = static_cast<double>(std::count(t.begin(), t.end(), TrainVerdict::kBelow));
  if (above >= eta * n) return FleetVerdict::kAbove;
  if (below >= eta * n) return FleetVerdict::kBelow;
  return FleetVerdict::kGrey;
}

FleetSearch::FleetSearch(const FleetSearchParams& p) : p_(p), high_(p.capacity_bps) {}

bool FleetSearch::done() const {
  if (high_ - low_ <= p_.resolution_bps) return true;
  if (grey_lo_ < 0) return false;
  // Grey band known: done when neither gap beside it is wider than ω.
  return high_ - grey_hi_ <= p_.resolution_bps && grey_lo_ - low_ <= p_.resolution_bps;
}

double FleetSearch::next_rate() const {
  if (history_.empty()) return p_.start_fraction * p_.capacity_bps;
  if (grey_lo_ < 0) return (low_ + high_) / 2;
  // Probe the wider of the two gaps around the grey band (pathload §IV-D).
  if (high_ - grey_hi_ >= grey_lo_ - low_) return (grey_hi_ + high_) / 2;
  return (low_ + grey_lo_) / 2;
}

void FleetSearch::observe(double rate, double ratio, FleetVerdict v) {
  history_.push_back({rate, ratio, v});
  if (v == FleetVerdict::kGrey) {
    grey_lo_ = grey_lo_ < 0 ? rate : std::min(grey_lo_, rate);
    grey_hi_ = grey_hi_ < 0 ? rate : std::max(grey_hi_, rate);
  } else if (v == FleetVerdict::kBelow) {
    if (rate >= high_) {
      // Below at or above an earlier "above": the path changed; trust the
      // newer fleet and reopen the bracket up to the capacity.
      high_ = p_.capacity_bps;
    }
    low_ = std::max(low_, rate);
  } else {
    if (rate <= low_) low_ = 0;  // the same contradiction from the other side
    high_ = std::min(high_, rate);
  }
  // Keep the grey band inside the bracket; drop it if nothing of it is left.
  if (grey_lo_ >= 0) {
    grey_lo_ = std::max(grey_lo_, low_);
    grey_hi_ = std::min(grey_hi_, high_);
    if (grey_lo_ > grey_hi_) grey_lo_ = grey_hi_ = -1;
  }
}

ResponseFit fit_response(const std::vector<RatePoint>& pts, double baseline) {
  ResponseFit f;
  std::vector<const RatePoint*> above;
  for (const auto& p : pts) {
    if (p.verdict == FleetVerdict::kAbove && p.ratio > baseline) above.push_back(&p);
  }
  f.points = static_cast<int>(above.size());
  if (above.size() < 2) return f;
  // Theil-Sen: median of pairwise slopes, intercept = median of residual.
  std::vector<double> slopes;
  for (std::size_t i = 0; i < above.size(); ++i) {
    for (std::size_t j = i + 1; j < above.size(); ++j) {
      const double dx = above[j]->offered_bps - above[i]->offered_bps;
      if (std::fabs(dx) > 0) slopes.push_back((above[j]->ratio - above[i]->ratio) / dx);
    }
  }
  if (slopes.empty()) return f;
  const double b = median(slopes);
  if (!(b > 0)) return f;
  std::vector<double> icpt;
  for (const auto* p : above) icpt.push_back(p->ratio - b * p->offered_bps);
  const double a = median(icpt);
  f.valid = true;
  f.tight_capacity_bps = 1.0 / b;
  f.availbw_bps = (baseline - a) / b;
  return f;
}

double availbw_point(const ResponseFit& fit, double low, double high, double resolution) {
  if (fit.valid && fit.availbw_bps >= low - resolution && fit.availbw_bps <= high + resolution) {
    return std::clamp(fit.availbw_bps, low, high);
  }
  return (low + high) / 2;
}

}  // namespace lw
