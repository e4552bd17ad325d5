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
