// The avail-bw search state machines driven by a fake link model: a function
// from offered rate to R_m/R_o, with noise (fluid TOPP model, LinkWidth §3.1).
#include <catch2/catch.hpp>
#include <functional>
#include <random>

#include "estimate/availbw.hpp"

using namespace lw;

namespace {

struct FakeLink {
  double tight_capacity;  // C_t
  double availbw;         // A (mean)
  double availbw_spread;  // A varies uniformly by +-spread per train
  double noise;           // sd of the ratio's timing noise
  double bias;            // baseline offset of the ratio (timing bias)
  std::mt19937 rng{7};

  double ratio(double offered) {
    std::uniform_real_distribution<double> u(-availbw_spread, availbw_spread);
    std::normal_distribution<double> n(0.0, noise);
    const double a = availbw + u(rng);
    const double x = tight_capacity - a;  // cross traffic
    const double r = offered <= a ? 1.0 : (offered + x) / tight_capacity;
    return r + bias + n(rng);
  }
};

struct SearchOutcome {
  double low, high, point;
  ResponseFit fit;
  int fleets;
};

SearchOutcome run_fleet_search(FakeLink& link, double capacity, int k = 6, double eta = 0.7) {
  std::vector<double> calib;
  for (int i = 0; i < 8; ++i) calib.push_back(link.ratio(0.05 * capacity));
  const NoiseModel noise = calibrate_noise(calib);
  FleetSearchParams p;
  p.capacity_bps = capacity;
  p.resolution_bps = 0.03 * capacity;
  FleetSearch s(p);
  int fleets = 0;
  while (!s.done() && fleets < 30) {
    const double rate = s.next_rate();
    std::vector<TrainVerdict> v;
    std::vector<double> ratios;
    for (int i = 0; i < k; ++i) {
      const double r = link.ratio(rate);
      ratios.push_back(r);
      v.push_back(classify_train(r, false, noise));
    }
    std::sort(ratios.begin(), ratios.end());
    s.observe(rate, ratios[ratios.size() / 2], decide_fleet(v, eta));
    ++fleets;
  }
  const ResponseFit fit = fit_response(s.history(), noise.baseline);
  return {s.low(), s.high(), availbw_point(fit, s.low(), s.high(), p.resolution_bps), fit, fleets};
}

}  // namespace

TEST_CASE("LinkWidth binary search converges on a clean link (paper §3.4)", "[availbw][paper]") {
  FakeLink link{100e6, 60e6, 0, 0, 0};
  LinkWidthSearch s({100e6, 1e6, 0.1});
  int steps = 0;
  while (!s.done()) {
    s.observe(link.ratio(s.next_rate()));
    ++steps;
  }
  CHECK(steps == 7);  // 100 Mbit/s halved below 1 Mbit/s
  CHECK(s.estimate() == Approx(60e6).margin(1e6));
  CHECK(s.low() <= 60e6);
  CHECK(s.high() >= 60e6);
}

TEST_CASE("LinkWidth binary search needs its ε tuned to the timing bias", "[availbw][paper]") {
  // The ratio sits 0.15 below 1 on this path: with ε = 0.1 every train looks
  // like step 6 and the search collapses to zero. With ε = 0.2 the search runs
  // but its fixed "ratio > 1" test fires only once the ratio has climbed the
  // 0.15 back: it overestimates A by 0.15 × C_t = 15 Mbit/s. This is the
  // hand-tuning the paper describes and the default method avoids.
  FakeLink biased{100e6, 60e6, 0, 0, -0.15};
  LinkWidthSearch bad({100e6, 1e6, 0.1});
  while (!bad.done()) bad.observe(biased.ratio(bad.next_rate()));
  CHECK(bad.estimate() < 1e6);
  LinkWidthSearch good({100e6, 1e6, 0.2});
  while (!good.done()) good.observe(biased.ratio(good.next_rate()));
  CHECK(good.estimate() == Approx(75e6).margin(1.5e6));
}

TEST_CASE("noise calibration sets the threshold from the path", "[availbw]") {
  std::mt19937 rng(3);
  std::normal_distribution<double> n(1.0, 0.001);
  std::vector<double> r;
  for (int i = 0; i < 200; ++i) r.push_back(n(rng));
  const NoiseModel m = calibrate_noise(r);
  CHECK(m.baseline == Approx(1.0).margin(0.0003));
  CHECK(m.threshold == Approx(0.004).epsilon(0.2));
  CHECK(calibrate_noise({1.0, 1.0, 1.0}).threshold == Approx(0.002));  // the floor
}

TEST_CASE("train and fleet verdicts", "[availbw]") {
  const NoiseModel m{1.0, 0.004};
  CHECK(classify_train(1.001, false, m) == TrainVerdict::kBelow);
  CHECK(classify_train(1.003, false, m) == TrainVerdict::kUnclear);
  CHECK(classify_train(1.010, false, m) == TrainVerdict::kAbove);
  CHECK(classify_train(0.990, true, m) == TrainVerdict::kAbove);  // loss counts as above
  using V = TrainVerdict;
  CHECK(decide_fleet({V::kAbove, V::kAbove, V::kAbove, V::kBelow}, 0.7) == FleetVerdict::kAbove);
  CHECK(decide_fleet({V::kBelow, V::kBelow, V::kBelow, V::kUnclear}, 0.7) ==
        FleetVerdict::kBelow);
  CHECK(decide_fleet({V::kBelow, V::kAbove, V::kBelow, V::kAbove}, 0.7) == FleetVerdict::kGrey);
  CHECK(decide_fleet({}, 0.7) == FleetVerdict::kGrey);
}

TEST_CASE("response-curve fit recovers A and the tight-link capacity", "[availbw]") {
  // Exact fluid points above A = 40 on C_t = 100: ratio = (O + 60) / 100.
  std::vector<RatePoint> pts = {{20e6, 1.0, FleetVerdict::kBelow},
                                {50e6, 1.1, FleetVerdict::kAbove},
                                {70e6, 1.3, FleetVerdict::kAbove},
                                {90e6, 1.5, FleetVerdict::kAbove},
                                {60e6, 3.0, FleetVerdict::kAbove}};  // one outlier
  const ResponseFit f = fit_response(pts, 1.0);
  REQUIRE(f.valid);
  CHECK(f.availbw_bps == Approx(40e6).epsilon(0.02));
  CHECK(f.tight_capacity_bps == Approx(100e6).epsilon(0.02));
  CHECK_FALSE(fit_response({pts[0], pts[1]}, 1.0).valid);  // one point above is not a line
  // Outside the bracket the fit is not trusted.
  CHECK(availbw_point(f, 10e6, 20e6, 1e6) == Approx(15e6));
  CHECK(availbw_point(f, 35e6, 45e6, 1e6) == Approx(40e6).epsilon(0.02));
}

TEST_CASE("fleet search finds A within 5% with a range that contains it", "[availbw][fleet]") {
  struct Case {
    double c, a;
  } cases[] = {{100e6, 60e6}, {50e6, 30e6}, {10e6, 5e6}, {300e6, 60e6}, {100e6, 92e6}};
  for (const auto& k : cases) {
    FakeLink link{k.c, k.a, 0, 0.0005, 0.0003};
    const SearchOutcome o = run_fleet_search(link, k.c);
    INFO("C " << k.c << " A " << k.a << " range " << o.low << ".." << o.high << " point "
              << o.point);
    CHECK(o.low <= k.a);
    CHECK(o.high >= k.a);
    CHECK(o.point == Approx(k.a).epsilon(0.05));
    CHECK(o.fleets < 12);
  }
}

TEST_CASE("fleet search with a fluctuating avail-bw reports a grey range", "[availbw][fleet]") {
  // A varies uniformly in 50..70 Mbit/s from train to train.
  FakeLink link{100e6, 60e6, 10e6, 0.0005, 0};
  const SearchOutcome o = run_fleet_search(link, 100e6);
  INFO("range " << o.low << ".." << o.high);
  CHECK(o.low >= 40e6);
  CHECK(o.low <= 62e6);
  CHECK(o.high >= 58e6);
  CHECK(o.high <= 80e6);
  CHECK(o.fleets < 20);
}

TEST_CASE("a contradicting fleet reopens the bracket instead of inverting it", "[availbw][fleet]") {
  FleetSearch s({100e6, 3e6, 0.5});
  s.observe(50e6, 1.2, FleetVerdict::kAbove);
  s.observe(25e6, 1.0, FleetVerdict::kBelow);
  s.observe(60e6, 1.0, FleetVerdict::kBelow);  // the path got emptier
  CHECK(s.low() == 60e6);
  CHECK(s.high() == 100e6);
  CHECK_FALSE(s.done());
}
