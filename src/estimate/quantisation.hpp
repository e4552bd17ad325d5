#pragma once
// Reply timestamps quantised by interrupt coalescence (NIC interrupt
// moderation, NAPI deferral, a virtual NIC's batching) at either end: replies
// are stamped when a batch is processed, not when they arrived, so the gaps
// between them collapse onto a lattice: about zero (two replies of one batch)
// and multiples of the coalescing period P. A dispersion measured on such a
// clock is off by up to P, which for short trains is a wrong capacity, not a
// noisy one (Prasad et al., "Effects of interrupt coalescence on network
// measurements", PAM 2004). Pure function over reply times; no clocks here.
#include <vector>

#include "linkwidth/time.hpp"

namespace lw {

struct QuantisationParams {
  Nanos zero_tol = 2 * kUs;     // a gap this small means "same batch"
  Nanos min_period = 20 * kUs;  // finer lattices are indistinguishable from timing noise
  Nanos max_period = 5 * kMs;
  Nanos abs_tol = 2 * kUs;  // a gap is on the lattice within max(abs_tol, rel_tol * P)
  double rel_tol = 0.03;
  double min_fit = 0.9;  // share of the non-zero gaps that must sit on the lattice
  int min_gaps = 8;      // fewer gaps decide nothing
  // Without batch gaps at zero, a period must be at most half the median gap:
  // a lattice as coarse as the gaps themselves fits any set of clean
  // dispersions of two train lengths (D and about 2D).
  double zero_share_for_coarse = 0.1;
  // One full-size packet's time at the capacity the trains read (ns; 0 =
  // not known). A slow FIFO link puts reply gaps on a lattice of its own:
  // whole packets, ours and the cross traffic's between them, each take
  // that long. Without batch gaps at zero, gaps that sit on multiples of it
  // are that clock, not coalescence, whatever coarser lattice they fit too
  // (the random-path benchmark's path 7 at d5c039b: a 10 Mbit/s htb on our
  // own interface with this host's on/off traffic in it, 12 reply gaps on
  // multiples of 1214.8 us for a packet time of 1211.4; no zero gap; the
  // capacity was cut to a lower bound 11% under the truth, and the avail-bw
  // from it read -33%. Trains of 2 and 4 load packets on a slow link, after
  // halvings, put every gap on multiples of two packet times.)
  double packet_time_ns = 0;
};

struct QuantisationFinding {
  bool quantised = false;
  double period_s = 0;      // P, refined by least squares over the lattice gaps
  double fit_fraction = 0;  // share of non-zero gaps within tolerance of k·P, k >= 1
  int gaps = 0;             // gaps examined (consecutive replies within one train)
  int zero_gaps = 0;        // of them about zero
  int levels = 0;           // distinct multiples k (>= 1) occupied
};

// `reply_times`: per train, the arrival times of every reply matched to it
// (any order). Fires only when the gaps sit on one lattice (>= min_fit of
// them) and two neighbouring multiples (0 and 1, or k and k+1) are both
// occupied, by at least three gaps together: the lattice's own step shows.
// Clean timestamps do not show that: spread-out gaps miss the lattice, and a
// tight cluster of equal dispersions sits on one multiple only. Nor when
// the lattice is the link's own packet clock (packet_time_ns above).
QuantisationFinding detect_quantisation(const std::vector<std::vector<Nanos>>& reply_times,
                                        const QuantisationParams& p = {});

}  // namespace lw
