#include "plan/capacity_rates.hpp"

#include "plan/capacity_plan.hpp"

namespace lw {

namespace {
constexpr double kSlowFactor = 1.3;
constexpr double kFastFactor = 3.0;
}  // namespace

Nanos CapacityRates::gap_for(int group, int packet_size) const {
  if (!response) return 0;
  const double r = rate_bps[(group / 2) & 1];
  return r > 0 ? gap_for_rate(r, packet_size) : 0;
}

CapacityRates capacity_rates(double sized_bps, double send_limit_bps) {
  CapacityRates r;
  if (!(sized_bps > 0) || !(send_limit_bps > 0)) return r;
  const double slow = kSlowFactor * sized_bps;
  double fast = kFastFactor * sized_bps;
  if (fast > 0.8 * send_limit_bps) {
    if (send_limit_bps < 2 * slow) return r;
    fast = 0;  // back to back
  }
  r.response = true;
  r.rate_bps[0] = slow;
  r.rate_bps[1] = fast;
  return r;
}

int capacity_group(int measured, bool response) { return measured % (response ? 4 : 2); }

}  // namespace lw
