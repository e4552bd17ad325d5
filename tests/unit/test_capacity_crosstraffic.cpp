// Capacity under cross traffic (issue 11, part 1), on synthetic timestamp
// vectors: a packet-level FIFO narrow link with cross traffic (constant rate,
// Poisson with mixed sizes, on/off with heavy-tailed periods), our
// back-to-back trains arriving at the rate the links before it let through,
// reply timestamps with this VM's noise (20-200 us per reply, uniform), and
// rejected trains (lost or reordered replies drop out of a group). What it
// shows: the two-length slope of lower-quartile dispersions is within 1% on a
// clean path at 10 Mbit/s to 1 Gbit/s despite the noise, also when a third of
// the trains are rejected; with cross traffic that every train meets it reads
// low by about X / (the rate the train reaches the narrow link at), which is
// what issue 11 measured; packet pairs (CapProbe) drown in the noise. The bar
// of issue 11 is the hidden "[goal]" test: it fails today.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "estimate/capacity.hpp"
#include "estimate/stats.hpp"
#include "plan/capacity_plan.hpp"

using namespace lw;

namespace {

// kIperf: constant rate as iperf3 sends it, in bursts every 1 ms (its pacing
// timer): 80 Mbit/s is 7 full-size packets per millisecond.
enum class Cross { kNone, kCbr, kPoisson, kOnOff, kIperf };

struct LinkSim {
  double C = 100e6;  // narrow link, bit/s
  double X = 0;      // mean cross traffic, bit/s
  Cross kind = Cross::kNone;
  double noise_lo = 20e-6, noise_hi = 200e-6;  // reply timestamp noise, s
  double line_bps = 1e9;                       // our own interface (back-to-back spacing)
  // A link before the narrow one that spreads the train to this rate (0: none).
  double upstream_bps = 0;
  std::mt19937 rng{7};

  // Cross-traffic arrivals (time, bits) over [0, span).
  std::vector<std::pair<double, double>> cross(double span) {
    std::vector<std::pair<double, double>> v;
    if (kind == Cross::kNone || X <= 0) return v;
    std::uniform_real_distribution<double> u(0, 1);
    if (kind == Cross::kIperf) {
      const double burst = X * 1e-3;  // bits per millisecond
      for (double t = u(rng) * 1e-3; t < span; t += 1e-3) {
        for (double b = 0; b < burst; b += 12000) v.push_back({t, std::min(12000.0, burst - b)});
      }
    } else if (kind == Cross::kCbr) {
      const double gap = 12000 / X;
      for (double t = u(rng) * gap; t < span; t += gap) v.push_back({t, 12000});
    } else if (kind == Cross::kPoisson) {
      // 1500/576/64-byte IP packets at 40/20/40 % (the lab's mix).
      const double mean_bits = 8 * (0.4 * 1500 + 0.2 * 576 + 0.4 * 64);
      std::exponential_distribution<double> e(X / mean_bits);
      for (double t = e(rng); t < span; t += e(rng)) {
        const double p = u(rng);
        v.push_back({t, 8.0 * (p < 0.4 ? 1500 : p < 0.6 ? 576 : 64)});
      }
    } else {
      // On/off: bursts at 2X for heavy-tailed (Pareto) on and off periods.
      const double gap = 12000 / (2 * X);
      double t = 0;
      bool on = u(rng) < 0.5;
      while (t < span) {
        const double period = 0.5e-3 / std::pow(1 - u(rng), 1 / 1.5);
        if (on) {
          for (double s = t; s < std::min(span, t + period); s += gap) v.push_back({s, 12000});
        }
        t += period;
        on = !on;
      }
    }
    return v;
  }

  // One train: head SYN, n load packets of 1500 B, tail SYN, sent at `rate`
  // (0 = back to back at line rate) after 5 ms of cross traffic. Returns
  // {reply dispersion, send dispersion, bits after head}.
  struct Out {
    double reply, send, bits;
    double head_delay = 0, tail_delay = 0;  // reply - send of head and tail marker
  };
  // CapProbe's probe: `drain` full-size packets, then a pair of full-size
  // markers, back to back at the arrival rate.
  Out pair(int drain = 2) {
    const double t0 = 5e-3;
    std::vector<double> arr;
    double t = t0;
    for (int i = 0; i < drain + 2; ++i) {
      arr.push_back(t);
      t += 12000 / line_bps;
    }
    auto x = cross(t + 0.05);
    std::vector<std::pair<double, int>> all;
    for (auto& [a, b] : x) all.push_back({a, -int(b)});
    for (std::size_t i = 0; i < arr.size(); ++i) all.push_back({arr[i], int(i)});
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    double busy = 0, d1 = 0, d2 = 0;
    for (auto& [a, idx] : all) {
      const double bits = idx < 0 ? -idx : 12000;
      busy = std::max(busy, a) + bits / C;
      if (idx == drain) d1 = busy;
      if (idx == drain + 1) d2 = busy;
    }
    std::uniform_real_distribution<double> nz(noise_lo, noise_hi);
    d1 += nz(rng);
    d2 += nz(rng);
    Out o{d2 - d1, arr[drain + 1] - arr[drain], 12000};
    o.head_delay = d1 - arr[drain];
    o.tail_delay = d2 - arr[drain + 1];
    return o;
  }
  Out train(int n, double rate) {
    const double t0 = 5e-3;
    std::vector<std::pair<double, double>> ours;  // arrival at the narrow link, bits
    double t = t0, sent = t0;
    ours.push_back({t, 320});
    for (int i = 0; i <= n; ++i) {
      const double bits = i < n ? 12000 : 320;
      sent += rate > 0 ? 12000 / rate : bits / line_bps;
      // The upstream link serves each packet at its rate, FIFO behind the last.
      t = upstream_bps > 0 ? std::max(sent, t + bits / upstream_bps) : sent;
      ours.push_back({t, bits});
    }
    auto x = cross(t + 0.05);
    // FIFO: merge by arrival (ours first on ties), serve at C.
    std::vector<std::tuple<double, int, double>> all;  // time, index (-1 = cross), bits
    for (auto& [a, b] : x) all.push_back({a, -1, b});
    for (std::size_t i = 0; i < ours.size(); ++i)
      all.push_back({ours[i].first, int(i), ours[i].second});
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b)
                                              : std::get<1>(a) > std::get<1>(b);
    });
    double busy = 0, head = 0, tail = 0;
    for (auto& [a, idx, bits] : all) {
      busy = std::max(busy, a) + bits / C;
      if (idx == 0) head = busy;
      if (idx == int(ours.size()) - 1) tail = busy;
    }
    std::uniform_real_distribution<double> nz(noise_lo, noise_hi);
    head += nz(rng);
    tail += nz(rng);
    double bits = 0;
    for (std::size_t i = 1; i < ours.size(); ++i) bits += ours[i].second;
    return {tail - head, sent - t0, bits};
  }
};

struct Run {
  SlopeEstimate slope;
};

// `per_len` trains of each length, sized for 3 ms at C; a fraction `lost`
// of them rejected (lost or reordered reply).
Run run(LinkSim& sim, int per_len = 20, double lost = 0, double send_lo = 0, double send_hi = 0) {
  const int n = std::max(8, int(std::ceil(0.003 * sim.C / 12000)));
  std::vector<double> d[2];
  double bits[2] = {0, 0};
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < per_len; ++k) {
    for (int l = 0; l < 2; ++l) {
      if (send_lo > 0) sim.line_bps = send_lo + (send_hi - send_lo) * u(sim.rng);
      const LinkSim::Out o = sim.train(l ? 2 * n : n, 0);
      bits[l] = o.bits;
      if (u(sim.rng) < lost) continue;
      d[l].push_back(o.reply);
    }
  }
  Run r;
  r.slope = estimate_capacity_slope(d[0], bits[0], d[1], bits[1]);
  return r;
}

struct Tally {
  std::vector<double> errs;
  int held = 0;
};

// 9 seeds. `arrival_bps`: the rate the links before the narrow one let a
// back-to-back train through; with `send_lo` > 0 each train is instead sent at
// a random rate in [send_lo, send_hi] (a busy CPU).
Tally trials(double C, double util, Cross kind, double arrival_bps, double lost = 0,
             double send_lo = 0, double send_hi = 0) {
  Tally t;
  for (int seed = 1; seed <= 9; ++seed) {
    LinkSim sim;
    sim.C = C;
    sim.X = util * C;
    sim.kind = kind;
    sim.line_bps = arrival_bps;
    sim.rng.seed(seed);
    const Run r = run(sim, 20, lost, send_lo, send_hi);
    REQUIRE(r.slope.capacity.valid);
    const CapacityEstimate& a = r.slope.capacity;
    t.errs.push_back(std::fabs(a.capacity_bps / C - 1));
    t.held += a.low_bps <= C && C <= a.high_bps;
  }
  return t;
}

}  // namespace

TEST_CASE("clean path with 20-200 us reply noise: within 1% from 10 Mbit/s to 1 Gbit/s",
          "[capacity][crosstraffic]") {
  for (double C : {10e6, 100e6, 300e6, 1e9}) {
    const Tally t = trials(C, 0, Cross::kNone, 10e9, C == 100e6 ? 0.3 : 0.0);
    INFO("C " << C << " median |err| " << median(t.errs) << " held " << t.held);
    CHECK(median(t.errs) <= 0.01);
    CHECK(quantile(t.errs, 0.9) <= 0.03);
    CHECK(t.held >= 7);
  }
}

// What the issue measured, reproduced: trains that all meet cross traffic on
// the narrow link read C / (1 + X / arrival rate). Kept as a record of the
// failure mode (these bounds fail if the simulator or the estimator change
// what it is); the bar of issue 11 is the hidden test below.
TEST_CASE("cross traffic every train meets: the slope reads low by about X / arrival rate",
          "[capacity][crosstraffic]") {
  // CBR at 80% of 100 Mbit/s, trains arriving at 1 Gbit/s: about -7%.
  Tally t = trials(100e6, 0.8, Cross::kCbr, 1e9);
  CHECK(median(t.errs) == Approx(0.074).margin(0.02));
  CHECK(t.held <= 2);
  // Poisson mixed sizes at 30% of 80 Mbit/s behind links that spread the
  // train to 150 Mbit/s (the 4-hop path): about -13%.
  t = trials(80e6, 0.3, Cross::kPoisson, 150e6);
  CHECK(median(t.errs) == Approx(0.13).margin(0.04));
  // Poisson at 40% of 50 Mbit/s arriving at 1 Gbit/s: within 1-3%.
  const Tally fast = trials(50e6, 0.4, Cross::kPoisson, 1e9);
  CHECK(median(fast.errs) <= 0.02);
  // The same when this host sends each train at 0.25-1.1 Gbit/s (what a busy
  // CPU did in the lab): slower trains collect more cross traffic, the tail
  // of the errors grows (a lab run read -8%).
  const Tally slow = trials(50e6, 0.4, Cross::kPoisson, 1e9, 0, 250e6, 1.1e9);
  CHECK(quantile(slow.errs, 0.9) > quantile(fast.errs, 0.9));
}

// Issue 11's bar (median 1%, interval holds the truth). Fails today: hidden,
// run with `linkwidth_tests "[goal]"`.
TEST_CASE("goal: within 1% under cross traffic every train meets", "[.][goal]") {
  struct Case {
    Cross kind;
    double C, util, arrival;
  };
  const Case cases[] = {{Cross::kCbr, 100e6, 0.8, 1e9},
                        {Cross::kPoisson, 50e6, 0.4, 1e9},
                        {Cross::kPoisson, 80e6, 0.3, 150e6},
                        {Cross::kOnOff, 100e6, 0.3, 1e9},
                        {Cross::kOnOff, 80e6, 0.3, 150e6}};
  for (const Case& k : cases) {
    const Tally t = trials(k.C, k.util, k.kind, k.arrival);
    INFO("kind " << int(k.kind) << " C " << k.C << " util " << k.util << " arrival " << k.arrival
                 << ": median |err| " << median(t.errs) << " 90th " << quantile(t.errs, 0.9)
                 << " held " << t.held << "/9");
    CHECK(median(t.errs) <= 0.01);
    CHECK(quantile(t.errs, 0.9) <= 0.03);
    CHECK(t.held >= 8);
  }
}

// Why the estimator keeps multi-packet trains instead of CapProbe's packet
// pairs (Kapoor et al. 2004): a pair's dispersion at 100 Mbit/s is 120 us,
// less than the reply-timestamp noise of this VM, and the minimum delay-sum
// filter (the pair whose two replies met the least queueing and the least
// noise) needs far more pairs than the reply budget (100 replies/s, ~3
// replies per probe) allows in a 1-3 s phase. On a clean 100 Mbit/s path with
// 60 pairs it is off by several percent where the trains are within 1%.
TEST_CASE("CapProbe pairs under 20-200 us reply noise: far worse than trains at 100 Mbit/s",
          "[capacity][crosstraffic]") {
  std::vector<double> errs;
  for (int seed = 1; seed <= 9; ++seed) {
    LinkSim sim;
    sim.C = 100e6;
    sim.rng.seed(seed);
    std::vector<std::pair<double, double>> v;  // delay sum, dispersion
    for (int i = 0; i < 60; ++i) {
      const LinkSim::Out o = sim.pair();
      v.push_back({o.head_delay + o.tail_delay, o.reply});
    }
    std::sort(v.begin(), v.end());
    errs.push_back(std::fabs(12000 / v[0].second / sim.C - 1));
  }
  INFO("CapProbe, 60 pairs: median |err| " << median(errs));
  CHECK(median(errs) > 0.03);
  const Tally trains = trials(100e6, 0, Cross::kNone, 1e9);
  CHECK(median(trains.errs) < 0.01);
}

// ---- Two offered rates (estimate_capacity_two_rates) ----------------------
namespace {

struct TwoRate {
  std::vector<double> errs, pooled_errs;
  int held = 0, corrected = 0;
};

// One simulated run as capacity_run plans it: a sizing train back to back,
// then 40 trains cycling short/long x fast/slow; the fast ones leave this host
// at `fast_bps` x U[0.75, 1.05] (a busy CPU), the slow ones paced at
// slow_train_rate(fast, sizing estimate) x U[0.9, 1.0]; a fraction `lost` of
// the trains rejected. Returns the estimate.
TwoRateEstimate two_rate_run(LinkSim& sim, double fast_bps, double lost = 0) {
  const int n = std::max(8, int(std::ceil(0.003 * sim.C / 12000)));
  std::uniform_real_distribution<double> u(0, 1);
  const LinkSim::Out sizing = sim.train(16, fast_bps);
  const double slow = slow_train_rate(fast_bps, sizing.bits / sizing.reply);
  std::vector<TrainDispersion> v;
  for (int k = 0; k < 40; ++k) {
    const int group = k % 2;
    const bool is_slow = slow > 0 && slow_train_turn(k);
    const double rate =
        is_slow ? slow * (0.9 + 0.1 * u(sim.rng)) : fast_bps * (0.75 + 0.3 * u(sim.rng));
    const LinkSim::Out o = sim.train(group ? 2 * n : n, rate);
    if (u(sim.rng) < lost) continue;
    if (o.send * 1.1 > o.reply) continue;  // not compressed: not kept (evaluate_capacity_train)
    v.push_back({o.bits, o.send, o.reply, group});
  }
  return estimate_capacity_two_rates(v);
}

TwoRate two_rate_trials(double C, double util, Cross kind, double fast_bps, double lost = 0,
                        double upstream = 0, int seeds = 9) {
  TwoRate t;
  for (int seed = 1; seed <= seeds; ++seed) {
    LinkSim sim;
    sim.C = C;
    sim.X = util * C;
    sim.kind = kind;
    sim.upstream_bps = upstream;
    sim.rng.seed(seed);
    const TwoRateEstimate e = two_rate_run(sim, fast_bps, lost);
    REQUIRE(e.capacity.valid);
    t.errs.push_back(std::fabs(e.capacity.capacity_bps / C - 1));
    t.pooled_errs.push_back(std::fabs(e.pooled.capacity.capacity_bps / C - 1));
    t.held += e.capacity.low_bps <= C && C <= e.capacity.high_bps;
    t.corrected += e.rate_corrected;
  }
  return t;
}

}  // namespace

// The one-rate estimate on the same path, all trains at `fast_bps`.
double one_rate_median(double C, double util, Cross kind, double fast_bps, double upstream = 0) {
  std::vector<double> errs;
  for (int seed = 1; seed <= 9; ++seed) {
    LinkSim sim;
    sim.C = C;
    sim.X = util * C;
    sim.kind = kind;
    sim.line_bps = fast_bps;
    sim.upstream_bps = upstream;
    sim.rng.seed(seed);
    errs.push_back(std::fabs(run(sim, 20, 0.1).slope.capacity.capacity_bps / C - 1));
  }
  return median(errs);
}

#define REPORT(tag, t)                                                                     \
  INFO(tag << ": median |err| " << median(t.errs) << " 90th " << quantile(t.errs, 0.9)   \
           << " held " << t.held << "/9 corrected " << t.corrected << "/9")

TEST_CASE("two rates: constant-rate cross traffic at 80% is corrected to ~1% at any sender speed",
          "[capacity][crosstraffic][tworate]") {
  for (double fast : {300e6, 500e6, 900e6}) {
    const TwoRate t = two_rate_trials(100e6, 0.8, Cross::kCbr, fast, 0.1);
    const double before = one_rate_median(100e6, 0.8, Cross::kCbr, fast);
    REPORT("sender " << fast / 1e6 << " one rate " << before, t);
    CHECK(median(t.errs) <= 0.015);
    CHECK(quantile(t.errs, 0.9) <= 0.03);
    CHECK(t.held >= 8);
    CHECK(t.corrected >= 8);
    // One rate reads C / (1 + X/R): 21%, 14%, 8% low.
    CHECK(before > 0.06);
  }
}

TEST_CASE("two rates: Poisson and iperf-like bursty cross traffic at 80%: the bias shrinks",
          "[capacity][crosstraffic][tworate]") {
  for (Cross kind : {Cross::kPoisson, Cross::kIperf}) {
    for (double fast : {300e6, 500e6, 900e6}) {
      const TwoRate t = two_rate_trials(100e6, 0.8, kind, fast, 0.1);
      const double before = one_rate_median(100e6, 0.8, kind, fast);
      REPORT("kind " << int(kind) << " sender " << fast / 1e6 << " one rate " << before, t);
      CHECK(median(t.errs) <= (fast < 400e6 ? 0.08 : 0.05));
      // Where one rate was far off, the bias shrinks; where it was close (a
      // fast sender under bursty traffic: its lower quartile finds trains
      // that met no burst), sending half the trains slower costs a little.
      if (before > 0.05) {
        CHECK(median(t.errs) < 0.6 * before);
      } else {
        CHECK(median(t.errs) <= before + 0.015);
      }
      CHECK(t.held >= 7);
    }
  }
}

TEST_CASE("two rates: no cross traffic, the correction does not move the estimate",
          "[capacity][crosstraffic][tworate]") {
  for (double fast : {300e6, 900e6}) {
    const TwoRate t = two_rate_trials(100e6, 0, Cross::kNone, fast, 0.1);
    const double before = one_rate_median(100e6, 0, Cross::kNone, fast);
    REPORT("clean, sender " << fast / 1e6 << " one rate " << before, t);
    CHECK(median(t.errs) <= before + 0.005);
    CHECK(median(t.errs) <= 0.01);
    CHECK(quantile(t.errs, 0.9) <= 0.025);
    CHECK(t.held >= 7);
    CHECK(t.corrected <= 2);  // a 95% test: a rare false alarm, not a habit
  }
}

TEST_CASE("two rates: a train spread before the narrow link: no correction, no harm",
          "[capacity][crosstraffic][tworate]") {
  // Both rates arrive at 150 Mbit/s: the send span says nothing about the
  // arrival span, the fit finds no rate dependence and the slope stays as
  // it was (about -13%; issue 11's 4-hop class remains open).
  for (double fast : {300e6, 900e6}) {
    const TwoRate t = two_rate_trials(80e6, 0.3, Cross::kPoisson, fast, 0.1, 150e6);
    const double before = one_rate_median(80e6, 0.3, Cross::kPoisson, fast, 150e6);
    REPORT("upstream 150, sender " << fast / 1e6 << " one rate " << before, t);
    CHECK(median(t.errs) <= before + 0.01);
    CHECK(t.corrected <= 2);
  }
}

TEST_CASE("two rates: the fit needs two rates and enough trains of each",
          "[capacity][crosstraffic][tworate]") {
  std::vector<TrainDispersion> v;
  for (int k = 0; k < 20; ++k) v.push_back({12000.0 * (k % 2 ? 50 : 25), 1e-3 * (k % 2 ? 2 : 1),
                                            1e-3 * (k % 2 ? 7.8 : 3.9), k % 2});
  CHECK_FALSE(fit_rate_dependence(v).possible);  // one rate: bits and span collinear
  const TwoRateEstimate e = estimate_capacity_two_rates(v);
  CHECK(e.capacity.valid);
  CHECK_FALSE(e.rate_corrected);
  CHECK_FALSE(fit_rate_dependence({}).possible);
  v.resize(5);
  CHECK_FALSE(fit_rate_dependence(v).possible);
  // Exact model, two rates: D = 0.1 ms + bits / 100 Mbit/s + 0.8 S.
  v.clear();
  for (int k = 0; k < 24; ++k) {
    const double bits = 12000.0 * (k % 2 ? 50 : 25);
    const double rate = (k / 2) % 2 ? 150e6 : 300e6;
    const double S = bits / rate;
    v.push_back({bits, S, 1e-4 + bits / 100e6 + 0.8 * S + 1e-6 * (k % 3), k % 2});
  }
  const RateFit f = fit_rate_dependence(v);
  REQUIRE(f.possible);
  CHECK(f.capacity.capacity_bps == Approx(100e6).epsilon(0.01));
  CHECK(f.cross_ratio == Approx(0.8).epsilon(0.02));
  CHECK(f.applied);
  CHECK(estimate_capacity_two_rates(v).rate_corrected);
}

// ---- The clean cluster (has_clean_cluster) --------------------------------

TEST_CASE("clean cluster: a tight lowest group far below the quartile, not continuous noise",
          "[capacity][crosstraffic][cluster]") {
  // 19 long trains of the lab's 50 Mbit/s link at 40% constant-rate load
  // (open-port run of 2026-11-25): 4 met no cross packet, the rest one or two
  // (+240 us each).
  const std::vector<double> lab = {6.860, 6.611, 6.613, 6.841, 6.369, 6.580, 6.850,
                                   6.831, 6.333, 6.850, 6.847, 6.342, 6.339, 6.847,
                                   6.846, 6.866, 6.860, 6.868, 6.836};
  std::vector<double> s;
  for (double x : lab) s.push_back(x * 1e-3);
  CHECK(has_clean_cluster(s));
  // Too few to tell.
  CHECK_FALSE(has_clean_cluster({1e-3, 1e-3, 2e-3, 2e-3, 2e-3}));
  // One compressed train (a delayed head reply) below a noisy group is no cluster.
  std::vector<double> one = {5.0e-3};
  for (int i = 0; i < 19; ++i) one.push_back(6.33e-3 + 1e-6 * ((i * 37) % 50));
  CHECK_FALSE(has_clean_cluster(one));
  // Continuous timing noise (20-200 us per reply, uniform): rarely a cluster.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> nz(20e-6, 200e-6);
  int alarms = 0;
  for (int k = 0; k < 200; ++k) {
    std::vector<double> v;
    for (int i = 0; i < 20; ++i) v.push_back(3e-3 + nz(rng) - nz(rng));
    alarms += has_clean_cluster(v);
  }
  INFO("false alarms " << alarms << "/200");
  CHECK(alarms <= 6);
}

TEST_CASE("clean cluster: CBR cross traffic at 30-50% with quiet timestamps: the trains that "
          "met none decide",
          "[capacity][crosstraffic][cluster]") {
  // As capacity_run sends them: fast and slow trains of two lengths
  // (two_rate_run). The slow long trains always meet a cross packet, about
  // half the fast ones do: fewer than a quarter of the long trains are
  // clean, the lower quartile misses them (the lab's open-port failure).
  for (double util : {0.3, 0.4, 0.5}) {
    std::vector<double> errs, quartile_errs;
    int seen = 0;
    for (int seed = 1; seed <= 9; ++seed) {
      LinkSim sim;
      sim.C = 50e6;
      sim.X = util * sim.C;
      sim.kind = Cross::kCbr;
      sim.noise_lo = 0;
      sim.noise_hi = 15e-6;
      sim.rng.seed(seed);
      const TwoRateEstimate e = two_rate_run(sim, 1e9);
      REQUIRE(e.capacity.valid);
      errs.push_back(std::fabs(e.capacity.capacity_bps / sim.C - 1));
      seen += e.clean_cluster;
    }
    INFO("util " << util << ": median |err| " << median(errs) << " 90th "
                 << quantile(errs, 0.9) << ", cluster seen " << seen << "/9");
    CHECK(median(errs) <= 0.01);
    CHECK(quantile(errs, 0.9) <= 0.03);
  }
}

TEST_CASE("clean cluster: the lab's open-port run at 40% CBR load, replayed",
          "[capacity][crosstraffic][cluster]") {
  // The 39 kept trains of `linkwidth measure` against a 50 Mbit/s link
  // (49.54 Mbit/s IP-layer) carrying 20 Mbit/s of constant-rate UDP, only
  // port 443 open (2026-11-25, before has_clean_cluster): {bits after the
  // head, send dispersion, reply dispersion, length group}. The rate fit saw
  // no rate dependence beyond noise; the pooled quartile slope said 46.07
  // Mbit/s (-7%), because 4 of the 19 long trains met no cross packet.
  const std::vector<TrainDispersion> v = {
      {156320, 0.000149701, 0.003217503, 0},
      {312320, 0.000334205, 0.006859918, 1},
      {156320, 0.000348676, 0.003692435, 0},
      {312320, 0.000790019, 0.006611451, 1},
      {156320, 0.000159956, 0.003687507, 0},
      {312320, 0.000345662, 0.006612657, 1},
      {156320, 0.000314325, 0.003236400, 0},
      {312320, 0.000743681, 0.006841265, 1},
      {156320, 0.000160407, 0.003210942, 0},
      {312320, 0.000313955, 0.006369151, 1},
      {156320, 0.000361024, 0.003672636, 0},
      {312320, 0.000770010, 0.006579538, 1},
      {156320, 0.000151324, 0.003712860, 0},
      {312320, 0.000315667, 0.006850158, 1},
      {156320, 0.000321256, 0.003195109, 0},
      {312320, 0.000773835, 0.006831341, 1},
      {156320, 0.000156091, 0.003205379, 0},
      {312320, 0.000333573, 0.006332853, 1},
      {156320, 0.000360324, 0.003187948, 0},
      {312320, 0.000777741, 0.006850409, 1},
      {156320, 0.000154048, 0.003222374, 0},
      {312320, 0.000333183, 0.006847474, 1},
      {156320, 0.000359122, 0.003435895, 0},
      {312320, 0.000726125, 0.006341531, 1},
      {156320, 0.000169150, 0.003195494, 0},
      {312320, 0.000355786, 0.006339242, 1},
      {156320, 0.000467803, 0.003434082, 0},
      {312320, 0.000763951, 0.006846764, 1},
      {156320, 0.000158295, 0.003715530, 0},
      {312320, 0.000351511, 0.006845762, 1},
      {156320, 0.000288757, 0.003193356, 0},
      {312320, 0.000708489, 0.006866473, 1},
      {156320, 0.000193457, 0.003224502, 0},
      {312320, 0.000328085, 0.006860409, 1},
      {156320, 0.000411409, 0.003223987, 0},
      {312320, 0.000682000, 0.006868421, 1},
      {156320, 0.000230942, 0.003221993, 0},
      {312320, 0.000333484, 0.006836288, 1},
      {156320, 0.000315797, 0.003214903, 0}};
  const double truth = 49.54e6;
  const TwoRateEstimate e = estimate_capacity_two_rates(v);
  REQUIRE(e.capacity.valid);
  std::vector<double> d[2];
  for (const auto& t : v) d[t.group].push_back(t.reply_s);
  const SlopeEstimate quartile = estimate_capacity_slope(d[0], v[0].bits, d[1], v[1].bits);
  INFO("estimate " << e.capacity.capacity_bps << " [" << e.capacity.low_bps << ", "
                   << e.capacity.high_bps << "], quartile slope " << quartile.capacity.capacity_bps);
  CHECK(quartile.capacity.capacity_bps < 0.95 * truth);
  CHECK_FALSE(e.rate_corrected);
  CHECK(e.clean_cluster);
  CHECK(e.cross_traffic_seen());
  CHECK(std::fabs(e.capacity.capacity_bps / truth - 1) <= 0.015);
  CHECK(e.capacity.low_bps <= truth);
  CHECK(truth <= e.capacity.high_bps);
}

TEST_CASE("clean fast trains: the lab's open-port run where the extrapolation overshot, replayed",
          "[capacity][crosstraffic][cluster]") {
  // Same lab as above, another run: the fast trains met (almost) no cross
  // packet, the slow ones one or two; the rate fit saw the dispersions grow
  // with the send span and its extrapolation said 55.19 Mbit/s (+11%).
  const std::vector<TrainDispersion> v = {
      {156320, 0.000160217, 0.003457857, 0},
      {312320, 0.000324720, 0.006361100, 1},
      {156320, 0.000304491, 0.003216680, 0},
      {312320, 0.000774006, 0.006873143, 1},
      {156320, 0.000148410, 0.003186330, 0},
      {312320, 0.000334626, 0.006338036, 1},
      {156320, 0.000342527, 0.003695640, 0},
      {312320, 0.000754176, 0.006340395, 1},
      {156320, 0.000156652, 0.003185785, 0},
      {312320, 0.000370719, 0.006582312, 1},
      {156320, 0.000359382, 0.003194658, 0},
      {312320, 0.000752905, 0.006844160, 1},
      {156320, 0.000158215, 0.003234607, 0},
      {312320, 0.000356648, 0.006357976, 1},
      {156320, 0.000293224, 0.003689696, 0},
      {312320, 0.000755268, 0.006860459, 1},
      {156320, 0.000176181, 0.003203887, 0},
      {312320, 0.000369847, 0.006365431, 1},
      {156320, 0.000299393, 0.003696456, 0},
      {312320, 0.000698414, 0.006840810, 1},
      {156320, 0.000175059, 0.003214984, 0},
      {312320, 0.000342727, 0.006378801, 1},
      {156320, 0.000294456, 0.003714909, 0},
      {312320, 0.000663472, 0.006367885, 1},
      {156320, 0.000183161, 0.003205014, 0},
      {312320, 0.000336037, 0.006369236, 1},
      {156320, 0.000283410, 0.003692655, 0},
      {312320, 0.000550114, 0.006318858, 1},
      {156320, 0.000165505, 0.003221854, 0},
      {312320, 0.000394864, 0.006313213, 1},
      {156320, 0.000311381, 0.003680983, 0},
      {312320, 0.000691033, 0.006619978, 1},
      {156320, 0.000169100, 0.003183481, 0},
      {312320, 0.000336508, 0.006333274, 1},
      {156320, 0.000247837, 0.003467873, 0},
      {312320, 0.000682881, 0.006616994, 1},
      {156320, 0.000160417, 0.003186816, 0},
      {312320, 0.000363648, 0.006339092, 1},
      {156320, 0.000314986, 0.003460031, 0}};
  const double truth = 49.54e6;
  const TwoRateEstimate e = estimate_capacity_two_rates(v);
  REQUIRE(e.capacity.valid);
  INFO("estimate " << e.capacity.capacity_bps << " [" << e.capacity.low_bps << ", "
                   << e.capacity.high_bps << "], extrapolation " << e.rate.capacity.capacity_bps);
  CHECK(e.rate.possible);
  CHECK(e.rate.cross_ratio_low > 0);
  CHECK(e.rate.capacity.capacity_bps > 1.05 * truth);
  CHECK_FALSE(e.rate_corrected);
  CHECK(e.cross_traffic_seen());
  CHECK(std::fabs(e.capacity.capacity_bps / truth - 1) <= 0.015);
  CHECK(e.capacity.low_bps <= truth);
  CHECK(truth <= e.capacity.high_bps);
}

TEST_CASE("two rates: an extrapolation that needs more cross traffic than the link carries "
          "is refused (the RTT benchmark's 20 Mbit/s CBR run, replayed)",
          "[capacity][crosstraffic][cluster]") {
  // 50 Mbit/s under 20 Mbit/s of CBR, RTT 0 (results/rtt_benchmark_runs,
  // measure run 3 at 10:18 on 2026-11-27): the fast trains met no cross
  // packet, every slow one exactly one (the CBR's phase against our train
  // schedule), so neither length's slow trains spread and the clean-fast
  // test could not tell. The fit's X/C came out at 1.41: more cross traffic
  // than the link can carry, a step that the fluid line does not describe,
  // and its extrapolation said 55.96 Mbit/s (+13%).
  const std::vector<TrainDispersion> v = {
      {156320, 0.000148736, 0.003157043, 0}, {312320, 0.000306302, 0.006308240, 1},
      {156320, 0.000362202, 0.003659755, 0}, {312320, 0.000742484, 0.006800086, 1},
      {156320, 0.000154668, 0.003156126, 0}, {312320, 0.000320659, 0.006313938, 1},
      {156320, 0.000361603, 0.003620962, 0}, {312320, 0.000723008, 0.006802971, 1},
      {156320, 0.000150114, 0.003156542, 0}, {312320, 0.000305627, 0.006308037, 1},
      {156320, 0.000371961, 0.003643184, 0}, {312320, 0.000726401, 0.006801024, 1},
      {156320, 0.000153349, 0.003169347, 0}, {312320, 0.000318016, 0.006309794, 1},
      {156320, 0.000370574, 0.003645122, 0}, {312320, 0.000706434, 0.006799528, 1}};
  const double truth = 49.54e6;
  const TwoRateEstimate e = estimate_capacity_two_rates(v);
  REQUIRE(e.capacity.valid);
  INFO("estimate " << e.capacity.capacity_bps << " [" << e.capacity.low_bps << ", "
                   << e.capacity.high_bps << "], extrapolation " << e.rate.capacity.capacity_bps
                   << " X/C " << e.rate.cross_ratio);
  CHECK(e.rate.possible);
  CHECK(e.rate.cross_ratio > 1);
  CHECK_FALSE(e.rate_corrected);
  CHECK(e.cross_traffic_seen());
  CHECK(std::fabs(e.capacity.capacity_bps / truth - 1) <= 0.015);
  CHECK(e.capacity.low_bps <= truth);
  CHECK(truth <= e.capacity.high_bps);
}
