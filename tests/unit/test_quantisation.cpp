// Timestamp quantisation (interrupt coalescence) on synthetic reply times:
// clean runs, with noise, cross traffic and the dispersions real runs have,
// must not fire; the same runs with reply times put on a coalescing timer's
// lattice must, and find its period.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "estimate/quantisation.hpp"

using namespace lw;

namespace {

struct RunShape {
  double rate_bps = 10e6;
  int n_short = 8;  // load packets of a short train (long: 2x)
  int trains = 20;
  double jitter_s = 5e-6;  // timing noise per reply (normal sd)
  double cross_s = 0;      // mean extra (exponential) delay of the tail: cross traffic
  double offset_s = 30e-6;
};

// Per train: warm-up reply, head reply, tail reply, as a capacity train
// (warm-up 50 us ahead of two drain packets and the head) gets them back.
std::vector<std::vector<Nanos>> clean_run(const RunShape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, s.jitter_s);
  std::exponential_distribution<double> cross(s.cross_s > 0 ? 1 / s.cross_s : 1);
  std::uniform_real_distribution<double> idle(0, 0.01);
  std::vector<std::vector<Nanos>> out;
  double t = 1.7e9 + 0.123456789;
  for (int i = 0; i < s.trains; ++i) {
    const int n = i % 2 ? 2 * s.n_short : s.n_short;
    const double warm = t + noise(rng);
    const double head = t + 50e-6 + 2 * 1500 * 8 / s.rate_bps + 40 * 8 / s.rate_bps + noise(rng);
    double tail = head + s.offset_s + (n * 1500 + 40) * 8 / s.rate_bps + noise(rng);
    if (s.cross_s > 0) tail += cross(rng);
    out.push_back({static_cast<Nanos>(warm * 1e9), static_cast<Nanos>(head * 1e9),
                   static_cast<Nanos>(tail * 1e9)});
    t += 0.1 + idle(rng);  // the next train starts at no particular phase
  }
  return out;
}

// A coalescing timer of period P with its own phase: each reply is stamped at
// the next tick, plus the batch's per-packet processing time.
std::vector<std::vector<Nanos>> quantise(std::vector<std::vector<Nanos>> run, Nanos period,
                                         Nanos phase, double per_packet_s = 0.5e-6) {
  for (auto& train : run) {
    for (std::size_t i = 0; i < train.size(); ++i) {
      const Nanos t = train[i] - phase;
      const Nanos tick = (t / period + 1) * period + phase;
      train[i] = tick + static_cast<Nanos>(per_packet_s * 1e9 * static_cast<double>(i % 2));
    }
  }
  return run;
}

}  // namespace

TEST_CASE("clean reply timestamps are not called quantised", "[quantisation]") {
  std::vector<RunShape> shapes;
  RunShape base;
  shapes.push_back(base);  // 10 Mbit/s, 5 us noise
  RunShape tight = base;
  tight.jitter_s = 0.3e-6;  // a very quiet path
  tight.offset_s = 0;       // long dispersion exactly 2x the short one
  shapes.push_back(tight);
  RunShape cross = base;
  cross.cross_s = 300e-6;  // cross traffic lengthens tails
  shapes.push_back(cross);
  RunShape fast = base;
  fast.rate_bps = 1e9;  // 1 Gbit/s, N = 250
  fast.n_short = 250;
  fast.jitter_s = 2e-6;
  shapes.push_back(fast);
  RunShape fast_quiet = fast;
  fast_quiet.jitter_s = 0.2e-6;
  fast_quiet.offset_s = 0;
  shapes.push_back(fast_quiet);
  RunShape mid = base;
  mid.rate_bps = 50e6;
  mid.n_short = 13;
  mid.trains = 40;
  shapes.push_back(mid);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      const QuantisationFinding q = detect_quantisation(clean_run(shapes[k], seed));
      INFO("shape " << k << " seed " << seed << " period " << q.period_s << " fit "
                    << q.fit_fraction);
      CHECK_FALSE(q.quantised);
    }
  }
}

TEST_CASE("uniformly random gaps and too few gaps are not quantised", "[quantisation]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(10e-6, 5e-3);
  std::vector<std::vector<Nanos>> run;
  for (int i = 0; i < 50; ++i) {
    Nanos t = 1000 * kSec;
    std::vector<Nanos> train{t};
    for (int j = 0; j < 3; ++j) train.push_back(t += from_seconds(u(rng)));
    run.push_back(train);
  }
  CHECK_FALSE(detect_quantisation(run).quantised);
  // Two trains of exact multiples: too little to decide.
  CHECK_FALSE(detect_quantisation({{0, 125000, 250000}, {0, 125000}}).quantised);
  CHECK_FALSE(detect_quantisation({}).quantised);
}

TEST_CASE("reply times on a coalescing timer's lattice are found, with the period",
          "[quantisation]") {
  struct Case {
    RunShape shape;
    Nanos period;
  };
  RunShape base;
  RunShape fast = base;
  fast.rate_bps = 1e9;
  fast.n_short = 250;
  fast.jitter_s = 2e-6;
  RunShape cross = base;
  cross.cross_s = 300e-6;
  const std::vector<Case> cases = {{base, 125 * kUs}, {base, 1 * kMs},    {fast, 125 * kUs},
                                   {fast, 250 * kUs}, {cross, 125 * kUs}, {cross, 1 * kMs},
                                   {base, 50 * kUs}};
  for (std::size_t k = 0; k < cases.size(); ++k) {
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const auto run = quantise(clean_run(cases[k].shape, seed), cases[k].period, 37 * kUs * seed);
      const QuantisationFinding q = detect_quantisation(run);
      INFO("case " << k << " seed " << seed << " found " << q.period_s << " fit " << q.fit_fraction
                   << " zero " << q.zero_gaps << "/" << q.gaps);
      REQUIRE(q.quantised);
      CHECK(q.period_s == Approx(to_seconds(cases[k].period)).epsilon(0.02));
    }
  }
}

TEST_CASE("batch gaps at zero make a coarse period credible", "[quantisation]") {
  // 1 ms coalescing on a fast path: warm-up and head replies share a batch
  // (gap about 0) and the head-tail gap is 1 or 2 periods.
  RunShape fast;
  fast.rate_bps = 1e9;
  fast.n_short = 80;  // about 1 ms short trains
  fast.jitter_s = 2e-6;
  const auto run = quantise(clean_run(fast, 3), 1 * kMs, 123 * kUs);
  const QuantisationFinding q = detect_quantisation(run);
  INFO("found " << q.period_s << " zero " << q.zero_gaps << "/" << q.gaps);
  REQUIRE(q.quantised);
  CHECK(q.zero_gaps > 0);
  CHECK(q.period_s == Approx(1e-3).epsilon(0.02));
}

TEST_CASE("a slow link's own packet clock is no coalescence", "[quantisation]") {
  // The random-path benchmark's path 7 at d5c039b: a 10 Mbit/s htb on our
  // own interface with this host's on/off traffic in it. Whole packets,
  // ours and the host's between them, put every head-tail reply gap on
  // multiples of one packet's time (1211.4 us at 9.906 Mbit/s), none at zero.
  const double C = 9.906e6;
  const double P = 1500 * 8 / C;  // s
  std::mt19937 rng(7);
  std::normal_distribution<double> jitter(0, 2e-6);
  std::uniform_int_distribution<int> cross(0, 3);  // host packets inside a train
  std::vector<std::vector<Nanos>> run;
  double t = 1.7e9;
  for (int i = 0; i < 12; ++i) {
    const int n = i % 2 ? 16 : 8;
    const double head = t + jitter(rng);
    const double tail = head + (n + cross(rng)) * P + jitter(rng);
    run.push_back({static_cast<Nanos>(head * 1e9), static_cast<Nanos>(tail * 1e9)});
    t += 0.3;
  }
  // Without the link's packet time the lattice reads as coalescence (as it did).
  const QuantisationFinding blind = detect_quantisation(run);
  INFO("blind: " << blind.period_s << " fit " << blind.fit_fraction);
  REQUIRE(blind.quantised);
  CHECK(blind.period_s == Approx(P).epsilon(0.02));
  QuantisationParams p;
  p.packet_time_ns = P * 1e9;
  CHECK_FALSE(detect_quantisation(run, p).quantised);
  SECTION("trains of 2 and 4 packets: gaps on multiples of two packet times") {
    // A 5.15 Mbit/s link behind a queue of a few packets, the trains halved
    // twice (the runner's unit test): 16 and 8 load packets, then 8 and 4,
    // then 4 and 2. The lattice found is 2P, not P; the gaps sit on
    // multiples of P all the same.
    const double C2 = 5.15e6;
    const double P2 = 1500 * 8 / C2;
    std::vector<std::vector<Nanos>> even;
    double t2 = 1.7e9;
    for (int i = 0; i < 24; ++i) {
      const double head = t2 + jitter(rng) + 50e-6;
      const double tail = head + (i % 2 ? 16 : 8) / (1 << (i / 8)) * P2 + jitter(rng);
      even.push_back({static_cast<Nanos>(head * 1e9), static_cast<Nanos>(tail * 1e9)});
      t2 += 0.3;
    }
    const QuantisationFinding coarse = detect_quantisation(even);
    INFO("blind: " << coarse.period_s);
    REQUIRE(coarse.quantised);
    CHECK(coarse.period_s == Approx(2 * P2).epsilon(0.02));
    QuantisationParams p2;
    p2.packet_time_ns = P2 * 1e9;
    CHECK_FALSE(detect_quantisation(even, p2).quantised);
    p2.packet_time_ns = 1.1 * P2 * 1e9;
    CHECK(detect_quantisation(even, p2).quantised);
  }
  SECTION("a capacity read 10% off: no match, still quantised") {
    p.packet_time_ns = 1.1 * P * 1e9;
    CHECK(detect_quantisation(run, p).quantised);
  }
  SECTION("batch gaps at zero: coalescence whatever the period") {
    auto batched = run;
    for (auto& r : batched) r.insert(r.begin(), r.front() - 500);  // a reply in the head's batch
    const QuantisationFinding q = detect_quantisation(batched, p);
    CHECK(q.zero_gaps > 0);
    CHECK(q.quantised);
  }
  SECTION("coalescing timers on 10 Mbit/s trains still fire with the packet time given") {
    RunShape base;  // 10 Mbit/s: a packet time of 1.2 ms
    QuantisationParams q10;
    q10.packet_time_ns = 1500 * 8 / base.rate_bps * 1e9;
    for (const Nanos period : {125 * kUs, 1 * kMs, 50 * kUs}) {
      const auto q = detect_quantisation(quantise(clean_run(base, 2), period, 37 * kUs), q10);
      INFO("period " << period);
      CHECK(q.quantised);
    }
  }
}
