#include "estimate/quantisation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "estimate/stats.hpp"

namespace lw {

namespace {

struct LatticeFit {
  double period = 0;
  double fit = 0;
  double rms = 0;  // residual of the gaps on the lattice, ns
  int levels = 0;
  bool neighbours = false;
};

// How well the non-zero gaps sit on multiples of `period` (k >= 1).
LatticeFit fit_lattice(const std::vector<double>& nz, int zero_gaps, double period,
                       const QuantisationParams& p) {
  LatticeFit f;
  const double tol = std::max(static_cast<double>(p.abs_tol), p.rel_tol * period);
  // Refine the period over the gaps on the lattice: least squares of g = k·P.
  double sum_kg = 0, sum_kk = 0;
  for (double g : nz) {
    const double k = std::round(g / period);
    if (k >= 1 && std::abs(g - k * period) <= tol) {
      sum_kg += k * g;
      sum_kk += k * k;
    }
  }
  if (sum_kk > 0) period = sum_kg / sum_kk;
  std::map<long, int> count;
  int on = 0;
  double sq = 0;
  for (double g : nz) {
    const double k = std::round(g / period);
    if (k >= 1 && std::abs(g - k * period) <= tol) {
      ++on;
      sq += (g - k * period) * (g - k * period);
      ++count[static_cast<long>(k)];
    }
  }
  if (zero_gaps > 0) count[0] = zero_gaps;
  f.period = period;
  f.rms = on > 0 ? std::sqrt(sq / on) : 0;
  f.fit = nz.empty() ? 0 : static_cast<double>(on) / static_cast<double>(nz.size());
  for (const auto& [k, n] : count) {
    if (k >= 1) ++f.levels;
    auto next = count.find(k + 1);
    if (next != count.end() && n + next->second >= 3) f.neighbours = true;
  }
  return f;
}

}  // namespace

QuantisationFinding detect_quantisation(const std::vector<std::vector<Nanos>>& reply_times,
                                        const QuantisationParams& p) {
  QuantisationFinding out;
  std::vector<double> nz;  // non-zero gaps, ns
  for (auto t : reply_times) {
    std::sort(t.begin(), t.end());
    for (std::size_t i = 1; i < t.size(); ++i) {
      const Nanos g = t[i] - t[i - 1];
      ++out.gaps;
      if (g <= p.zero_tol) {
        ++out.zero_gaps;
      } else {
        nz.push_back(static_cast<double>(g));
      }
    }
  }
  if (out.gaps < p.min_gaps || nz.size() < 4) return out;
  const double zero_share = static_cast<double>(out.zero_gaps) / out.gaps;
  const double coarsest =
      std::min(static_cast<double>(p.max_period),
               median(nz) * (zero_share >= p.zero_share_for_coarse ? 1.0 : 0.5));
  // Candidate periods: each gap divided by a small whole number. The true
  // period divides every gap, so it is among them; keep the coarsest that
  // fits (its sub-multiples fit too, but leave the neighbouring multiples
  // apart).
  std::vector<double> distinct = nz;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() > 200) {
    std::vector<double> thin;
    for (std::size_t i = 0; i < distinct.size(); i += distinct.size() / 200) {
      thin.push_back(distinct[i]);
    }
    distinct.swap(thin);
  }
  std::vector<LatticeFit> fits;
  for (double g : distinct) {
    for (int k = 1; k <= 400; ++k) {
      const double period = g / k;
      if (period < static_cast<double>(p.min_period)) break;
      if (period > coarsest) continue;
      const LatticeFit f = fit_lattice(nz, out.zero_gaps, period, p);
      if (f.fit >= p.min_fit && f.neighbours && f.period <= 1.05 * coarsest) fits.push_back(f);
    }
  }
  // With few distinct gaps, lattices that only happen to pass near them fit
  // too, within the tolerance; the true one fits best (its sub-multiples as
  // well as it does). So: the coarsest of those that fit about as well as
  // the best.
  double best_rms = 1e18;
  for (const auto& f : fits) best_rms = std::min(best_rms, f.rms);
  LatticeFit best;
  for (const auto& f : fits) {
    if (f.rms <= best_rms * 1.1 + 50 && f.period > best.period) best = f;
  }
  if (best.period <= 0) return out;
  if (out.zero_gaps == 0 && p.packet_time_ns >= static_cast<double>(p.min_period)) {
    // The link's own packet clock: the gaps sit on multiples of its packet
    // time (the lattice found may be a multiple of it, where every train
    // held an even number of packets: 2 and 4 load packets after halvings).
    const auto near_clock = [&](double period) {
      return std::abs(period - p.packet_time_ns) <= p.rel_tol * p.packet_time_ns;
    };
    const LatticeFit clock = fit_lattice(nz, 0, p.packet_time_ns, p);
    if (near_clock(best.period) || (clock.fit >= p.min_fit && near_clock(clock.period))) {
      return out;
    }
  }
  out.quantised = true;
  out.period_s = best.period / 1e9;
  out.fit_fraction = best.fit;
  out.levels = best.levels;
  return out;
}

}  // namespace lw
