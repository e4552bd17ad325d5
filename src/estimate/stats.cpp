#include "estimate/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace lw {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

double median_standard_error(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return 1.2533 * std::sqrt(ss / n / n);
}

namespace {

double triangular(double u) { return std::fabs(u) < 1.0 ? 1.0 - std::fabs(u) : 0.0; }

double density_at(const std::vector<double>& v, double x, double h) {
  double s = 0;
  for (double xi : v) s += triangular((x - xi) / h);
  return s;
}

}  // namespace

KdeMode kde_mode(const std::vector<double>& v, double min_rel, double max_rel) {
  KdeMode r;
  if (v.empty()) return r;
  if (v.size() == 1) {
    r.mode = v[0];
    r.bandwidth = std::fabs(v[0]) * min_rel;
    r.density = 1;
    return r;
  }
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / (n - 1));
  const double iqr = quantile(v, 0.75) - quantile(v, 0.25);
  double spread = iqr > 0 ? std::min(sd, iqr / 1.34) : sd;
  double h = 0.9 * spread * std::pow(n, -0.2);
  const double med = std::fabs(median(v));
  h = std::clamp(h, min_rel * med, max_rel * med);
  if (h <= 0) h = 1e-12;

  double best = v[0], best_d = -1;
  for (double x : v) {
    const double d = density_at(v, x, h);
    if (d > best_d) {
      best_d = d;
      best = x;
    }
  }
  // Mean shift with the same kernel: moves the mode off the sample grid.
  for (int it = 0; it < 20; ++it) {
    double w = 0, s = 0;
    for (double xi : v) {
      const double k = triangular((best - xi) / h);
      w += k;
      s += k * xi;
    }
    if (w <= 0) break;
    const double next = s / w;
    if (std::fabs(next - best) < 1e-9 * std::fabs(best)) break;
    best = next;
  }
  r.mode = best;
  r.bandwidth = h;
  r.density = density_at(v, best, h) / n;
  return r;
}

Interval bootstrap_mode_interval(const std::vector<double>& v, double confidence, int resamples,
                                 std::uint32_t seed) {
  Interval out;
  if (v.empty()) return out;
  if (v.size() < 3) {
    out.low = *std::min_element(v.begin(), v.end());
    out.high = *std::max_element(v.begin(), v.end());
    return out;
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
  std::vector<double> modes;
  modes.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> rs(v.size());
  for (int b = 0; b < resamples; ++b) {
    for (auto& x : rs) x = v[pick(rng)];
    modes.push_back(kde_mode(rs).mode);
  }
  const double a = (1.0 - confidence) / 2.0;
  out.low = quantile(modes, a);
  out.high = quantile(modes, 1.0 - a);
  return out;
}

double truncated_normal_mean(double mu, double sigma, double lo, double hi) {
  if (!(sigma > 0) || !std::isfinite(sigma) || !std::isfinite(mu) || !(hi > lo)) {
    return std::clamp(mu, lo, hi);  // (a NaN stays one, as the clamp it replaced left it)
  }
  const double a = (lo - mu) / sigma, b = (hi - mu) / sigma;
  const double pdf_a = std::exp(-0.5 * a * a), pdf_b = std::exp(-0.5 * b * b);
  // Mass between a and b from the side where it is not a difference of two
  // numbers near 1 (upper tail for a > 0, lower tail for b < 0).
  const double mass = a > 0    ? std::erfc(a / std::sqrt(2.0)) - std::erfc(b / std::sqrt(2.0))
                      : b < 0  ? std::erfc(-b / std::sqrt(2.0)) - std::erfc(-a / std::sqrt(2.0))
                               : 2.0 - std::erfc(b / std::sqrt(2.0)) - std::erfc(-a / std::sqrt(2.0));
  // (mass is twice Phi(b) - Phi(a); the pdfs lack 1/sqrt(2 pi): together sqrt(2/pi).)
  if (!(mass > 1e-300)) return a > 0 ? lo : hi;  // all of it far past one bound
  const double m = mu + sigma * std::sqrt(2.0 / M_PI) * (pdf_a - pdf_b) / mass;
  return std::clamp(m, lo, hi);
}

}  // namespace lw
