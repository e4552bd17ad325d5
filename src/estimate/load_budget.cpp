#include "estimate/load_budget.hpp"

#include <algorithm>
#include <cmath>

namespace lw {

double budget_capacity(const std::vector<double>& train_rates_bps, double estimate_bps,
                       double loss_factor) {
  std::vector<double> r;
  r.reserve(train_rates_bps.size());
  for (double x : train_rates_bps) {
    if (std::isfinite(x) && x > 0) r.push_back(x);
  }
  const bool has_estimate = std::isfinite(estimate_bps) && estimate_bps > 0;
  const double f = std::isfinite(loss_factor) && loss_factor > 1 ? loss_factor : 1.0;
  if (r.empty()) return has_estimate ? estimate_bps / f : kUnknownPathBps;
  // Nearest-rank lower quartile: the minimum for up to 4 rates, the second
  // lowest for 5 to 8, ... Inflated trains sit above it unless more than
  // three quarters of them are.
  const std::size_t k = (r.size() - 1) / 4;
  std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(k), r.end());
  const double q = r[k];
  return (has_estimate ? std::min(q, estimate_bps) : q) / f;
}

double after_capacity_budget(double earlier_bps, double capacity_bps, double low_bps,
                             bool trusted) {
  auto ok = [](double x) { return std::isfinite(x) && x > 0; };
  const double earlier = ok(earlier_bps) ? earlier_bps : 0.0;
  if (!trusted || !ok(capacity_bps) || !ok(low_bps)) return earlier;
  return std::max(earlier, std::min(low_bps, capacity_bps));
}

double load_loss_factor(const std::vector<double>& short_rates_bps,
                        const std::vector<double>& long_rates_bps, double length_ratio) {
  auto med = [](std::vector<double> v) {
    v.erase(
        std::remove_if(v.begin(), v.end(), [](double x) { return !(x > 0) || !std::isfinite(x); }),
        v.end());
    if (v.size() < 2) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  const double s = med(short_rates_bps), l = med(long_rates_bps);
  if (s <= 0 || l <= 0) return 1.0;
  if (!(l > 1.1 * s)) return 1.0;
  return length_ratio > 1 ? std::min(l / s, length_ratio) : l / s;
}

Nanos load_ready_at(Nanos t0, std::uint64_t sent_bytes, std::uint64_t next_bytes,
                    double capacity_bps, double max_load) {
  if (!(capacity_bps > 0) || !(max_load > 0)) return t0;
  const double sent_bits = 8.0 * static_cast<double>(sent_bytes);
  const double next_bits = 8.0 * static_cast<double>(next_bytes);
  const double at_s =
      (sent_bits + next_bits) / (max_load * capacity_bps) - next_bits / capacity_bps;
  // Bounded so that the conversion cannot overflow (a day is past any --max-time).
  return t0 + from_seconds(std::clamp(at_s, 0.0, 86400.0));
}

double average_rate_bps(Nanos t0, Nanos t, std::uint64_t bytes) {
  if (t <= t0) return 0;
  return 8.0 * static_cast<double>(bytes) / to_seconds(t - t0);
}

void exclude_from_ledger(LoadLedger& l, Nanos span, std::uint64_t bytes) {
  l.t0 += std::max<Nanos>(0, span);
  l.bytes0 += bytes;
}

Nanos ledger_ready_at(const LoadLedger& l, std::uint64_t bytes_now, std::uint64_t next_bytes,
                      double max_load) {
  const std::uint64_t sent = bytes_now > l.bytes0 ? bytes_now - l.bytes0 : 0;
  return load_ready_at(l.t0, sent, next_bytes, l.capacity_bps, max_load);
}

}  // namespace lw
