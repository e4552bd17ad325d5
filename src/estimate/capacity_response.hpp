#pragma once
// Capacity that survives cross traffic on the narrow link: two train lengths
// at two offered rates, extrapolated along the rate response curve.
//
// Why (README, "Capacity under cross traffic"): a train offered at rate R
// reaches a FIFO narrow link of capacity C that also carries cross traffic X.
// The cross traffic that arrives while our train arrives (during its send
// span S) queues between our packets; what arrives later waits behind the
// tail. So a train's reply dispersion is
//
//     D = a + B/C + S * X/C
//
// (the fluid form of the rate response curve above the avail-bw: TOPP, and
// PRC-MT §III, Kang & Loguinov: O/r = (O + X)/C). `a` is the fixed head/tail
// offset the two-length slope already removes, B the bits after the head.
// Every train meets X, so no filter over trains (a quartile, a minimum)
// removes it: with constant-rate cross traffic it is the same in all of them.
// Trains of two lengths at two offered rates give two offset-free slopes
// dD/dB, and the rates make S differ: 1/C and X/C follow from two linear
// equations. Each cell's D is its lower quartile (a quantile of a monotone
// function is the function of the quantile, so the same X-quantile enters
// every cell) and S its median.
//
//   cells[r][l]: r = 0 slower offered rate, 1 faster; l = 0 short, 1 long.
//   ResponseCapacity e = estimate_capacity_response(cells);
#include <vector>

#include "estimate/capacity.hpp"

namespace lw {

struct ResponseCell {
  std::vector<double> reply_s;  // reply dispersion of each kept train
  std::vector<double> send_s;   // its send dispersion (same index)
  double bits = 0;              // bits after the head marker (same for the cell)
};

struct ResponseCapacity {
  CapacityEstimate capacity;  // 95% interval: bootstrap over the four cells
  double cross_per_capacity = 0;  // X/C: 0 when the rates disagreed by noise only
  double offset_s = 0;            // a, at the slower rate
  bool extrapolated = false;      // X/C > 0 was used (else the two slopes were pooled)
};

// Needs at least 2 trains in every cell. The rates must differ enough that
// the send spans per bit differ by a third; otherwise (or when the data say
// X/C < 0, i.e. noise) the two slopes are pooled: the plain two-length slope.
ResponseCapacity estimate_capacity_response(const ResponseCell (&cells)[2][2]);

// The point estimate alone, from given per-cell locations (for tests and the
// bootstrap): dd[r] = D_long - D_short, ds[r] = S_long - S_short, db[r] =
// B_long - B_short. Returns 1/C and X/C; u <= 0 means no estimate.
struct ResponseSolution {
  double inv_capacity = 0;
  double cross_per_capacity = 0;
  bool extrapolated = false;
};
ResponseSolution solve_response(const double (&dd)[2], const double (&ds)[2],
                                const double (&db)[2]);

}  // namespace lw
