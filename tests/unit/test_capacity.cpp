// The capacity estimators on synthetic timestamp vectors with known answers.
#include <cmath>
#include <catch2/catch.hpp>
#include <random>

#include "app/runs/capacity_run.hpp"
#include "estimate/capacity.hpp"
#include "estimate/stats.hpp"

using namespace lw;

namespace {

// A train of n load packets of L bytes between 40-byte SYN markers, sent at
// `send_bps`, through a FIFO bottleneck of `cap_bps`; replies come back after
// `delay` plus `jitter` (per reply, ns) plus `tail_offset` on the last reply.
TrainTiming synth(int n, double cap_bps, double send_bps, Nanos jitter_ns, std::mt19937& rng,
                  Nanos tail_offset = 0, int L = 1500) {
  TrainTiming t;
  std::normal_distribution<double> noise(0.0, static_cast<double>(jitter_ns));
  const Nanos t0 = 1'000'000'000;
  double link_free = 0;  // seconds, relative to t0
  double send_t = 0;
  const int total = n + 2;
  for (int i = 0; i < total; ++i) {
    const bool marker = i == 0 || i == total - 1;
    const double bits = 8.0 * (marker ? 40 : L);
    t.bits.push_back(bits);
    t.marker.push_back(marker);
    t.sent.push_back(t0 + static_cast<Nanos>(send_t * 1e9));
    const double start = std::max(link_free, send_t);
    link_free = start + bits / cap_bps;
    Nanos r = 0;
    if (marker) {
      r = t0 + 500 * kUs + static_cast<Nanos>(link_free * 1e9 + noise(rng));
      if (i == total - 1) r += tail_offset;
    }
    t.reply.push_back(r);
    send_t += bits / send_bps;
  }
  t.lead_bits = 2 * 8.0 * L;
  return t;
}

double bits_after_head(const TrainTiming& t) {
  double b = 0;
  for (std::size_t i = 1; i < t.bits.size(); ++i) b += t.bits[i];
  return b;
}

}  // namespace

TEST_CASE("a clean train gives the bottleneck rate", "[capacity]") {
  std::mt19937 rng(1);
  for (double cap : {10e6, 100e6, 1e9}) {
    const TrainTiming t = synth(100, cap, 5 * cap, 0, rng);
    const CapacitySample s = evaluate_capacity_train(t, CapacityFilter{});
    INFO("capacity " << cap);
    CHECK(s.kept());
    CHECK(s.capacity_bps == Approx(cap).epsilon(1e-6));
    CHECK(s.offered_bps > 4 * cap);
  }
}

TEST_CASE("trains that reveal nothing about the path are rejected", "[capacity]") {
  std::mt19937 rng(2);
  const CapacityFilter f;
  SECTION("sent no faster than the path") {
    const TrainTiming t = synth(50, 100e6, 100e6, 0, rng);
    CHECK(evaluate_capacity_train(t, f).verdict == SampleVerdict::kNotCompressed);
  }
  SECTION("a lost marker reply") {
    TrainTiming t = synth(50, 100e6, 1e9, 0, rng);
    t.reply.back() = 0;
    CHECK(evaluate_capacity_train(t, f).verdict == SampleVerdict::kLostReply);
  }
  SECTION("reordered replies") {
    TrainTiming t = synth(50, 100e6, 1e9, 0, rng);
    std::swap(t.reply.front(), t.reply.back());
    CHECK(evaluate_capacity_train(t, f).verdict == SampleVerdict::kReordered);
  }
  SECTION("an unsent packet") {
    TrainTiming t = synth(50, 100e6, 1e9, 0, rng);
    t.sent[10] = 0;
    CHECK(evaluate_capacity_train(t, f).verdict == SampleVerdict::kUnsent);
  }
  SECTION("a stall in our own sending lets the bottleneck idle") {
    // 2 ms pause after 10 load packets on a 1 Gbit/s path: the link empties.
    TrainTiming t = synth(50, 1e9, 5e9, 0, rng);
    for (std::size_t i = 11; i < t.sent.size(); ++i) t.sent[i] += 2 * kMs;
    t.reply.back() += 2 * kMs - 100 * kUs;  // the tail left that much later
    const CapacitySample s = evaluate_capacity_train(t, f);
    CHECK(s.verdict == SampleVerdict::kSendStall);
    CHECK(s.max_send_lag_s > 1e-3);
  }
  SECTION("a short pause that the queue absorbs is fine") {
    TrainTiming t = synth(50, 10e6, 1e9, 0, rng);
    for (std::size_t i = 11; i < t.sent.size(); ++i) t.sent[i] += 100 * kUs;
    CHECK(evaluate_capacity_train(t, f).kept());
  }
}

TEST_CASE("how many trains came back closer together than they left", "[capacity]") {
  auto sample = [](double send_s, double reply_s, double left_s = 0) {
    CapacitySample s;
    s.send_dispersion_s = send_s;
    s.reply_dispersion_s = reply_s;
    s.left_dispersion_s = left_s;
    return s;
  };
  // The busy 5 Mbit/s way back (lab, 2026-11-28): 8- and 16-packet trains
  // (0.1 and 0.19 ms at 1 Gbit/s) all back 81 us apart, and one train that
  // waited behind an upload packet came back spread.
  std::vector<CapacitySample> busy = {sample(97e-6, 81e-6), sample(194e-6, 81e-6),
                                      sample(97e-6, 81e-6), sample(194e-6, 12.2e-3),
                                      sample(194e-6, 80e-6), sample(194e-6, 66e-6)};
  CloserCount n = count_closer_than_sent(busy, 0.5, kCloserMinSpan);
  CHECK(n.timed == 4);   // the 97 us trains are under the span floor
  CHECK(n.closer == 3);
  CHECK(closer_than_sent_in_many(n));
  // An ordinary path: replies spread, one short train halved by noise.
  std::vector<CapacitySample> plain;
  for (int i = 0; i < 20; ++i) plain.push_back(sample(1e-3, 6e-3 + 1e-5 * i));
  plain.push_back(sample(150e-6, 60e-6));
  n = count_closer_than_sent(plain, 0.5, kCloserMinSpan);
  CHECK(n.timed == 21);
  CHECK(n.closer == 1);
  CHECK_FALSE(closer_than_sent_in_many(n));
  // Two among twenty are not a quarter of them.
  plain.push_back(sample(150e-6, 60e-6));
  n = count_closer_than_sent(plain, 0.5, kCloserMinSpan);
  CHECK(n.closer == 2);
  CHECK_FALSE(closer_than_sent_in_many(n));
  // Our own queue held the head back (left over a shorter span): that span
  // counts, and replies 0.09 ms apart for 0.1 ms are not closer.
  n = count_closer_than_sent({sample(1.2e-3, 90e-6, 100e-6), sample(1.2e-3, 90e-6, 100e-6)}, 0.5,
                             kCloserMinSpan);
  CHECK(n.timed == 2);
  CHECK(n.closer == 0);
  // No reply dispersion: not timed.
  CHECK(count_closer_than_sent({sample(1e-3, 0)}, 0.5, kCloserMinSpan).timed == 0);
}

TEST_CASE("replies back closer together than the train left: compressed on the way back",
          "[capacity]") {
  std::mt19937 rng(7);
  const CapacityFilter f;
  // 100 load packets at 1 Gbit/s (1.2 ms) through 20 Mbit/s (60 ms): the way
  // back held the head's reply and let the tail's follow 85 us behind it.
  TrainTiming t = synth(100, 20e6, 1e9, 0, rng);
  t.reply.front() = t.reply.back() - 85 * kUs;
  const CapacitySample s = evaluate_capacity_train(t, f);
  CHECK(s.verdict == SampleVerdict::kRepliesCompressed);
  CHECK(std::string(verdict_name(s.verdict)) == "replies_compressed");
  CHECK(replies_closer_than_sent(s, 0.5, 1e-3));
  SECTION("a span under the noise floor is not judged alone") {
    // 10 packets at 1 Gbit/s: 0.12 ms, under compressed_min_span.
    TrainTiming u = synth(10, 20e6, 1e9, 0, rng);
    u.reply.front() = u.reply.back() - 40 * kUs;
    const CapacitySample v = evaluate_capacity_train(u, f);
    CHECK(v.verdict != SampleVerdict::kRepliesCompressed);
    CHECK(replies_closer_than_sent(v, 0.5, 100e-6));   // what the phase counts over many trains
    CHECK_FALSE(replies_closer_than_sent(v, 0.5, 1e-3));
  }
  SECTION("our own queue held the head back: the span it left with counts") {
    // The head waited 1.1 ms in this host's queue behind other traffic: the
    // train left 0.1 ms long, and its replies, 0.09 ms apart, say the path
    // carried it as fast as it left (not compressed on the way back).
    TrainTiming u = synth(100, 20e6, 1e9, 0, rng);
    u.left = u.sent;
    u.left.front() = u.sent.back() - 100 * kUs;
    u.reply.front() = u.reply.back() - 90 * kUs;
    const CapacitySample v = evaluate_capacity_train(u, f);
    CHECK(v.verdict != SampleVerdict::kRepliesCompressed);
    CHECK_FALSE(replies_closer_than_sent(v, 0.5, 100e-6));
  }
  SECTION("clean trains with 20-200 us reply noise are never compressed") {
    for (double cap : {5e6, 20e6, 100e6, 1e9}) {
      for (int i = 0; i < 200; ++i) {
        const TrainTiming u = synth(50, cap, 1e9, 100 * kUs, rng);
        const CapacitySample v = evaluate_capacity_train(u, f);
        INFO(cap << " " << i << " reply " << v.reply_dispersion_s << " send "
                  << v.send_dispersion_s);
        CHECK(v.verdict != SampleVerdict::kRepliesCompressed);
      }
    }
  }
}

TEST_CASE("the mean of a normal truncated to a range", "[stats]") {
  // Half-normal: sqrt(2/pi).
  CHECK(truncated_normal_mean(0, 1, 0, 1e9) == Approx(std::sqrt(2 / M_PI)).epsilon(1e-6));
  CHECK(truncated_normal_mean(0, 1, -1e9, 0) == Approx(-std::sqrt(2 / M_PI)).epsilon(1e-6));
  CHECK(truncated_normal_mean(3, 2, 1, 5) == Approx(3).margin(1e-9));  // symmetric
  // Far inside: mu itself.
  CHECK(truncated_normal_mean(5e6, 1e3, 0, 100e6) == Approx(5e6).epsilon(1e-9));
  // A crossing of -9.5 +- 6.7 Mbit/s on an 8.01 Mbit/s path (the random-path
  // benchmark's path 51 at f20f70a, truth 2.32): not 0 but about 2.6.
  CHECK(truncated_normal_mean(-9.5e6, 6.7e6, 0, 8.01e6) == Approx(2.592e6).epsilon(0.002));
  CHECK(truncated_normal_mean(-5, 1, 0, 10) == Approx(0.1865).epsilon(0.002));
  // Far past a bound: the bound (no 0/0); beyond the other side likewise.
  CHECK(truncated_normal_mean(-1e3, 1, 0, 10) == Approx(0).margin(0.01));
  CHECK(truncated_normal_mean(1e3, 1, 0, 10) == Approx(10).margin(0.01));
  const double m = truncated_normal_mean(-40, 1, 0, 10);
  CHECK(m >= 0);
  CHECK(m < 0.05);
  // No spread: clamped.
  CHECK(truncated_normal_mean(-3, 0, 0, 10) == 0);
  CHECK(truncated_normal_mean(12, 0, 0, 10) == 10);
  CHECK(truncated_normal_mean(4, 0, 0, 10) == 4);
  CHECK(std::isnan(truncated_normal_mean(std::nan(""), 1, 0, 10)));  // no crossing: none
  CHECK(truncated_normal_mean(-INFINITY, 1, 0, 10) == 0);
}

TEST_CASE("KDE mode ignores a minority of low samples (cross traffic)", "[capacity][kde]") {
  std::mt19937 rng(3);
  std::normal_distribution<double> tight(50e6, 0.1e6);
  std::uniform_real_distribution<double> low(20e6, 45e6);
  std::vector<double> v;
  for (int i = 0; i < 30; ++i) v.push_back(tight(rng));
  for (int i = 0; i < 12; ++i) v.push_back(low(rng));
  const CapacityEstimate e = aggregate_capacity(v);
  REQUIRE(e.valid);
  CHECK(e.capacity_bps == Approx(50e6).epsilon(0.005));
  CHECK(e.low_bps <= e.capacity_bps);
  CHECK(e.high_bps >= e.capacity_bps);
  CHECK(e.low_bps > 48e6);
  CHECK(e.high_bps < 52e6);
  // The plain mean would be far off: the test would catch a mean-based estimator.
  double mean = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  CHECK(mean < 47e6);
}

TEST_CASE("median_standard_error: 1.2533 sd / sqrt(n)", "[stats]") {
  CHECK(median_standard_error({1, 2, 3, 4}) == Approx(1.2533 * std::sqrt(5.0 / 16)));
  CHECK(median_standard_error({5, 5, 5}) == 0);
  CHECK(median_standard_error({7}) == 0);
  CHECK(median_standard_error({}) == 0);
}

TEST_CASE("two trains far apart: the faster, whichever came first", "[capacity][kde]") {
  // Seed 2036's path 9: short trains at 1.71 (behind a TCP burst) and 8.74
  // Mbit/s on a 9.9 Mbit/s path.
  for (const std::vector<double>& v :
       {std::vector<double>{1.71e6, 8.74e6}, std::vector<double>{8.74e6, 1.71e6}}) {
    const CapacityEstimate e = aggregate_capacity(v);
    REQUIRE(e.valid);
    CHECK(e.capacity_bps == Approx(8.74e6));
    CHECK(e.low_bps <= 1.71e6 * 1.001);  // the interval still holds both
  }
  // Within a kernel width of each other they make one mode between them,
  // whatever the order.
  const CapacityEstimate near = aggregate_capacity({9.800e6, 9.801e6});
  CHECK(near.capacity_bps > 9.800e6);
  CHECK(near.capacity_bps < 9.801e6);
  CHECK(aggregate_capacity({9.801e6, 9.800e6}).capacity_bps == Approx(near.capacity_bps));
}

TEST_CASE("the two-length slope removes a fixed tail offset", "[capacity][slope]") {
  std::mt19937 rng(4);
  const double cap = 300e6;
  // The tail reply is 30 µs late on every train (a host waking from idle).
  std::vector<double> ds, dl, naive;
  double bs = 0, bl = 0;
  for (int i = 0; i < 8; ++i) {
    const TrainTiming s = synth(75, cap, 3 * cap, 3 * kUs, rng, 30 * kUs);
    const TrainTiming l = synth(150, cap, 3 * cap, 3 * kUs, rng, 30 * kUs);
    const auto ss = evaluate_capacity_train(s, CapacityFilter{});
    const auto sl = evaluate_capacity_train(l, CapacityFilter{});
    REQUIRE(ss.kept());
    REQUIRE(sl.kept());
    ds.push_back(ss.reply_dispersion_s);
    dl.push_back(sl.reply_dispersion_s);
    naive.push_back(ss.capacity_bps);
    bs = bits_after_head(s);
    bl = bits_after_head(l);
  }
  const SlopeEstimate e = estimate_capacity_slope(ds, bs, dl, bl);
  REQUIRE(e.capacity.valid);
  CHECK(e.capacity.capacity_bps == Approx(cap).epsilon(0.005));
  CHECK(e.offset_s == Approx(30e-6).margin(5e-6));
  CHECK(e.capacity.low_bps <= e.capacity.capacity_bps);
  CHECK(e.capacity.high_bps >= e.capacity.capacity_bps);
  // The per-train estimate is biased low by the offset (about 1% here).
  CHECK(aggregate_capacity(naive).capacity_bps < 0.995 * cap);
}

TEST_CASE("slope estimate with noise stays within 1% and its interval covers the truth",
          "[capacity][slope]") {
  std::mt19937 rng(5);
  for (double cap : {10e6, 50e6, 100e6, 1e9}) {
    const int n = static_cast<int>(std::max(8.0, 0.003 * cap / 12000));
    std::vector<double> ds, dl;
    double bs = 0, bl = 0;
    for (int i = 0; i < 10; ++i) {
      const TrainTiming s = synth(n, cap, 4 * cap, 8 * kUs, rng, 20 * kUs);
      const TrainTiming l = synth(2 * n, cap, 4 * cap, 8 * kUs, rng, 20 * kUs);
      ds.push_back(evaluate_capacity_train(s, CapacityFilter{}).reply_dispersion_s);
      dl.push_back(evaluate_capacity_train(l, CapacityFilter{}).reply_dispersion_s);
      bs = bits_after_head(s);
      bl = bits_after_head(l);
    }
    const SlopeEstimate e = estimate_capacity_slope(ds, bs, dl, bl);
    INFO("capacity " << cap);
    REQUIRE(e.capacity.valid);
    CHECK(e.capacity.capacity_bps == Approx(cap).epsilon(0.01));
    CHECK(e.capacity.low_bps <= cap * 1.002);
    CHECK(e.capacity.high_bps >= cap * 0.998);
  }
}

TEST_CASE("slope estimate refuses degenerate input", "[capacity][slope]") {
  CHECK_FALSE(estimate_capacity_slope({}, 1e5, {0.01}, 2e5).capacity.valid);
  CHECK_FALSE(estimate_capacity_slope({0.01}, 2e5, {0.02}, 1e5).capacity.valid);
  CHECK_FALSE(estimate_capacity_slope({0.02}, 1e5, {0.01}, 2e5).capacity.valid);
}

TEST_CASE("statistics helpers", "[stats]") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 2, 3}) == Approx(2.5));
  CHECK(quantile({0, 10}, 0.25) == Approx(2.5));
  const KdeMode m = kde_mode({5.0});
  CHECK(m.mode == 5.0);
  const Interval ci = bootstrap_mode_interval({1, 2});
  CHECK(ci.low == 1);
  CHECK(ci.high == 2);
}

TEST_CASE("slope estimate with one-sided host delays and a compressed outlier",
          "[capacity][slope]") {
  // Host wake-ups make tail replies late by an exponential amount (mean 40 µs);
  // longer trains are hit more often. One long train has its head reply
  // delayed by 200 µs (compressed dispersion).
  std::mt19937 rng(6);
  std::exponential_distribution<double> late(1.0 / 40e3);
  const double cap = 300e6;
  std::vector<double> ds, dl;
  double bs = 0, bl = 0;
  for (int i = 0; i < 10; ++i) {
    TrainTiming s = synth(75, cap, 3 * cap, 2 * kUs, rng, static_cast<Nanos>(late(rng)));
    TrainTiming l = synth(150, cap, 3 * cap, 2 * kUs, rng,
                          static_cast<Nanos>(late(rng) + late(rng)));
    if (i == 3) l.reply.front() += 200 * kUs;
    ds.push_back(evaluate_capacity_train(s, CapacityFilter{}).reply_dispersion_s);
    dl.push_back(evaluate_capacity_train(l, CapacityFilter{}).reply_dispersion_s);
    bs = bits_after_head(s);
    bl = bits_after_head(l);
  }
  const SlopeEstimate e = estimate_capacity_slope(ds, bs, dl, bl);
  REQUIRE(e.capacity.valid);
  CHECK(e.capacity.capacity_bps == Approx(cap).epsilon(0.01));
  // A plain minimum would pick the compressed trains and overestimate.
  const double by_min = (bl - bs) / (*std::min_element(dl.begin(), dl.end()) -
                                     *std::min_element(ds.begin(), ds.end()));
  CHECK(by_min > 1.03 * cap);
}

TEST_CASE("a noisy two-length slope gives way to the per-train estimate", "[capacity]") {
  auto est = [](double c, double lo, double hi) {
    lw::CapacityEstimate e;
    e.valid = true;
    e.capacity_bps = c;
    e.low_bps = lo;
    e.high_bps = hi;
    return e;
  };
  // The case seen in the lab: 3 Mbit/s with HTTP cross traffic.
  CHECK(lw::prefer_per_train(est(9.5e6, 3.4e6, 23.8e6), est(2.97e6, 2.9e6, 3.05e6), 0.01));
  // A tight slope stays, even if the per-train is tighter still.
  CHECK_FALSE(lw::prefer_per_train(est(3.0e6, 2.95e6, 3.05e6), est(2.9e6, 2.89e6, 2.91e6), 0.01));
  // Wide, but the per-train estimate is no better.
  CHECK_FALSE(lw::prefer_per_train(est(9.5e6, 3.4e6, 23.8e6), est(3e6, 1e6, 9e6), 0.01));
  lw::CapacityEstimate none;
  CHECK_FALSE(lw::prefer_per_train(est(9.5e6, 3.4e6, 23.8e6), none, 0.01));

  // Simulated: 3 Mbit/s, trains of 8 and 16 MTU packets, a 100 us offset, and
  // cross-traffic bursts (an HTTP response: up to 20 packets) landing in a
  // third of the trains, 5 trains of each length (a time-limited run).
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  const double C = 3e6, L = 12000, a = 100e-6;
  int slope_bad = 0, chosen_bad = 0;
  for (int run = 0; run < 200; ++run) {
    std::vector<double> sd, ld, per;
    for (int i = 0; i < 5; ++i) {
      for (int g = 0; g < 2; ++g) {
        const double bits = (g ? 16 : 8) * L;
        double d = a + bits / C;
        if (u(rng) < 1.0 / 3) d += std::ceil(20 * u(rng)) * L / C;
        (g ? ld : sd).push_back(d);
        per.push_back(bits / d);
      }
    }
    const auto slope = lw::estimate_capacity_slope(sd, 8 * L, ld, 16 * L).capacity;
    const auto pt = lw::aggregate_capacity(per);
    const auto chosen = lw::prefer_per_train(slope, pt, 0.01) ? pt : slope;
    slope_bad += std::fabs(slope.capacity_bps / C - 1) > 0.15 ? 1 : 0;
    chosen_bad += std::fabs(chosen.capacity_bps / C - 1) > 0.15 ? 1 : 0;
  }
  INFO("slope off by >15% in " << slope_bad << " of 200, chosen in " << chosen_bad);
  CHECK(chosen_bad <= slope_bad);
  CHECK(chosen_bad < slope_bad / 2 + 5);
}

namespace {

// A train through this host's own shaped interface: a byte-limited FIFO of
// `limit_bytes` drained at `cap_bps` (tbf/htb with a small queue). Packets that
// find it full are dropped (never leave: left = 0); `left` is when each
// departing packet began to leave (where the capture sees it), the reply comes
// a fixed delay after it finished.
TrainTiming through_local_queue(int n, double cap_bps, double send_bps, double limit_bytes) {
  TrainTiming t;
  const Nanos t0 = 1'000'000'000;
  std::vector<std::pair<double, double>> queued;  // (departure end, bytes) of what is in the queue
  double link_free = 0, send_t = 0;
  const int total = n + 2;
  for (int i = 0; i < total; ++i) {
    const bool marker = i == 0 || i == total - 1;
    const double bytes = marker ? 40 : 1500;
    t.bits.push_back(8 * bytes);
    t.marker.push_back(marker);
    t.sent.push_back(t0 + static_cast<Nanos>(send_t * 1e9));
    double backlog = 0;
    for (const auto& q : queued)
      if (q.first > send_t) backlog += q.second;
    if (backlog + bytes > limit_bytes) {
      t.left.push_back(0);
      t.reply.push_back(0);
    } else {
      const double start = std::max(link_free, send_t);
      link_free = start + 8 * bytes / cap_bps;
      queued.emplace_back(link_free, bytes);
      t.left.push_back(t0 + static_cast<Nanos>(start * 1e9));
      t.reply.push_back(marker ? t0 + 300 * kUs + static_cast<Nanos>(link_free * 1e9) : 0);
    }
    send_t += 8 * bytes / send_bps;
  }
  return t;
}

}  // namespace

TEST_CASE("load our own queue dropped is not counted, and the train is not kept",
          "[capacity][lostload]") {
  // 6 Mbit/s with a queue of about 7 full packets; 16 load packets at 1 Gbit/s.
  const TrainTiming t = through_local_queue(16, 6e6, 1e9, 11646);
  int dropped = 0;
  for (std::size_t i = 1; i + 1 < t.left.size(); ++i) dropped += t.left[i] == 0 ? 1 : 0;
  REQUIRE(dropped > 0);
  REQUIRE(t.reply.front() != 0);
  REQUIRE(t.reply.back() != 0);
  const CapacitySample s = evaluate_capacity_train(t, CapacityFilter{});
  CHECK(s.verdict == SampleVerdict::kLostLoad);
  CHECK(std::string(verdict_name(s.verdict)) == "lost_load");
  CHECK(s.lost_load == dropped);
  CHECK(s.left_before_loss >= 6);
  CHECK(s.left_before_loss <= 8);
  // The rate of what left: the link's, not the 1 + dropped/departed times it.
  CHECK(s.capacity_bps == Approx(6e6).epsilon(0.01));

  SECTION("a queue that holds the train drops nothing") {
    const TrainTiming ok = through_local_queue(16, 6e6, 1e9, 64000);
    const CapacitySample k = evaluate_capacity_train(ok, CapacityFilter{});
    CHECK(k.kept());
    CHECK(k.lost_load == 0);
    CHECK(k.capacity_bps == Approx(6e6).epsilon(0.01));
  }
  SECTION("a departure the capture missed, on a train our queue did not spread, is no loss") {
    std::mt19937 rng(5);
    TrainTiming u = synth(16, 6e6, 1e9, 0, rng);
    u.left = u.sent;  // left as sent: unshaped here
    u.left[5] = 0;
    const CapacitySample k = evaluate_capacity_train(u, CapacityFilter{});
    CHECK(k.kept());
    CHECK(k.lost_load == 0);
  }
  SECTION("without departure times nothing changes") {
    TrainTiming u = t;
    u.left.clear();
    const CapacitySample k = evaluate_capacity_train(u, CapacityFilter{});
    CHECK(k.verdict != SampleVerdict::kLostLoad);
  }
}

TEST_CASE("dense mode: the most populous group of closely agreeing train rates",
          "[capacity][dense]") {
  SECTION("18 of 39 agree on the truth, the rest spread above it") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> near(-0.01, 0.01), far(1.05, 1.35);
    std::vector<double> r;
    for (int i = 0; i < 18; ++i) r.push_back(66.5e6 * (1 + near(rng)));
    for (int i = 0; i < 21; ++i) r.push_back(66.5e6 * far(rng));
    const DenseMode m = dense_mode(r);
    REQUIRE(m.found);
    CHECK(m.count >= 18);
    CHECK(m.rate_bps == Approx(66.5e6).epsilon(0.01));
    CHECK(m.low_bps <= m.rate_bps);
    CHECK(m.high_bps >= m.rate_bps);
    CHECK(m.high_bps / m.low_bps < 1.031);
  }
  SECTION("no group holds enough of them") {
    std::vector<double> r;
    for (int i = 0; i < 20; ++i) r.push_back(50e6 * (1 + 0.04 * i));  // 4% apart
    const DenseMode m = dense_mode(r);
    CHECK_FALSE(m.found);
    CHECK(m.count == 1);
  }
  SECTION("too few trains in all") {
    CHECK_FALSE(dense_mode({10e6, 10e6, 10e6}).found);
    CHECK_FALSE(dense_mode({}).found);
  }
  SECTION("the larger of two groups wins, and the share counts") {
    std::vector<double> r(5, 30e6);
    r.insert(r.end(), 7, 40e6);
    const DenseMode m = dense_mode(r);
    REQUIRE(m.found);
    CHECK(m.rate_bps == Approx(40e6));
    CHECK(m.count == 7);
    r.insert(r.end(), 10, 90e6);  // 10 of 22 now: still over 35%
    CHECK(dense_mode(r).rate_bps == Approx(90e6));
    std::vector<double> spread(30);
    for (int i = 0; i < 30; ++i) spread[i] = 1e6 * (100 + 5 * i);
    spread.insert(spread.end(), 5, 20e6);  // 5 of 35: under 35%
    CHECK_FALSE(dense_mode(spread).found);
  }
}

TEST_CASE("the capacity interval is at least +-0.5% of the estimate, never narrowed") {
  CapacityResult r;
  r.valid = true;
  r.capacity_bps = 5.718e6;
  r.low_bps = 5.716e6;  // benchmark path 20: a +-0.05% interval, truth 5.726
  r.high_bps = 5.725e6;
  add_systematic_margin(r);
  CHECK(r.low_bps == Approx(5.718e6 * 0.995));
  CHECK(r.high_bps == Approx(5.718e6 * 1.005));
  CHECK(r.high_bps >= 5.726e6);
  // Seed 2032's path 37: an idle tbf of ours at 160.21 Mbit/s (IP layer),
  // read 159.52 [158.60, 159.997].
  CapacityResult idle;
  idle.valid = true;
  idle.capacity_bps = 159.52e6;
  idle.low_bps = 158.60e6;
  idle.high_bps = 159.997e6;
  add_systematic_margin(idle);
  CHECK(idle.low_bps == 158.60e6);
  CHECK(idle.high_bps >= 160.21e6);
  // A wider interval stays as it was.
  r.low_bps = 4e6;
  r.high_bps = 7e6;
  add_systematic_margin(r);
  CHECK(r.low_bps == 4e6);
  CHECK(r.high_bps == 7e6);
  // A lower bound, or no estimate: untouched.
  CapacityResult lb = r;
  lb.lower_bound = true;
  lb.low_bps = lb.high_bps = 5.718e6;
  add_systematic_margin(lb);
  CHECK(lb.low_bps == 5.718e6);
  CapacityResult none;
  add_systematic_margin(none);
  CHECK(none.low_bps == 0);
  CHECK(none.high_bps == 0);
}

namespace {

// Trains of `n_load` 1500-byte load packets (40-byte markers) at `cap`: the
// whole train's dispersion, the bits after its head, one packet's time.
struct LadderPath {
  double bits, load_bits, top_s, rung_s;
};
LadderPath ladder_path(int n_load, double cap) {
  LadderPath p;
  p.load_bits = 1500 * 8;
  p.bits = n_load * p.load_bits + 40 * 8;
  p.rung_s = p.load_bits / cap;
  p.top_s = p.bits / cap + 20e-6;  // and a fixed offset
  return p;
}

}  // namespace

TEST_CASE("lost load: trains whole packets short are lifted onto the whole trains' rung",
          "[capacity][loss]") {
  int found = 0, cases = 0;
  for (double cap : {10e6, 50e6, 100e6}) {
    for (int n_load : {8, 16, 28}) {
      for (unsigned seed = 1; seed <= 10; ++seed) {
        const LadderPath p = ladder_path(n_load, cap);
        std::mt19937 rng(seed);
        std::binomial_distribution<int> lost(n_load, 0.03);
        std::normal_distribution<double> noise(0, 2e-6);
        std::vector<double> d;
        int short_trains = 0;
        // 3% loss before the narrow link, with a train short for sure (the
        // seed may draw none).
        for (int i = 0; i < 14; ++i) {
          const int k = i == 0 ? 1 : lost(rng);
          short_trains += k > 0 ? 1 : 0;
          d.push_back(p.top_s - k * p.rung_s + noise(rng));
        }
        std::string ks;
        for (double x : d) ks += std::to_string(std::lround((p.top_s - x) / p.rung_s)) + " ";
        INFO("cap " << cap << " N " << n_load << " seed " << seed << " rungs " << ks);
        const LostLoadLadder l = lift_lost_load(d, p.bits, p.load_bits);
        ++cases;
        if (!l.found) {
          // More trains a rung down than whole (it happens at 3% on 16 or
          // more packets): cross traffic's ladder looks like that, and
          // nothing is lifted.
          CHECK(l.lifted == 0);
          CHECK(l.dispersions_s == d);
          continue;
        }
        ++found;
        CHECK(l.lifted == short_trains);
        // (The rung is read at the top rung's own rate, offset included.)
        CHECK(l.rung_s == Approx(p.rung_s).epsilon(0.03));
        for (double x : l.dispersions_s) CHECK(x == Approx(p.top_s).margin(10e-6));
      }
    }
  }
  INFO(found << " of " << cases << " ladders found");
  CHECK(found >= cases * 8 / 10);
}

TEST_CASE("lost load: the slope through lifted trains of two lengths reads the capacity",
          "[capacity][loss]") {
  const double cap = 50e6;
  const LadderPath s = ladder_path(14, cap), l = ladder_path(28, cap);
  // The lab's failing run at 3% loss (issue 11 notes): short trains mostly
  // whole, long ones often one or two packets short.
  const std::vector<int> ks = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  const std::vector<int> kl = {1, 0, 1, 0, 1, 2, 0, 1, 0, 0, 0};
  std::vector<double> ds, dl;
  for (int k : ks) ds.push_back(s.top_s - k * s.rung_s);
  for (int k : kl) dl.push_back(l.top_s - k * l.rung_s);
  const SlopeEstimate raw = estimate_capacity_slope(ds, s.bits, dl, l.bits);
  const LostLoadLadder ls = lift_lost_load(ds, s.bits, s.load_bits);
  const LostLoadLadder ll = lift_lost_load(dl, l.bits, l.load_bits);
  REQUIRE(ls.found);
  REQUIRE(ll.found);
  const SlopeEstimate fixed = estimate_capacity_slope(ls.dispersions_s, s.bits, ll.dispersions_s, l.bits);
  CHECK(raw.capacity.capacity_bps > 1.05 * cap);
  CHECK(raw.capacity.low_bps > cap);  // and its interval missed the truth
  CHECK(fixed.capacity.capacity_bps == Approx(cap).epsilon(0.002));
  CHECK(fixed.capacity.low_bps <= cap * 1.001);
  CHECK(fixed.capacity.high_bps >= cap * 0.999);
}

TEST_CASE("lost load: cross traffic's ladder and continuous noise are left alone",
          "[capacity][loss]") {
  const double cap = 50e6;
  const LadderPath p = ladder_path(16, cap);
  std::normal_distribution<double> noise(0, 2e-6);
  int lifted_ct = 0, lifted_noise = 0, cases = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    // Full-size cross packets, Poisson: a train meets j of them and comes
    // back j rungs long (the bottom is the train that met none).
    for (double lambda : {0.3, 0.6, 1.0, 2.0, 4.0}) {
      std::poisson_distribution<int> met(lambda);
      std::vector<double> d;
      for (int i = 0; i < 14; ++i) d.push_back(p.top_s + met(rng) * p.rung_s + noise(rng));
      const LostLoadLadder l = lift_lost_load(d, p.bits, p.load_bits);
      lifted_ct += l.lifted > 0 ? 1 : 0;
      ++cases;
    }
    // Cross traffic of every size: a continuous spread above the bottom.
    std::exponential_distribution<double> wait(1 / (0.8 * p.rung_s));
    std::vector<double> d;
    for (int i = 0; i < 14; ++i) d.push_back(p.top_s + wait(rng));
    lifted_noise += lift_lost_load(d, p.bits, p.load_bits).lifted > 0 ? 1 : 0;
  }
  INFO(lifted_ct << " of " << cases << " cross-traffic ladders lifted, " << lifted_noise
                 << " of 20 continuous spreads");
  // A draw of two rungs, the upper one a little more crowded and nothing
  // above it, is loss's ladder exactly (one group in 15 to 20 at 0.5 to 1
  // cross packets a train, none at 2 or more): the tally lifts only when
  // both lengths are ladders and the load they lost is no more than the
  // markers' loss rate allows.
  CHECK(lifted_ct <= cases / 10);
  CHECK(lifted_noise <= 1);
}

TEST_CASE("lost load: too few trains, or all whole, lift nothing", "[capacity][loss]") {
  const LadderPath p = ladder_path(16, 50e6);
  const std::vector<double> four = {p.top_s, p.top_s, p.top_s - p.rung_s, p.top_s};
  CHECK_FALSE(lift_lost_load(four, p.bits, p.load_bits).found);
  const std::vector<double> whole(8, p.top_s);
  const LostLoadLadder l = lift_lost_load(whole, p.bits, p.load_bits);
  CHECK(l.found);
  CHECK(l.lifted == 0);
  CHECK(l.dispersions_s == whole);
  CHECK_FALSE(lift_lost_load({p.top_s, 0, p.top_s, p.top_s, p.top_s}, p.bits, p.load_bits).found);
  CHECK_FALSE(lift_lost_load(whole, p.bits, 0).found);
}

TEST_CASE("lost load: ladder tops a whole rung off a small offset are raised",
          "[capacity][loss]") {
  const double cap = 50e6;
  const LadderPath s = ladder_path(13, cap), l = ladder_path(26, cap);
  const double r = s.rung_s;
  SECTION("whole tops: the path's offset stands") {
    const TopShift t = align_ladder_tops(s.top_s, s.bits, l.top_s, l.bits, r);
    CHECK(t.short_rungs == 0);
    CHECK(t.long_rungs == 0);
    CHECK(t.offset_s == Approx(20e-6).margin(1e-6));
  }
  SECTION("the long trains' top one or two rungs down (none came back whole)") {
    for (int m : {1, 2}) {
      const TopShift t = align_ladder_tops(s.top_s, s.bits, l.top_s - m * r, l.bits, r);
      CHECK(t.short_rungs == 0);
      CHECK(t.long_rungs == m);
      CHECK(t.offset_s == Approx(20e-6).margin(2e-6));
    }
  }
  SECTION("the short top down, or both") {
    TopShift t = align_ladder_tops(s.top_s - r, s.bits, l.top_s, l.bits, r);
    CHECK(t.short_rungs == 1);
    CHECK(t.long_rungs == 0);
    t = align_ladder_tops(s.top_s - r, s.bits, l.top_s - r, l.bits, r);
    CHECK(t.short_rungs == 1);
    CHECK(t.long_rungs == 1);
  }
  SECTION("an offset under half a rung, or one no whole rungs explain, is left") {
    for (double a : {0.4 * r, -0.45 * r, 0.6 * r, -0.6 * r}) {
      INFO(a / r);
      const TopShift t = align_ladder_tops(s.top_s + a, s.bits, l.top_s + a, l.bits, r);
      CHECK(t.short_rungs == 0);
      CHECK(t.long_rungs == 0);
    }
  }
}
