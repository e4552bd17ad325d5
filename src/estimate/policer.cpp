#include "estimate/policer.hpp"

#include <algorithm>
#include <cmath>

#include "estimate/stats.hpp"

namespace lw {

PolicerFinding detect_policer(const std::vector<PolicerPoint>& points, double packet_bits,
                              const PolicerOptions& opt) {
  PolicerFinding f;
  std::vector<const PolicerPoint*> chirp, load;
  for (const PolicerPoint& p : points) (p.chirp ? chirp : load).push_back(&p);
  f.chirp_markers = static_cast<int>(chirp.size());
  for (const PolicerPoint* p : chirp) f.chirp_answered += p->reply > 0 ? 1 : 0;
  if (chirp.size() < 8 || !(packet_bits > 0)) {
    f.reason = "too few chirp markers";
    return f;
  }
  for (std::size_t k = 1; k < chirp.size(); ++k) {
    if (chirp[k]->sent <= chirp[k - 1]->sent) {
      f.reason = "chirp markers not in send order";
      return f;
    }
  }
  // Each marker's rate: its bits over the gap before it (the first: the second's).
  std::vector<double> rate(chirp.size());
  for (std::size_t k = 1; k < chirp.size(); ++k) {
    rate[k] = packet_bits / to_seconds(chirp[k]->sent - chirp[k - 1]->sent);
  }
  rate[0] = rate[1];
  int fast = 0, fast_lost = 0;
  for (std::size_t k = 0; k < chirp.size(); ++k) {
    if (rate[k] < 0.5 * rate[0]) break;
    ++fast;
    fast_lost += chirp[k]->reply > 0 ? 0 : 1;
  }
  if (fast == 0 || fast_lost < opt.min_fast_loss * fast) {
    f.reason = "the fast chirp markers passed";
    return f;
  }
  // Nothing queued: the answered markers' delays stay near the least.
  std::vector<double> delays;
  for (const PolicerPoint& p : points) {
    if (p.reply > 0 && p.reply > p.sent) delays.push_back(to_seconds(p.reply - p.sent));
  }
  if (delays.empty()) {
    f.reason = "no marker answered";
    return f;
  }
  const double least = *std::min_element(delays.begin(), delays.end());
  if (median(delays) - least > to_seconds(opt.max_queue_delay)) {
    f.reason = "the answered markers queued";
    return f;
  }
  std::size_t last_lost = 0;
  for (std::size_t k = 0; k < chirp.size(); ++k) {
    if (chirp[k]->reply == 0) last_lost = k;
  }
  // The bucket: between the last load marker answered before the first lost
  // one and that one.
  for (const PolicerPoint* p : load) {
    if (p->reply == 0) {
      f.burst_high_bytes = (p->bits_before + packet_bits) / 8;
      break;
    }
    f.burst_low_bytes = (p->bits_before + packet_bits) / 8;
  }
  if (last_lost + 1 == chirp.size()) {
    // Lost to the end: R below the slowest rate the chirp reached.
    f.found = true;
    f.rate_is_upper_bound = true;
    f.rate_bps = f.rate_high_bps = rate.back();
    f.rate_low_bps = 0;
    return f;
  }
  if (static_cast<int>(chirp.size() - last_lost - 1) < opt.min_tail_answered) {
    f.reason = "too few answered markers after the last loss";
    return f;
  }
  // The count: markers answered after the first up to the last loss carried
  // R over that time. The bucket held under one packet of tokens at the
  // chirp's first marker (the load before it, or that marker, found it
  // short) and under one at the last loss (it was dropped): with `passed`
  // answered, (passed - 1)·L < R·span < (passed + 1)·L. (The low end was
  // passed·L, as if the bucket had been empty at the start: the lab's 20
  // Mbit/s policer read [20.08, 22.09] in 1 run of 4, tests/lab/test_shaper.py.)
  int passed = 0;
  for (std::size_t k = 1; k < last_lost; ++k) passed += chirp[k]->reply > 0 ? 1 : 0;
  const double span = to_seconds(chirp[last_lost]->sent - chirp[0]->sent);
  f.found = true;
  f.rate_high_bps = rate[last_lost];
  if (span > 0) {
    f.rate_low_bps = std::min(std::max(0, passed - 1) * packet_bits / span, f.rate_high_bps);
    f.rate_high_bps = std::min(f.rate_high_bps, (passed + 1) * packet_bits / span);
  }
  // Fewer than three in the count: the last loss's rate and the first
  // answered one's bound it better.
  if (passed < 3) {
    f.rate_low_bps = std::max(f.rate_low_bps, rate[last_lost + 1] * 0.9);
    f.rate_high_bps = std::max(f.rate_high_bps, f.rate_low_bps);
  }
  // The estimate: the middle of [passed·L/span, the high end]. The bucket
  // was usually near empty at the chirp's start and near a packet at the
  // last loss (lab, 20 Mbit/s: the count alone read 17.1-19.9, this
  // 19.5-21.0); the interval keeps the packet either way.
  const double count_bps = span > 0 ? std::min(passed * packet_bits / span, f.rate_high_bps) : 0;
  f.rate_bps = std::sqrt(std::max({count_bps, f.rate_low_bps, 1.0}) * f.rate_high_bps);
  return f;
}

}  // namespace lw
