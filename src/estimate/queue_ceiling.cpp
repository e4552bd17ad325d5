#include "estimate/queue_ceiling.hpp"

#include <algorithm>
#include <cmath>

namespace lw {

double ceiling_tolerance(double level_s) {
  return std::max(kCeilingTolFloor, kCeilingTolShare * level_s);
}

double end_plateau(const std::vector<MarkerDelay>& m, double base_s) {
  const std::size_t n = m.size();
  if (n < 3) return 0;
  const double last = m[n - 1].owd() - base_s;
  const double prev = m[n - 2].owd() - base_s;
  const double first = m[0].owd() - base_s;
  const double level = (last + prev) / 2;
  const double tol = ceiling_tolerance(level);
  if (std::fabs(last - prev) > tol || level - first <= 2 * tol) return 0;
  return level;
}

void QueueCeiling::observe(const std::vector<MarkerDelay>& m, bool light) {
  if (m.empty()) return;
  double peak = m.front().owd();
  double jump = 0;
  for (std::size_t k = 1; k < m.size(); ++k) jump = std::max(jump, m[k].owd() - m[k - 1].owd());
  jump_.push_back(jump);
  for (const auto& d : m) {
    const double owd = d.owd();
    peak = std::max(peak, owd);
    if (!has_base_ || owd < base_) base_ = owd;
    has_base_ = true;
    owd_.push_back(owd);
  }
  peak_owd_.push_back(peak);
  if (light) light_peak_owd_.push_back(peak);
  if (const double level = end_plateau(m, base_); level > 0) plateau_owd_.push_back(level + base_);
}

double QueueCeiling::plateau_level() const {
  if (!has_base_ || static_cast<int>(plateau_owd_.size()) < kCeilingTrains) return 0;
  std::vector<double> levels;
  for (double p : plateau_owd_) levels.push_back(p - base_);
  std::sort(levels.rbegin(), levels.rend());
  // The highest level kCeilingTrains plateaus share (one plateau read high
  // by a late reply does not move it).
  std::vector<double> on;
  for (double top : levels) {
    const double tol = ceiling_tolerance(top);
    on.clear();
    for (double l : levels) {
      if (std::fabs(l - top) <= tol) on.push_back(l);
    }
    if (static_cast<int>(on.size()) >= kCeilingTrains) break;
  }
  if (static_cast<int>(on.size()) < kCeilingTrains) return 0;
  std::sort(on.begin(), on.end());
  return on[on.size() / 2];
}

bool QueueCeiling::few_markers_over(double level) const {
  std::size_t above = 0;
  for (double owd : owd_) above += owd - base_ > level + 2 * ceiling_tolerance(level) ? 1 : 0;
  return static_cast<double>(above) <= kCeilingOutliers * static_cast<double>(owd_.size());
}

bool QueueCeiling::risen_trains_peak_on(double level) const {
  const double tol = ceiling_tolerance(level);
  int risen = 0, peaked = 0;
  for (double p : peak_owd_) {
    if (p - base_ < level / 2) continue;
    ++risen;
    peaked += std::fabs(p - base_ - level) <= tol ? 1 : 0;
  }
  return peaked >= kCeilingPeakShare * risen;
}

bool QueueCeiling::markers_pile_up_on(double level) const {
  const double band = std::max(kCeilingBandFloor, kCeilingBandShare * level);
  int high = 0, on_level = 0;
  for (double owd : owd_) {
    const double q = owd - base_;
    if (q < level / 2) continue;
    ++high;
    on_level += std::fabs(q - level) <= band ? 1 : 0;
  }
  return on_level >= kCeilingPileUp * high;
}

bool QueueCeiling::light_trains_stay_under(double level) const {
  if (static_cast<int>(light_peak_owd_.size()) < kCeilingLightTrains) return false;
  int risen = 0;
  for (double p : light_peak_owd_) risen += p - base_ >= level / 2 ? 1 : 0;
  return risen < kCeilingLightRisen * static_cast<double>(light_peak_owd_.size());
}

bool QueueCeiling::few_jumps_to(double level) const {
  int jumps = 0;
  for (double j : jump_) jumps += j >= kCeilingJumpShare * level ? 1 : 0;
  return jumps < kCeilingJumpTrains;
}

double QueueCeiling::ceiling_s() const {
  const double level = plateau_level();
  if (!(level >= kCeilingMinLevel)) return 0;
  const bool full = few_markers_over(level) && risen_trains_peak_on(level) &&
                    markers_pile_up_on(level) && light_trains_stay_under(level) &&
                    few_jumps_to(level);
  return full ? level : 0;
}

double ratio_below_ceiling(const std::vector<MarkerDelay>& m, double base_s, double ceiling_s) {
  if (!(ceiling_s > 0) || m.size() < 2) return 0;
  const double reach = ceiling_s - ceiling_tolerance(ceiling_s);
  if (m[0].owd() - base_s >= reach) return 0;
  std::size_t k = 1;
  while (k < m.size() && m[k].owd() - base_s < reach) ++k;
  if (k == m.size()) return 0;
  const double span = m.back().sent_s - m[0].sent_s;
  const double so = m[k].sent_s - m[0].sent_s;
  if (!(span > 0) || so < kCeilingMinSpan * span) return 0;
  return (m[k].reply_s - m[0].reply_s) / so;
}

}  // namespace lw
