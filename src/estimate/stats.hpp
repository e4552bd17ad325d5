#pragma once
// Small robust statistics shared by the estimators. Pure functions.
#include <cstdint>
#include <vector>

namespace lw {

double median(std::vector<double> v);
// The standard error of the median of `v` under a normal model:
// 1.2533 sd / sqrt(n) (sd with n in the denominator); 0 for fewer than 2.
double median_standard_error(const std::vector<double>& v);
// Linear-interpolated quantile, q in [0,1]; v non-empty.
double quantile(std::vector<double> v, double q);

// Mean of a normal N(mu, sigma²) truncated to [lo, hi] (lo < hi): the
// estimate under a flat prior on [lo, hi] of a quantity measured as mu with
// standard error sigma. Clamping mu instead puts it on a bound whenever mu
// lies past it, however wide sigma makes the evidence. sigma <= 0: mu clamped.
double truncated_normal_mean(double mu, double sigma, double lo, double hi);

struct KdeMode {
  double mode = 0;       // location of the highest density
  double bandwidth = 0;  // kernel half-width h actually used
  double density = 0;    // relative density at the mode (fraction of weight within h)
};

// Kernel-density mode with the triangular kernel of Lai & Baker ("Measuring
// Bandwidth", §IV-C, eq. 9-10): the density is evaluated at every sample and
// the densest point refined by mean shift with the same kernel. The width h is
// a robust normal-reference bandwidth (0.9·min(sd, IQR/1.34)·n^-1/5) clamped to
// [min_rel, max_rel] × median, so that a few outliers neither split the main
// cluster nor pull it. `v` must be non-empty.
KdeMode kde_mode(const std::vector<double>& v, double min_rel = 0.002, double max_rel = 0.05);

struct Interval {
  double low = 0;
  double high = 0;
};

// Percentile-bootstrap interval of the KDE mode (deterministic: fixed seed).
Interval bootstrap_mode_interval(const std::vector<double>& v, double confidence = 0.95,
                                 int resamples = 300, std::uint32_t seed = 12345);

}  // namespace lw
