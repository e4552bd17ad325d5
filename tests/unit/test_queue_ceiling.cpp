// The tight link's full queue (estimate/queue_ceiling.hpp): trains whose
// markers' delay rises into a drop-tail queue's limit and stays there.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "estimate/queue_ceiling.hpp"

using namespace lw;

namespace {

// A train of `markers` markers `spacing` apart, sent at time `t0`, through a
// FIFO whose queueing delay starts at `q0` and grows by `(ratio - 1)` per
// second sent until the queue's limit `limit` (fluid drop-tail: a marker that
// arrives at a full queue waits the whole limit). `base` is the path's
// constant one-way delay; `noise` the sd of each reply's timing noise.
std::vector<MarkerDelay> fluid_train(double t0, int markers, double spacing, double ratio,
                                     double q0, double limit, double base = 0.0004,
                                     double noise = 0, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, noise);
  std::vector<MarkerDelay> m;
  for (int k = 0; k < markers; ++k) {
    const double sent = t0 + k * spacing;
    const double q = std::min(limit, q0 + (ratio - 1) * k * spacing);
    m.push_back({sent, sent + base + q + (noise > 0 ? n(rng) : 0)});
  }
  return m;
}

// The ratio over the whole train (first to last marker).
double whole_ratio(const std::vector<MarkerDelay>& m) {
  return (m.back().reply_s - m.front().reply_s) / (m.back().sent_s - m.front().sent_s);
}

// `n` light trains (the calibration's, at a tenth of C) through an idle
// queue: their markers stay at the base.
void light_trains(QueueCeiling& qc, int n = 6) {
  for (int i = 0; i < n; ++i) qc.observe(fluid_train(100 + i, 5, 0.0034, 1.0, 0, 1.0), true);
}

}  // namespace

TEST_CASE("end_plateau: a rise that stops on a level, not a rise or a flat train") {
  // 5 markers 3.4 ms apart, delay rising 4 ms per interval into a 11.7 ms limit.
  const auto capped = fluid_train(0, 5, 0.0034, 1 + 4.0 / 3.4, 0, 0.0117);
  CHECK(end_plateau(capped, 0.0004) == Approx(0.0117).margin(1e-9));
  // Still rising at the tail: no plateau.
  const auto rising = fluid_train(0, 5, 0.0034, 1.3, 0, 1.0);
  CHECK(end_plateau(rising, 0.0004) == 0);
  // Flat from the head (an idle path, or a queue already full): no rise.
  const auto flat = fluid_train(0, 5, 0.0034, 1.0, 0.0117, 0.0117);
  CHECK(end_plateau(flat, 0.0004) == 0);
  // Too few markers to tell.
  CHECK(end_plateau(fluid_train(0, 2, 0.0034, 2.0, 0, 0.004), 0.0004) == 0);
}

TEST_CASE("QueueCeiling: the level three trains end on, the highest of the run") {
  QueueCeiling qc;
  // Trains below the knee: delays flat at the base.
  for (int i = 0; i < 6; ++i) qc.observe(fluid_train(i, 5, 0.0034, 1.0, 0, 0.0117), true);
  CHECK(qc.ceiling_s() == 0);
  qc.observe(fluid_train(10, 5, 0.0034, 2.5, 0, 0.0117, 0.0004, 100e-6, 1), false);
  qc.observe(fluid_train(11, 5, 0.0034, 2.3, 0.001, 0.0117, 0.0004, 100e-6, 2), false);
  CHECK(qc.ceiling_s() == 0);  // two trains: not yet
  qc.observe(fluid_train(12, 5, 0.0034, 2.8, 0, 0.0117, 0.0004, 100e-6, 3), false);
  CHECK(qc.ceiling_s() == Approx(0.0117).margin(0.0005));
  CHECK(qc.base_s() == Approx(0.0004).margin(0.0003));
}

TEST_CASE("QueueCeiling: plateaus below the run's highest delay are not the queue's limit") {
  // A burst that ends mid-train leaves the delay flat at any level (a train at
  // C while the cross traffic pauses): three such plateaus at 3, 6 and 9 ms,
  // then one train that rose to 20 ms. None is a ceiling.
  QueueCeiling qc;
  qc.observe(fluid_train(0, 5, 0.0034, 1.0, 0, 0.0117), true);
  qc.observe(fluid_train(1, 5, 0.0034, 1.6, 0, 0.003), false);
  qc.observe(fluid_train(2, 5, 0.0034, 1.6, 0, 0.006), false);
  qc.observe(fluid_train(3, 5, 0.0034, 1.9, 0, 0.009), false);
  CHECK(qc.ceiling_s() == 0);
  // Three on one level, but markers of many trains rose far above it: a big
  // queue, and those plateaus were where bursts ended.
  QueueCeiling big;
  light_trains(big);
  for (int i = 0; i < 3; ++i) big.observe(fluid_train(i, 5, 0.0034, 1.8, 0, 0.008), false);
  CHECK(big.ceiling_s() == Approx(0.008).margin(1e-6));
  for (int i = 0; i < 4; ++i) big.observe(fluid_train(10 + i, 5, 0.0034, 3.0, 0, 1.0), false);
  CHECK(big.ceiling_s() == 0);
}

TEST_CASE("QueueCeiling: bounded bursts leave a highest delay, not a full queue") {
  // Trains peak anywhere up to the bursts' largest (2.7-5.4 ms, evenly, still
  // rising at their tails: a quarter of them within the tolerance of the
  // top), and three more happen to end flat on it: no ceiling. The same
  // three with two thirds of the others stopped there: a ceiling.
  QueueCeiling bursts;
  QueueCeiling full;
  light_trains(bursts);
  light_trains(full);
  for (int i = 0; i < 3; ++i) {
    bursts.observe(fluid_train(i, 5, 0.0034, 1.8, 0, 0.0054), false);
    full.observe(fluid_train(i, 5, 0.0034, 1.8, 0, 0.0054), false);
  }
  for (int i = 0; i < 30; ++i) {
    const double ratio = 1 + (0.0027 + 0.0027 * i / 29) / 0.0136;
    bursts.observe(fluid_train(10 + i, 5, 0.0034, ratio, 0, 1.0), false);
    full.observe(fluid_train(10 + i, 5, 0.0034, i % 3 == 0 ? ratio : 1.9, 0, 0.0054), false);
  }
  CHECK(bursts.ceiling_s() == 0);
  CHECK(full.ceiling_s() == Approx(0.0054).margin(1e-6));
}

namespace {
// A train whose markers' delays (s, over `base`) are given, markers 3.4 ms apart.
std::vector<MarkerDelay> train_of(double t0, const std::vector<double>& q, double base = 0.0004) {
  std::vector<MarkerDelay> m;
  for (std::size_t k = 0; k < q.size(); ++k) {
    const double sent = t0 + 0.0034 * static_cast<double>(k);
    m.push_back({sent, sent + base + q[k]});
  }
  return m;
}
}  // namespace

TEST_CASE("QueueCeiling: bursts of bounded size pile no markers on their top") {
  // An application's bursts (iperf3's 128 KB writes of a rate-limited TCP
  // flow, the random-path benchmark's path 14): the delay rises by a burst of
  // 9.5-21 ms over two marker intervals and drains after it; three trains end
  // flat at 18.5 ms and 41% of the trains peak within the tolerance of it,
  // but only 10% of the markers that rose to half of it lie within 3% of it.
  // No ceiling. Two thirds of the same bursts stopped there by a full queue:
  // the markers pile on it (52%), a ceiling.
  QueueCeiling bursts;
  QueueCeiling full;
  light_trains(bursts);
  light_trains(full);
  for (int i = 0; i < 3; ++i) {
    bursts.observe(train_of(i, {0.001, 0.005, 0.010, 0.0184, 0.0186}), false);
    full.observe(train_of(i, {0.001, 0.005, 0.010, 0.0184, 0.0186}), false);
  }
  for (int i = 0; i < 60; ++i) {
    const double j = 0.0095 + 0.0115 * i / 59;
    const std::vector<double> burst{0, 0.001, j / 2 + 0.0005, j, j - 0.003};
    bursts.observe(train_of(10 + i, burst), false);
    full.observe(train_of(10 + i, i % 3 == 0 ? burst
                                              : std::vector<double>{0, 0.006, 0.012, 0.0185,
                                                                    0.0185}), false);
  }
  CHECK(bursts.ceiling_s() == 0);
  CHECK(full.ceiling_s() == Approx(0.0185).margin(1e-6));
}

TEST_CASE("QueueCeiling: a level the cross traffic alone reaches is not our overload's limit") {
  // The same full-queue trains as a ceiling needs (three ending flat on 11.7
  // ms, more stopped there), after light trains: the calibration's, at a
  // tenth of C, whose markers show what the cross traffic alone does.
  const auto heavy = [](QueueCeiling& qc) {
    for (int i = 0; i < 6; ++i) {
      qc.observe(fluid_train(10 + i, 5, 0.0034, 2.5, 0, 0.0117, 0.0004, 50e-6, i), false);
    }
  };
  // Light trains that stayed low (at most 3 of 8 rose to half the level, on
  // a burst): the level is where our overload met the queue's limit.
  QueueCeiling quiet;
  for (int i = 0; i < 8; ++i) {
    quiet.observe(fluid_train(i, 5, 0.0034, 1.0, i < 3 ? 0.007 : 0, 1.0), true);
  }
  heavy(quiet);
  CHECK(quiet.ceiling_s() == Approx(0.0117).margin(0.0005));
  // Bursts that alone took 4 of 8 light trains past half of it (path 14's
  // rate-limited TCP: 41-68%): the bursts' top, no ceiling.
  QueueCeiling bursty;
  for (int i = 0; i < 8; ++i) {
    bursty.observe(fluid_train(i, 5, 0.0034, 1.0, i < 4 ? 0.007 : 0, 1.0), true);
  }
  heavy(bursty);
  CHECK(bursty.ceiling_s() == 0);
  // Fewer than six light trains: nothing to tell it by, no ceiling.
  QueueCeiling unseen;
  light_trains(unseen, 5);
  heavy(unseen);
  CHECK(unseen.ceiling_s() == 0);
  light_trains(unseen, 1);
  CHECK(unseen.ceiling_s() == Approx(0.0117).margin(0.0005));
}

TEST_CASE("QueueCeiling: a rise of most of the level between two markers is a burst's") {
  // Full-queue trains (rising 5.1 ms per 3.4 ms interval into 11.7 ms) and
  // trains whose delay jumped by 9 ms (77% of the level) between two markers:
  // arrivals at 3.6 C, a burst at an upstream line rate, whose top the level
  // may be. One such train: still a ceiling; two: none.
  const auto jump = [](double t0) {
    return fluid_train(t0, 5, 0.0034, 1.0, 0, 1.0);
  };
  QueueCeiling qc;
  light_trains(qc);
  for (int i = 0; i < 6; ++i) qc.observe(fluid_train(10 + i, 5, 0.0034, 2.5, 0, 0.0117), false);
  auto burst = jump(20);
  for (std::size_t k = 2; k < burst.size(); ++k) burst[k].reply_s += 0.009;
  qc.observe(burst, false);
  CHECK(qc.ceiling_s() == Approx(0.0117).margin(1e-6));
  burst = jump(21);
  for (std::size_t k = 3; k < burst.size(); ++k) burst[k].reply_s += 0.009;
  qc.observe(burst, false);
  CHECK(qc.ceiling_s() == 0);
}

TEST_CASE("QueueCeiling: no ceiling within a few timing noises of the base") {
  QueueCeiling qc;
  for (int i = 0; i < 6; ++i) qc.observe(fluid_train(i, 5, 0.0034, 1.3, 0, 0.0018), false);
  CHECK(qc.ceiling_s() == 0);
  QueueCeiling deeper;
  light_trains(deeper);
  for (int i = 0; i < 6; ++i) deeper.observe(fluid_train(i, 5, 0.0034, 1.5, 0, 0.003), false);
  CHECK(deeper.ceiling_s() == Approx(0.003).margin(1e-6));
}

TEST_CASE("QueueCeiling: one late reply does not hide the ceiling") {
  QueueCeiling qc;
  for (int i = 0; i < 40; ++i) qc.observe(fluid_train(i, 5, 0.0034, 1.0, 0, 0.0117), true);
  for (int i = 0; i < 5; ++i) qc.observe(fluid_train(50 + i, 5, 0.0034, 2.5, 0, 0.0117), false);
  // A host descheduled for 3 ms: one reply read late.
  auto late = fluid_train(60, 5, 0.0034, 1.0, 0, 0.0117);
  late[2].reply_s += 0.030;
  qc.observe(late, true);
  CHECK(qc.ceiling_s() == Approx(0.0117).margin(1e-6));
}

TEST_CASE("ratio_below_ceiling: the rise up to the full queue, closer to the fluid ratio") {
  const double limit = 0.0117;
  const double base = 0.0004;
  SECTION("the queue fills within the train") {
    // Fluid ratio 2.5 (R + X = 2.5 C): the delay rises 5.1 ms per 3.4 ms
    // interval and the queue is full 7.8 ms in; the whole train reads
    // 1 + 11.7 / 13.6 = 1.86, up to the first marker on the limit 2.15.
    const auto m = fluid_train(0, 5, 0.0034, 2.5, 0, limit, base);
    const double whole = whole_ratio(m);
    const double r = ratio_below_ceiling(m, base, limit);
    CHECK(whole == Approx(1 + 11.7 / 13.6).epsilon(1e-6));
    CHECK(r == Approx(1 + 11.7 / 10.2).epsilon(1e-6));
    CHECK(r <= 2.5);  // the marker on the limit waited less than the fluid
  }
  SECTION("with reply timing noise of 100 us") {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      const auto m = fluid_train(0, 5, 0.0034, 2.5, 0, limit, base, 100e-6, seed);
      const double r = ratio_below_ceiling(m, base, limit);
      REQUIRE(r > 0);
      CHECK(std::fabs(r - 2.5) < std::fabs(whole_ratio(m) - 2.5) - 0.2);
    }
  }
  SECTION("a train that never reaches it, or starts on it, keeps its own ratio") {
    CHECK(ratio_below_ceiling(fluid_train(0, 5, 0.0034, 1.3, 0, limit, base), base, limit) == 0);
    CHECK(ratio_below_ceiling(fluid_train(0, 5, 0.0034, 1.5, limit, limit, base), base, limit) ==
          0);
    CHECK(ratio_below_ceiling(fluid_train(0, 5, 0.0034, 1.5, 0, limit, base), base, 0) == 0);
  }
  SECTION("too little of the train lies before it") {
    // 9 markers: the queue is full at the second marker after the first,
    // under kCeilingMinSpan of the span... of 8 intervals, 1 is 12.5%.
    const auto m = fluid_train(0, 9, 0.0017, 1 + 0.0117 / 0.0017, 0, limit, base);
    CHECK(ratio_below_ceiling(m, base, limit) == 0);
  }
}
