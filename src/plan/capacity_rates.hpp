#pragma once
// Which offered rates the capacity trains use after sizing (the schedule
// behind estimate/capacity_response.hpp): trains cycle through four cells,
// (slower rate, short), (slower, long), (faster, short), (faster, long).
//
//   CapacityRates r = capacity_rates(sized_bps, send_limit_bps);
//   int group = capacity_group(measured, r.response);   // 0..3, or 0..1
//   gap = r.gap_for(group, packet_size);                // 0 = back to back
#include "linkwidth/time.hpp"

namespace lw {

struct CapacityRates {
  bool response = false;        // false: back-to-back trains of two lengths only
  double rate_bps[2] = {0, 0};  // slower, faster offered rate; 0 = back to back
  // The gap between packets for a train of `group`, 0 = back to back.
  Nanos gap_for(int group, int packet_size) const;
};

// The slower rate is 1.3 x the sizing train's capacity (it reads C - X at
// worst, so the rate stays above the narrow link's C even under load, and a
// clean path still compresses it by more than the 10% a train must show);
// the faster one 3 x, or back to back when that is within 80% of what we can
// send (`send_limit_bps`: the sizing train's offered rate or --max-rate). When
// back to back is not at least 2 x the slower rate the two rates would be
// too close to extrapolate: back-to-back trains of two lengths, as before.
CapacityRates capacity_rates(double sized_bps, double send_limit_bps);

// The cell of the `measured`-th train after sizing: 0..3 with `response`,
// else 0..1 (short, long). Length = group % 2, rate = group / 2.
int capacity_group(int measured, bool response);

}  // namespace lw
