// Capacity from reply gaps (estimate/capacity_gaps.hpp) on simulated trains of
// full-size SYNs through a FIFO narrow link with cross traffic.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "estimate/capacity_gaps.hpp"
#include "estimate/stats.hpp"

using namespace lw;

namespace {

enum class Cross { kNone, kCbr, kPoisson, kBursts };

struct PathModel {
  double cap_bps = 50e6;      // the narrow link
  double in_bps = 60e6;       // the rate the train reaches it at (a link before it)
  double cross_bps = 0;       // cross traffic on the narrow link
  Cross cross = Cross::kNone;
  // A link after the narrow one (0 = none) and its own cross traffic.
  double after_bps = 0;
  double after_cross_bps = 0;
  Cross after_cross = Cross::kNone;
  double noise_mean_s = 0;    // exponential delay added to each reply (host noise)
  int packets = 16;           // SYNs per train, every one a marker
  int L = 1500;
};

struct Arrival {
  double t;
  double bits;
  int probe;  // -1: cross
};

// Cross traffic of `kind` at `bps` from 0 to `end`: constant rate (1500-byte
// packets, random phase), Poisson of mixed sizes (40, 576 and 1500 bytes:
// half, a quarter, a quarter of packets), or iperf3-like bursts (every 1 ms,
// the millisecond's bytes at once).
void add_cross(std::vector<Arrival>& a, Cross kind, double bps, double end, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  if (kind == Cross::kCbr && bps > 0) {
    const double period = 8.0 * 1500 / bps;
    for (double t = u(rng) * period; t < end; t += period) a.push_back({t, 8.0 * 1500, -1});
  } else if (kind == Cross::kPoisson && bps > 0) {
    const double mean_bits = 8.0 * (0.5 * 40 + 0.25 * 576 + 0.25 * 1500);
    std::exponential_distribution<double> gap(bps / mean_bits);
    for (double t = gap(rng); t < end; t += gap(rng)) {
      const double x = u(rng);
      a.push_back({t, 8.0 * (x < 0.5 ? 40 : x < 0.75 ? 576 : 1500), -1});
    }
  } else if (kind == Cross::kBursts && bps > 0) {
    const int n = std::max(1, static_cast<int>(std::lround(bps * 1e-3 / (8.0 * 1500))));
    for (double t = u(rng) * 1e-3; t < end; t += 1e-3) {
      for (int k = 0; k < n; ++k) a.push_back({t + k * 1.2e-6, 8.0 * 1500, -1});
    }
  }
}

// One FIFO at `cap_bps`: the probes' departure times (last bit out).
std::vector<double> fifo(std::vector<Arrival> a, double cap_bps, int probes) {
  std::sort(a.begin(), a.end(), [](const Arrival& x, const Arrival& y) { return x.t < y.t; });
  std::vector<double> out(static_cast<std::size_t>(probes), 0);
  double free = 0;
  for (const Arrival& x : a) {
    free = std::max(free, x.t) + x.bits / cap_bps;
    if (x.probe >= 0) out[static_cast<std::size_t>(x.probe)] = free;
  }
  return out;
}

// One train: the probes reach the narrow link at in_bps and share its FIFO
// with its cross traffic, then (if any) the link after it with that link's;
// each reply comes back after a fixed delay plus its noise. The cross traffic
// runs for 20 ms before the train (the queues it keeps are in place).
TrainTiming simulate(const PathModel& p, std::mt19937& rng) {
  std::vector<Arrival> a;
  const double t0 = 0.020;
  for (int i = 0; i < p.packets; ++i) a.push_back({t0 + i * 8.0 * p.L / p.in_bps, 8.0 * p.L, i});
  const double end = t0 + p.packets * 8.0 * p.L / std::min(p.in_bps, p.cap_bps) + 0.01;
  TrainTiming tt;
  tt.sent.resize(static_cast<std::size_t>(p.packets));
  for (const Arrival& x : a) tt.sent[static_cast<std::size_t>(x.probe)] = static_cast<Nanos>((1.0 + x.t) * 1e9);
  add_cross(a, p.cross, p.cross_bps, end, rng);
  std::vector<double> dep = fifo(a, p.cap_bps, p.packets);
  if (p.after_bps > 0) {
    std::vector<Arrival> b;
    for (int i = 0; i < p.packets; ++i) b.push_back({dep[static_cast<std::size_t>(i)], 8.0 * p.L, i});
    add_cross(b, p.after_cross, p.after_cross_bps, end + 0.01, rng);
    dep = fifo(b, p.after_bps, p.packets);
  }
  std::exponential_distribution<double> noise(p.noise_mean_s > 0 ? 1 / p.noise_mean_s : 1.0);
  tt.bits.assign(static_cast<std::size_t>(p.packets), 8.0 * p.L);
  tt.marker.assign(static_cast<std::size_t>(p.packets), true);
  tt.reply.assign(static_cast<std::size_t>(p.packets), 0);
  for (int i = 0; i < p.packets; ++i) {
    const double r = 1.0 + 100e-6 + dep[static_cast<std::size_t>(i)] + (p.noise_mean_s > 0 ? noise(rng) : 0.0);
    tt.reply[static_cast<std::size_t>(i)] = static_cast<Nanos>(r * 1e9);
  }
  return tt;
}

std::vector<TrainTiming> trains(const PathModel& p, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<TrainTiming> v;
  for (int i = 0; i < n; ++i) v.push_back(simulate(p, rng));
  return v;
}

// What the whole train says: bits after the head over head-to-tail dispersion.
double train_rate(const TrainTiming& t) {
  return 8.0 * 1500 * (static_cast<double>(t.bits.size()) - 1) /
         to_seconds(t.reply.back() - t.reply.front());
}

}  // namespace

TEST_CASE("gaps: a clean path reads its capacity", "[capacity_gaps]") {
  PathModel p;
  p.in_bps = 1e9;
  p.noise_mean_s = 20e-6;
  const GapEstimate g = estimate_capacity_from_gaps(trains(p, 8, 1));
  REQUIRE(g.capacity.valid);
  CHECK(g.capacity.capacity_bps == Approx(p.cap_bps).epsilon(0.01));
  CHECK(g.capacity.low_bps <= p.cap_bps);
  CHECK(g.capacity.high_bps >= p.cap_bps);
  CHECK(g.trains == 8);
}

TEST_CASE("gaps: steady cross traffic biases every train, not the gaps", "[capacity_gaps]") {
  // 50% constant-rate load on 50 Mbit/s, the train reaching the narrow link at
  // 60 Mbit/s (a link just faster before it): each train reads about
  // C·60/(60+25) = 35 Mbit/s, whatever we send.
  PathModel p;
  p.cross = Cross::kCbr;
  p.cross_bps = 25e6;
  p.noise_mean_s = 20e-6;
  const auto ts = trains(p, 8, 2);
  std::vector<double> per_train;
  for (const auto& t : ts) per_train.push_back(train_rate(t));
  CHECK(median(per_train) < 0.8 * p.cap_bps);
  const GapEstimate g = estimate_capacity_from_gaps(ts);
  REQUIRE(g.capacity.valid);
  CHECK(g.capacity.capacity_bps == Approx(p.cap_bps).epsilon(0.03));
  CHECK(g.capacity.low_bps <= p.cap_bps * 1.005);
  CHECK(g.capacity.high_bps >= p.cap_bps * 0.995);
}

TEST_CASE("gaps: over many runs the error is small and the interval holds the truth",
          "[capacity_gaps]") {
  // Three paths, 30 runs of 8 trains each: 50% constant-rate load reaching the
  // link just faster than it; 40% Poisson of mixed sizes on 200 Mbit/s; 80%
  // constant-rate load on 100 Mbit/s. (40 seeds of each gave median errors of
  // 0.9%, 1.4% and 0.4%, the interval holding the truth in 38, 33, 40.)
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<double> errs;
    int holds = 0;
    for (unsigned seed = 100; seed < 130; ++seed) {
      PathModel p;
      p.cross = Cross::kCbr;
      if (kind == 0) {
        p.cross_bps = 25e6;
        p.noise_mean_s = 20e-6;
      } else if (kind == 1) {
        p.cap_bps = 200e6;
        p.in_bps = 250e6;
        p.cross = Cross::kPoisson;
        p.cross_bps = 80e6;
        p.noise_mean_s = 5e-6;
      } else {
        p.cap_bps = 100e6;
        p.in_bps = 1e9;
        p.cross_bps = 80e6;
        p.noise_mean_s = 10e-6;
      }
      const GapEstimate g = estimate_capacity_from_gaps(trains(p, 8, seed));
      REQUIRE(g.capacity.valid);
      errs.push_back(std::fabs(g.capacity.capacity_bps / p.cap_bps - 1));
      holds += g.capacity.low_bps <= p.cap_bps && g.capacity.high_bps >= p.cap_bps;
    }
    INFO("path " << kind);
    CHECK(median(errs) < 0.02);
    CHECK(quantile(errs, 1.0) < 0.05);
    CHECK(holds >= 24);
  }
}

TEST_CASE("gaps: Poisson cross traffic of mixed sizes at 40% on a fast link", "[capacity_gaps]") {
  PathModel p;
  p.cap_bps = 200e6;
  p.in_bps = 250e6;
  p.cross = Cross::kPoisson;
  p.cross_bps = 80e6;
  p.noise_mean_s = 5e-6;
  const GapEstimate g = estimate_capacity_from_gaps(trains(p, 10, 3));
  REQUIRE(g.capacity.valid);
  CHECK(g.capacity.capacity_bps == Approx(p.cap_bps).epsilon(0.04));
}

TEST_CASE("gaps: lost and reordered replies are skipped, not misread", "[capacity_gaps]") {
  PathModel p;
  p.cross = Cross::kCbr;
  p.cross_bps = 20e6;
  p.noise_mean_s = 10e-6;
  auto ts = trains(p, 10, 4);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(1, p.packets - 2);
  for (auto& t : ts) {
    t.reply[static_cast<std::size_t>(pick(rng))] = 0;  // one reply lost per train
    const auto k = static_cast<std::size_t>(pick(rng));
    std::swap(t.reply[k], t.reply[k + 1]);  // two replies swapped (or a lost one moved)
  }
  const GapEstimate g = estimate_capacity_from_gaps(ts);
  REQUIRE(g.capacity.valid);
  CHECK(g.reordered >= 5);
  CHECK(g.capacity.capacity_bps == Approx(p.cap_bps).epsilon(0.03));
}

TEST_CASE("gaps: noise larger than a gap gives a wide interval, not a false one",
          "[capacity_gaps]") {
  // 1 Gbit/s: a gap is 12 us, the replies' noise 100 us on average.
  PathModel p;
  p.cap_bps = 1e9;
  p.in_bps = 10e9;
  p.noise_mean_s = 100e-6;
  const GapEstimate g = estimate_capacity_from_gaps(trains(p, 6, 6));
  if (g.capacity.valid) {
    CHECK((g.capacity.high_bps - g.capacity.low_bps) / g.capacity.capacity_bps > 0.05);
  }
}

TEST_CASE("gaps: too few samples, and rates above our own sending, give nothing",
          "[capacity_gaps]") {
  PathModel p;
  p.noise_mean_s = 10e-6;
  CHECK_FALSE(estimate_capacity_from_gaps(trains(p, 1, 7)).capacity.valid);
  CHECK_FALSE(estimate_capacity_from_gaps({}).capacity.valid);
  // Every gap reads about 50 Mbit/s: a cap of 40 drops them all.
  CHECK_FALSE(estimate_capacity_from_gaps(trains(p, 8, 8), 4, 20, 40e6).capacity.valid);
}


TEST_CASE("gaps: the least-delayed spans agree with the mode on the narrow link",
          "[capacity_gaps]") {
  PathModel p;
  p.cross = Cross::kPoisson;
  p.cross_bps = 25e6;
  p.noise_mean_s = 10e-6;
  const GapEstimate g = estimate_capacity_from_gaps(trains(p, 8, 21));
  REQUIRE(g.capacity.valid);
  REQUIRE(g.min_delay_bps > 0);
  CHECK(g.min_delay_bps == Approx(g.capacity.capacity_bps).epsilon(0.05));
}

TEST_CASE("gaps: a queue after the narrow link squeezes the gaps; the least-delayed spans do not",
          "[capacity_gaps]") {
  // 50 Mbit/s narrow link, then 65 Mbit/s carrying 25 of Poisson traffic: our
  // 50 and its 25 overload it, its queue sends our packets on back to back
  // at 65 whenever no cross packet came between them.
  PathModel p;
  p.in_bps = 1e9;
  p.after_bps = 65e6;
  p.after_cross = Cross::kPoisson;
  p.after_cross_bps = 25e6;
  p.noise_mean_s = 10e-6;
  const GapEstimate g = estimate_capacity_from_gaps(trains(p, 8, 22));
  REQUIRE(g.capacity.valid);
  INFO("mode " << g.capacity.capacity_bps << " least-delayed " << g.min_delay_bps);
  CHECK(g.capacity.capacity_bps > 1.15 * p.cap_bps);  // what the mode alone would say
  CHECK(g.min_delay_bps < 0.9 * g.capacity.capacity_bps);
  // Refused, the gaps still bound the narrow link from above: trains on
  // this path read 50·R/(R + 25) at most, and the interval reaches the gaps.
  CapacityEstimate slowed;
  slowed.valid = true;
  slowed.capacity_bps = 43e6;
  slowed.low_bps = 42e6;
  slowed.high_bps = 44e6;
  const std::string v = judge_gaps(g, slowed, 1e9, false);
  CHECK((v == "squeezed_after_narrow" || v == "trains_too_slow"));
  CHECK(gaps_bound_from_above(v, g, slowed));
  CHECK(g.capacity.high_bps > p.cap_bps);
}

TEST_CASE("gaps: only gaps refused as squeezed after the narrow link widen the interval",
          "[capacity_gaps]") {
  CapacityEstimate trains;
  trains.valid = true;
  trains.capacity_bps = 55e6;
  trains.low_bps = 54e6;
  trains.high_bps = 56e6;
  GapEstimate g;
  g.capacity.valid = true;
  g.capacity.capacity_bps = 100e6;
  g.capacity.low_bps = 99e6;
  g.capacity.high_bps = 101e6;
  CHECK(gaps_bound_from_above("trains_too_slow", g, trains));
  CHECK(gaps_bound_from_above("squeezed_after_narrow", g, trains));
  // Adopted gaps replace the estimate; gaps that agree, below the trains, or
  // not compressed by the path say nothing about an upper end.
  for (const char* v : {"adopted", "adopted_below", "adopted_burst", "agrees", "below_trains",
                        "not_compressed", "no_estimate"}) {
    CHECK_FALSE(gaps_bound_from_above(v, g, trains));
  }
  // Nor gaps that reach no higher than the trains' interval already does.
  g.capacity.high_bps = 55.5e6;
  CHECK_FALSE(gaps_bound_from_above("trains_too_slow", g, trains));
  g.capacity.valid = false;
  g.capacity.high_bps = 101e6;
  CHECK_FALSE(gaps_bound_from_above("trains_too_slow", g, trains));
}

namespace {

CapacityEstimate est(double c, double lo, double hi) {
  CapacityEstimate e;
  e.valid = true;
  e.capacity_bps = c;
  e.low_bps = lo;
  e.high_bps = hi;
  return e;
}

GapEstimate gaps_at(const CapacityEstimate& capacity, double min_delay_bps) {
  GapEstimate g;
  g.capacity = capacity;
  g.min_delay_bps = min_delay_bps;
  return g;
}

}  // namespace

TEST_CASE("gaps: when they replace the trains' estimate", "[capacity_gaps]") {
  GapEstimate g;
  g.capacity = est(100e6, 99e6, 101e6);
  g.min_delay_bps = 99e6;
  const CapacityEstimate biased = est(80e6, 78e6, 82e6);  // every train met cross traffic
  CHECK(judge_gaps(g, biased, 1e9, false) == "adopted");
  CHECK(gaps_adopted("adopted"));
  CHECK(judge_gaps(GapEstimate{}, biased, 1e9, false) == "no_estimate");
  // Our own sending was about as fast: nothing was compressed.
  CHECK(judge_gaps(g, biased, 105e6, false) == "not_compressed");
  // Trains under 0.6 of the gaps: a queue after the narrow link, not cross traffic on it.
  CHECK(judge_gaps(g, est(55e6, 54e6, 56e6), 1e9, false) == "trains_too_slow");
  // The least-delayed spans read lower: the mode's spans waited after the narrow link.
  GapEstimate squeezed = g;
  squeezed.min_delay_bps = 85e6;
  CHECK(judge_gaps(squeezed, biased, 1e9, false) == "squeezed_after_narrow");
  CHECK_FALSE(gaps_adopted("squeezed_after_narrow"));
  // ... by as little as 5% (a loaded link 1.2 times as fast after the narrow
  // one: the benchmark's paths 13 and 39 read +20% with 0.935 and 0.946).
  squeezed.min_delay_bps = 95e6;
  CHECK(judge_gaps(squeezed, biased, 1e9, false) == "squeezed_after_narrow");
  GapEstimate close = g;
  close.min_delay_bps = 99.2e6;  // the lowest of the right adoptions: 0.9905
  CHECK(judge_gaps(close, biased, 1e9, false) == "adopted");
  squeezed.min_delay_bps = 85e6;
  // Within the trains' interval: kept, unless over 2% higher and more precise.
  CHECK(judge_gaps(g, est(99.5e6, 97e6, 102e6), 1e9, false) == "agrees");
  CHECK(judge_gaps(g, est(96e6, 90e6, 102e6), 1e9, false) == "adopted");
  GapEstimate wide = g;
  wide.capacity = est(100e6, 95e6, 105e6);
  wide.min_delay_bps = 98e6;
  CHECK(judge_gaps(wide, est(97e6, 96e6, 99.5e6), 1e9, false) == "agrees");
  // ... unless the least-delayed spans, agreeing with the gaps, read over 2%
  // above the trains too: the trains were slowed. The random-path
  // benchmark's path 49 at 86b52ad (truth 17.31 Mbit/s, on/off at 87%):
  // trains 13.83 [11.82, 13.88], gaps 17.62 [11.72, 17.62], least-delayed
  // 17.22.
  wide.min_delay_bps = 99.5e6;
  CHECK(judge_gaps(wide, est(97e6, 96e6, 99.5e6), 1e9, false) == "adopted");
  GapEstimate p49;
  p49.capacity = est(17.62e6, 11.72e6, 17.62e6);
  p49.min_delay_bps = 17.22e6;
  CHECK(judge_gaps(p49, est(13.83e6, 11.82e6, 13.88e6), 1e9, false) == "adopted");
  // Not when the least-delayed spans are no higher than the trains.
  p49.min_delay_bps = 14.0e6;
  CHECK(judge_gaps(p49, est(13.83e6, 11.82e6, 13.88e6), 1e9, false) != "adopted");
  // Lower, inside a wide interval of the trains (a two-length fit under heavy
  // cross traffic extrapolated above every train): adopted when much sharper,
  // clearly apart and CapProbe agrees.
  GapEstimate sharp;
  sharp.capacity = est(122.1e6, 120.4e6, 126.3e6);
  sharp.min_delay_bps = 121.9e6;
  const CapacityEstimate extrapolated = est(157e6, 70e6, 203e6);
  CHECK(judge_gaps(sharp, extrapolated, 1e9, false) == "adopted");
  // ... not when the least-delayed spans disagree,
  GapEstimate sharp_squeezed = sharp;
  sharp_squeezed.min_delay_bps = 110e6;
  CHECK(judge_gaps(sharp_squeezed, extrapolated, 1e9, false) == "agrees");
  // ... nor when the two are within 1% (or twice the gaps' half-width),
  CHECK(judge_gaps(g, est(99.5e6, 90e6, 110e6), 1e9, false) == "agrees");
  CHECK(judge_gaps(sharp, est(125e6, 70e6, 180e6), 1e9, false) == "agrees");
  // ... nor when their interval is not under half the trains'.
  CHECK(judge_gaps(wide, est(110e6, 100e6, 120e6), 1e9, false) == "agrees");
  // Below the trains: only trains that lost load unseen (they read high) give way.
  const CapacityEstimate high = est(110e6, 108e6, 112e6);
  CHECK(judge_gaps(g, high, 1e9, false) == "below_trains");
  CHECK(judge_gaps(g, high, 1e9, true) == "adopted_below");
  CHECK(judge_gaps(squeezed, high, 1e9, true) == "below_trains");
  // ... or trains extrapolated over two offered rates (the caller says
  // "may read high" for both): benchmark path 8 at dce3dca, 50.10 [49.82,
  // 50.47] for 47.32, gaps 47.36 [47.20, 47.67] with the least-delayed
  // spans at 47.28.
  GapEstimate p8;
  p8.capacity = est(47.356e6, 47.20e6, 47.667e6);
  p8.min_delay_bps = 47.284e6;
  const CapacityEstimate fit = est(50.10e6, 49.82e6, 50.47e6);
  CHECK(judge_gaps(p8, fit, 1.03e9, true) == "adopted_below");
  CHECK(judge_gaps(p8, fit, 1.03e9, false) == "below_trains");
  // ... or gaps much sharper than trains at most 15% above them: a shaper's
  // burst on the narrow link lifted every train (the paths benchmark at
  // 058f6ef, seed 2032, path 5: a 10.3 Mbit/s tbf, 10.19 at the IP layer;
  // trains 10.90 [10.74, 11.07], gaps 10.184 [10.174, 10.200], least-delayed
  // 10.176).
  const GapEstimate p5 = gaps_at(est(10.1842e6, 10.1740e6, 10.1997e6), 10.1765e6);
  const CapacityEstimate lifted = est(10.905e6, 10.741e6, 11.068e6);
  CHECK(judge_gaps(p5, lifted, 999e6, false) == "adopted_burst");
  CHECK(gaps_adopted("adopted_burst"));
  // With a sign of reading high too, that sign is the reason.
  CHECK(judge_gaps(p5, lifted, 999e6, true) == "adopted_below");
  // Not when the least-delayed spans disagree, the trains read over 15%
  // above, or the gaps are not under half as wide.
  CHECK(judge_gaps(gaps_at(p5.capacity, 9.5e6), lifted, 999e6, false) == "below_trains");
  CHECK(judge_gaps(p5, est(11.8e6, 11.6e6, 12.0e6), 999e6, false) == "below_trains");
  CHECK(judge_gaps(gaps_at(est(10.1842e6, 10.05e6, 10.30e6), p5.min_delay_bps), lifted, 999e6,
                   false) == "below_trains");
}

TEST_CASE("gaps: a trains' estimate above every train is replaced by sharper gaps",
          "[capacity_gaps]") {
  // The random-path benchmark's path 27 at 7c0be47: on/off at 78% on a
  // 167.8 Mbit/s narrow link (166.3 at the IP layer); the fit read 198.1
  // [116.9, 210.2], the fastest kept train 166.7; gaps 164.8 [158.3,
  // 180.7], least-delayed spans 158.9 (under 0.97 of the gaps).
  const CapacityEstimate fit = est(198.08e6, 116.89e6, 210.17e6);
  GapEstimate g;
  g.capacity = est(164.78e6, 158.33e6, 180.73e6);
  g.min_delay_bps = 158.87e6;
  CHECK(judge_gaps(g, fit, 596e6, false, 166.7e6) == "adopted_unsupported");
  CHECK(gaps_adopted("adopted_unsupported"));
  // Without the trains' readings the old verdict: agrees.
  CHECK(judge_gaps(g, fit, 596e6, false) == "agrees");
  // A fit a fixed offset lifts 1.5% over the fastest train stands.
  CHECK(judge_gaps(g, fit, 596e6, false, 198.08e6 / 1.015) == "agrees");
  // Gaps no sharper than half the trains' interval: the trains stand
  // (benchmark b28 path 11: fit 108.1 [106.9, 108.9], 2.8% over the fastest
  // train, gaps 112.0 [106.4, 115.2]).
  const CapacityEstimate tight = est(108.10e6, 106.90e6, 108.86e6);
  GapEstimate wide;
  wide.capacity = est(111.96e6, 106.40e6, 115.17e6);
  wide.min_delay_bps = 110.08e6;
  CHECK(judge_gaps(wide, tight, 633e6, false, 108.10e6 / 1.028) != "adopted_unsupported");
  // The same path at 752207d: gaps 172.3 [156.2, 189.3], their interval
  // reaching the fastest train (166.75).
  GapEstimate again;
  again.capacity = est(172.31e6, 156.23e6, 189.29e6);
  again.min_delay_bps = 168.50e6;
  CHECK(judge_gaps(again, est(198.55e6, 117.11e6, 214.08e6), 624e6, false, 166.75e6) ==
        "adopted_unsupported");
  // Gaps whose whole interval lies over 2% above the fastest train: not
  // what the trains did.
  GapEstimate fast = g;
  fast.capacity = est(176e6, 172e6, 180e6);
  CHECK(judge_gaps(fast, fit, 596e6, false, 166.7e6) != "adopted_unsupported");
  // Gaps whose interval reaches the fastest train but whose estimate reads
  // twice it: the rate of a loaded link after the narrow one, not the
  // capacity (benchmark path 14 at 0de00f7: fit 266.2 [41.5, 1400], fastest
  // kept train 138.4, gaps 282.0 [63.2, 300.1], least-delayed spans 77.0,
  // truth 61.6). Refused, the trains' interval holds the truth.
  GapEstimate squeezed;
  squeezed.capacity = est(282.02e6, 63.21e6, 300.13e6);
  squeezed.min_delay_bps = 77.04e6;
  const std::string v =
      judge_gaps(squeezed, est(266.24e6, 41.50e6, 1400e6), 966e6, true, 138.38e6);
  CHECK_FALSE(gaps_adopted(v));
  CHECK(v == "squeezed_after_narrow");
  // Gaps wholly below an estimate over every kept train, agreeing with the
  // least-delayed spans: adopted, with no warning of extrapolation needed
  // (benchmark path 24 at b625f6b: kept trains 7.8-18.8, the estimate 31.2
  // [18.4, 56.7]; gaps 16.99 [16.96, 17.02], least-delayed 16.95; truth 17.1).
  GapEstimate below;
  below.capacity = est(16.99e6, 16.96e6, 17.02e6);
  below.min_delay_bps = 16.95e6;
  const CapacityEstimate fit31 = est(31.25e6, 18.42e6, 56.68e6);
  CHECK(judge_gaps(below, fit31, 1047e6, false, 18.8e6) == "adopted_below");
  // Without the trains' readings (or with a fastest train that supports the
  // estimate) the gaps below stay refused.
  CHECK(judge_gaps(below, fit31, 1047e6, false) == "below_trains");
  CHECK(judge_gaps(below, fit31, 1047e6, false, 31e6) == "below_trains");
  // Nor where the least-delayed spans disagree.
  below.min_delay_bps = 15e6;
  CHECK(judge_gaps(below, fit31, 1047e6, false, 18.8e6) == "below_trains");
}

TEST_CASE("a lone fastest train far above the rest is no reading of the path", "[gaps]") {
  // Benchmark path 24 at 7b0178f: kept trains 6.8-20.9 and one at 80.3, the
  // fit 38.2 [24.7, 75.0]; gaps 16.96 [16.90, 17.01], least-delayed 16.81,
  // truth 16.99. With 80.3 as the fastest train the fit looked supported and
  // the gaps were refused: +125%.
  const std::vector<double> kept = {12.9e6, 18.8e6, 10.1e6, 10.1e6, 11.3e6, 17.4e6, 13.1e6,
                                    12.1e6, 13.1e6, 12.4e6, 80.3e6, 12.7e6, 20.9e6, 6.8e6};
  CHECK(fastest_train_bps(kept) == 20.9e6);
  GapEstimate g;
  g.capacity = est(16.96e6, 16.90e6, 17.01e6);
  g.min_delay_bps = 16.81e6;
  const CapacityEstimate fit = est(38.17e6, 24.68e6, 75.03e6);
  CHECK(judge_gaps(g, fit, 1019e6, false, fastest_train_bps(kept)) == "adopted_below");
  CHECK(judge_gaps(g, fit, 1019e6, false, 80.3e6) == "below_trains");
  // Not lone (under 1.5 times the next): the fastest stands.
  CHECK(fastest_train_bps({128.63e6, 123.37e6, 120e6}) == 128.63e6);
  // Two trains decide nothing about which is the odd one; none gives 0.
  CHECK(fastest_train_bps({80e6, 20e6}) == 80e6);
  CHECK(fastest_train_bps({}) == 0);
}

TEST_CASE("refused gaps: a group of trains that agrees with the least-delayed spans is the capacity",
          "[gaps]") {
  // Benchmark path 27 at b625f6b (on/off at 78% on a 167.8 Mbit/s narrow
  // link, truth 166.3): most trains slowed by bursts, four met none.
  const std::vector<double> kept = {136.6e6, 166.3e6, 114.8e6, 113.9e6, 114.7e6, 116.7e6,
                                    166.2e6, 112.0e6, 135.0e6, 128.1e6, 125.3e6, 108.3e6,
                                    144.7e6, 121.2e6, 91.7e6,  166.9e6, 128.0e6, 121.0e6,
                                    111.3e6, 166.4e6, 123.7e6, 135.8e6, 93.6e6};
  const DenseMode d = least_delayed_group(kept, 166.36e6, 113.74e6);
  REQUIRE(d.found);
  CHECK(d.count == 4);
  CHECK(d.rate_bps == Approx(166.35e6).epsilon(0.001));
  CHECK(d.low_bps == Approx(166.2e6));
  CHECK(d.high_bps == Approx(166.9e6));
  // Two trains are not a group.
  CHECK_FALSE(least_delayed_group({166.3e6, 166.4e6, 113e6, 114e6}, 166.36e6, 113.74e6).found);
  // Least-delayed spans no higher than the trains' estimate: nothing to say.
  CHECK_FALSE(least_delayed_group(kept, 115e6, 113.74e6).found);
  // Nor without them.
  CHECK_FALSE(least_delayed_group(kept, 0, 113.74e6).found);
}

TEST_CASE("gaps: trains and least-delayed spans that read one narrower link veto the hop",
          "[capacity_gaps]") {
  // The random-path benchmark's path 59 with seed 2033 at d8bd529: 219.3,
  // 7.8 (TCP) and 6.5 Mbit/s links, 6.41 at the IP layer. The gaps read 7.60
  // (pairs passed the last link's two-packet burst unspread), hop 2 7.68.
  const std::vector<double> p59 = {6.389e6, 6.417e6, 7.686e6, 7.139e6, 7.679e6, 6.396e6,
                                   6.39e6,  6.402e6, 6.394e6, 6.399e6, 6.392e6, 7.134e6,
                                   4.396e6, 6.398e6, 6.389e6, 6.4e6,   6.392e6, 7.138e6,
                                   5.593e6, 6.402e6, 6.394e6, 6.399e6, 6.393e6};
  CHECK(trains_read_a_narrower_link(p59, 6.41989e6, 6.39515e6));
  // Least-delayed spans at the earlier link's rate: a loaded later link.
  CHECK_FALSE(trains_read_a_narrower_link(p59, 7.60e6, 6.39515e6));
  CHECK_FALSE(trains_read_a_narrower_link(p59, 0, 6.39515e6));
  // Seed 2033's path 38: a 19.8 Mbit/s narrow link, then 106.5 with Poisson
  // at 88%; least-delayed 17.65 within 2% of the trains' 17.94, but the
  // trains spread from 15.5 to 22.4 (the later link's cross traffic): the
  // hop (19.59, truth 19.62) stands.
  const std::vector<double> p38 = {17.85e6, 18.41e6, 17.64e6, 17.68e6, 16.77e6, 17.31e6,
                                   15.5e6,  17.41e6, 16.11e6, 18.14e6, 18.05e6, 20.74e6,
                                   16.87e6, 19.31e6, 22.41e6, 17.88e6, 16.89e6, 18.46e6,
                                   19.9e6,  19.68e6, 18.08e6, 19.14e6, 19.48e6};
  CHECK_FALSE(trains_read_a_narrower_link(p38, 17.6544e6, 17.9364e6));
  // Agreeing trains on a rate other than the estimate say nothing of it.
  CHECK_FALSE(trains_read_a_narrower_link(p59, 7.0e6, 7.0e6));
}
