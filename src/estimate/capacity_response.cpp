#include "estimate/capacity_response.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "estimate/stats.hpp"

namespace lw {

ResponseSolution solve_response(const double (&dd)[2], const double (&ds)[2],
                                const double (&db)[2]) {
  ResponseSolution s;
  // Pooled slope: as if X = 0 (the plain two-length slope over both rates).
  const double pooled = (dd[0] + dd[1]) / (db[0] + db[1]);
  s.inv_capacity = pooled;
  if (db[0] <= 0 || db[1] <= 0) return s;
  // The send span per bit of each rate (1/R): they must differ by a third for
  // the extrapolation to be worth its noise.
  const double w0 = ds[0] / db[0], w1 = ds[1] / db[1];
  if (!(w0 > 0 && w1 >= 0) || std::fabs(w0 - w1) < std::max(w0, w1) / 3) return s;
  const double det = db[0] * ds[1] - db[1] * ds[0];
  const double u = (dd[0] * ds[1] - dd[1] * ds[0]) / det;
  const double v = (db[0] * dd[1] - db[1] * dd[0]) / det;
  // X/C < 0 is noise (cross traffic only ever adds to a dispersion): then the
  // least-squares answer under X >= 0 is the pooled slope.
  if (v <= 0 || u <= 0) return s;
  s.inv_capacity = u;
  s.cross_per_capacity = v;
  s.extrapolated = true;
  return s;
}

namespace {

struct CellLocations {
  double dd[2], ds[2], db[2];
  double d_short0;
};

CellLocations locate(const std::vector<double> (&d)[2][2], const std::vector<double> (&s)[2][2],
                     const ResponseCell (&cells)[2][2]) {
  CellLocations c{};
  for (int r = 0; r < 2; ++r) {
    c.dd[r] = dispersion_location(d[r][1]) - dispersion_location(d[r][0]);
    c.ds[r] = median(s[r][1]) - median(s[r][0]);
    c.db[r] = cells[r][1].bits - cells[r][0].bits;
  }
  c.d_short0 = dispersion_location(d[0][0]);
  return c;
}

}  // namespace

ResponseCapacity estimate_capacity_response(const ResponseCell (&cells)[2][2]) {
  ResponseCapacity out;
  std::vector<double> d[2][2], s[2][2];
  for (int r = 0; r < 2; ++r) {
    for (int l = 0; l < 2; ++l) {
      const ResponseCell& c = cells[r][l];
      out.capacity.samples += static_cast<int>(c.reply_s.size());
      if (c.reply_s.size() < 2 || c.send_s.size() != c.reply_s.size()) return out;
      d[r][l] = c.reply_s;
      s[r][l] = c.send_s;
    }
  }
  const CellLocations loc = locate(d, s, cells);
  const ResponseSolution sol = solve_response(loc.dd, loc.ds, loc.db);
  if (sol.inv_capacity <= 0) return out;
  const double cap = 1 / sol.inv_capacity;
  out.capacity.valid = true;
  out.capacity.capacity_bps = cap;
  out.cross_per_capacity = sol.cross_per_capacity;
  out.extrapolated = sol.extrapolated;
  out.offset_s = loc.d_short0 - cells[0][0].bits / cap -
                 sol.cross_per_capacity * median(s[0][0]);

  // Percentile bootstrap: resample each cell's trains (reply and send
  // dispersion together), solve again.
  std::mt19937 rng(12345);
  std::vector<double> caps;
  std::vector<double> rd[2][2], rs[2][2];
  for (int b = 0; b < 300; ++b) {
    for (int r = 0; r < 2; ++r) {
      for (int l = 0; l < 2; ++l) {
        const std::size_t n = d[r][l].size();
        std::uniform_int_distribution<std::size_t> pick(0, n - 1);
        rd[r][l].resize(n);
        rs[r][l].resize(n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t k = pick(rng);
          rd[r][l][i] = d[r][l][k];
          rs[r][l][i] = s[r][l][k];
        }
      }
    }
    const CellLocations bl = locate(rd, rs, cells);
    const ResponseSolution bs = solve_response(bl.dd, bl.ds, bl.db);
    if (bs.inv_capacity > 0) caps.push_back(1 / bs.inv_capacity);
  }
  if (caps.size() < 10) {
    out.capacity.low_bps = out.capacity.high_bps = cap;
    return out;
  }
  out.capacity.low_bps = std::min(cap, quantile(caps, 0.025));
  out.capacity.high_bps = std::max(cap, quantile(caps, 0.975));
  return out;
}

}  // namespace lw
