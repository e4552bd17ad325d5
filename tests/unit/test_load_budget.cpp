// The --max-load budget (estimate/load_budget.hpp) on synthetic trains with
// lost load: a byte-limited FIFO (tbf with a 15 KB queue at 20 Mbit/s, the lab's
// "small queue" path) drops the tail of long back-to-back trains, their replies
// still come back, and their per-train rate reads up to twice the link.
// What the lab measured with the old rule (idle budgeted at min(estimate,
// 2 x best per-train rate)): 28% of C instead of 10%.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "estimate/capacity.hpp"
#include "estimate/load_budget.hpp"

using namespace lw;

namespace {

// A narrow link of `cap_bps` behind a byte-limited FIFO of `limit_bytes`
// (bytes waiting, not counting the packet on the wire; 15 KB of queue plus a
// 3 KB token-bucket burst, so a lab short train of 2 drain + 9 load packets
// fits and a long one of 18 does not), fed by our interface
// at `line_bps`. One train: `drain` full-size packets, a 40-byte SYN head
// marker, n load packets of 1500 B, a 40-byte SYN tail marker, back to back.
// Packets that find the queue full are dropped; the markers are small enough
// to fit where the load does not. Replies come back 200 us after a marker
// left the link, plus 0-20 us of noise. The trains are spaced far apart (the
// queue is empty when each arrives).
struct SmallQueue {
  double cap_bps = 19.82e6;
  double line_bps = 1e9;
  double limit_bytes = 18000;
  int drain = 2;
  std::mt19937 rng{11};
  int dropped = 0;  // load packets dropped in the last train
  double sent_bits = 0, delivered_bits = 0;  // after the head marker, in the last train

  TrainTiming train(int n) {
    TrainTiming t;
    std::uniform_real_distribution<double> nz(0, 20e-6);
    const Nanos t0 = 1'000'000'000;
    struct Q {
      double start, bytes;
    };
    std::vector<Q> queue;  // accepted packets not yet fully sent: start of service, size
    double link_free = 0, send_t = 0;
    dropped = 0;
    sent_bits = delivered_bits = 0;
    const int total = drain + n + 2;
    for (int i = 0; i < total; ++i) {
      const bool marker = i == drain || i == total - 1;
      const double bytes = marker ? 40 : 1500;
      // Bytes still waiting at send_t (service not yet begun).
      double waiting = 0;
      for (const Q& q : queue) waiting += q.start > send_t ? q.bytes : 0;
      const bool accepted = waiting + bytes <= limit_bytes;
      double leaves = 0;
      if (accepted) {
        const double start = std::max(link_free, send_t);
        link_free = start + 8 * bytes / cap_bps;
        leaves = link_free;
        queue.push_back({start, bytes});
      } else if (!marker) {
        ++dropped;
      }
      if (i > drain) {
        sent_bits += 8 * bytes;
        delivered_bits += accepted ? 8 * bytes : 0;
      }
      if (i >= drain) {  // the timed part: head marker to tail marker
        t.bits.push_back(8 * bytes);
        t.marker.push_back(marker);
        t.sent.push_back(t0 + from_seconds(send_t));
        t.reply.push_back(marker && accepted ? t0 + from_seconds(leaves + 200e-6 + nz(rng)) : 0);
      }
      send_t += 8 * bytes / line_bps;
    }
    t.lead_bits = 8.0 * 1500 * drain;
    return t;
  }
};

// The phase's own rule after a capacity train (app/capacity_run.cpp):
// idle >= max(train time at C_b / max_load, 2 N L / C_b) from its start.
double capacity_idle_s(double train_bits, int n, double budget_bps, double max_load) {
  return std::max(train_bits / budget_bps / max_load, 2.0 * n * 1500 * 8 / budget_bps);
}

}  // namespace

TEST_CASE("after_capacity_budget: the checked estimate's lower bound, never below the trains'",
          "[load_budget]") {
  // Cross traffic slowed the trains (quartile 30 of a 50 Mbit/s link): the
  // estimate's lower bound budgets the next phase.
  CHECK(after_capacity_budget(30e6, 50e6, 49.5e6, true) == 49.5e6);
  // Never above the estimate, whatever the interval says.
  CHECK(after_capacity_budget(30e6, 50e6, 60e6, true) == 50e6);
  // Never below what the earlier phases already budgeted with.
  CHECK(after_capacity_budget(45e6, 50e6, 40e6, true) == 45e6);
  // Not trusted (a lower bound, load lost unseen): the earlier budget as it is.
  CHECK(after_capacity_budget(30e6, 50e6, 49.5e6, false) == 30e6);
  CHECK(after_capacity_budget(0, 50e6, 49.5e6, false) == 0);
  // No earlier budget: the lower bound.
  CHECK(after_capacity_budget(0, 50e6, 49.5e6, true) == 49.5e6);
  // Nonsense in, the earlier budget out.
  CHECK(after_capacity_budget(30e6, NAN, 49.5e6, true) == 30e6);
  CHECK(after_capacity_budget(30e6, 50e6, 0, true) == 30e6);
  CHECK(after_capacity_budget(NAN, 50e6, INFINITY, true) == 0);
}

TEST_CASE("budget_capacity: lower quartile, never above the estimate", "[load_budget]") {
  CHECK(budget_capacity({}, 0) == kUnknownPathBps);
  CHECK(budget_capacity({}, 50e6) == 50e6);
  CHECK(budget_capacity({}, 50e6, 2.0) == 25e6);
  CHECK(budget_capacity({20e6}, 0, 0.5) == 20e6);  // a factor below 1 never raises it
  CHECK(budget_capacity({0, -1, NAN, INFINITY}, 0) == kUnknownPathBps);
  // Up to four rates: the lowest.
  CHECK(budget_capacity({40e6, 20e6, 39e6}, 0) == 20e6);
  // Five to eight: the second lowest (one low outlier does not decide).
  CHECK(budget_capacity({40e6, 20e6, 39e6, 21e6, 5e6}, 0) == 20e6);
  // An estimate inflated by a slope of two equal dispersions does not count.
  CHECK(budget_capacity({20e6, 20e6, 40e6, 40e6}, 24.9e9) == 20e6);
  // A lower estimate does.
  CHECK(budget_capacity({20e6, 20e6, 40e6, 40e6}, 18e6) == 18e6);
  // Half the trains inflated twofold: still the uninflated ones.
  std::vector<double> r;
  for (int i = 0; i < 20; ++i) {
    r.push_back(19.8e6 + 1e4 * i);
    r.push_back(39.5e6 + 1e4 * i);
  }
  CHECK(budget_capacity(r, 0) <= 19.9e6);
  // A single absurd reading among many is ignored.
  r.push_back(1e15);
  CHECK(budget_capacity(r, 0) <= 19.9e6);
}

TEST_CASE("load_ready_at: bytes sent over elapsed time stay under max_load x C", "[load_budget]") {
  const Nanos t0 = 5 * kSec;
  // Nothing known: no bound.
  CHECK(load_ready_at(t0, 1000000, 1000, 0, 0.1) == t0);
  // 1 MB sent at 8 Mbit/s, 10%: the average is back at 0.8 Mbit/s after 10 s,
  // less the next train's own time at C (so that the average measured when
  // it has crossed the link is exactly the cap).
  const Nanos t = load_ready_at(t0, 1000000, 10000, 8e6, 0.1);
  const double at = to_seconds(t - t0);
  CHECK(at == Approx(8.0 * 1010000 / 0.8e6 - 8.0 * 10000 / 8e6).epsilon(1e-9));
  const Nanos end = t + from_seconds(8.0 * 10000 / 8e6);
  CHECK(average_rate_bps(t0, end, 1010000) == Approx(0.8e6).epsilon(1e-6));
  // Never before t0, never absurdly far.
  CHECK(load_ready_at(t0, 0, 0, 1e9, 0.1) == t0);
  CHECK(load_ready_at(t0, ~0ull / 16, 0, 1, 0.01) == t0 + 86400 * kSec);
  CHECK(average_rate_bps(t0, t0, 100) == 0);
}

TEST_CASE("small queue: lost load inflates per-train rates and the old budget, not the new one",
          "[load_budget]") {
  SmallQueue q;
  const double C = q.cap_bps;
  std::vector<double> rates;
  std::vector<double> disp[2];
  double group_bits[2] = {0, 0};
  double best = 0;
  int lost_long = 0;
  for (int i = 0; i < 40; ++i) {
    const int g = i % 2;
    const int n = g == 0 ? 9 : 18;  // the lab run's lengths (ratio 2)
    const TrainTiming t = q.train(n);
    if (g == 1) lost_long += q.dropped;
    const CapacitySample s = evaluate_capacity_train(t, CapacityFilter{});
    REQUIRE(s.capacity_bps > 0);
    REQUIRE(s.kept());
    rates.push_back(s.capacity_bps);
    best = std::max(best, s.capacity_bps);
    disp[g].push_back(s.reply_dispersion_s);
    double b = 0;
    for (std::size_t k = 1; k < t.bits.size(); ++k) b += t.bits[k];
    group_bits[g] = b;
  }
  // The simulated path does what the lab path did: long trains lose load and
  // read about twice the link, the slope of two equal dispersions far more.
  CHECK(lost_long >= 20 * 5);
  const double long_rate = group_bits[1] / dispersion_location(disp[1]);
  const double short_rate = group_bits[0] / dispersion_location(disp[0]);
  CHECK(short_rate == Approx(C).epsilon(0.03));
  CHECK(long_rate > 1.6 * C);
  const SlopeEstimate slope =
      estimate_capacity_slope(disp[0], group_bits[0], disp[1], group_bits[1]);
  const double est = slope.capacity.valid ? slope.capacity.capacity_bps : 0;
  // The old rule budgeted idle at min(estimate, 2 x best per-train rate).
  const double old_rule = est > 0 ? std::min(est, 2 * best) : best;
  CHECK(old_rule > 3 * C);
  // The lower quartile of the per-train rates, at most the estimate: the
  // short trains' rate, here the truth.
  CHECK(budget_capacity(rates, est) <= 1.02 * C);
  CHECK(budget_capacity(rates, est) >= 0.9 * C);
  // Long trains read faster than short ones: the mark of lost load. Since the
  // short ones could have lost load too, the budget falls by that ratio
  // (here about 1.7): conservative, not absurdly so.
  std::vector<double> short_rates, long_rates;
  for (std::size_t i = 0; i < rates.size(); ++i)
    (i % 2 ? long_rates : short_rates).push_back(rates[i]);
  const double f = load_loss_factor(short_rates, long_rates);
  CHECK(f > 1.5);
  CHECK(f < 2.1);
  const double cb = budget_capacity(rates, est, f);
  CHECK(cb <= C / 1.5);
  CHECK(cb >= C / 2.1);

  // The whole schedule, the phase's idle rule plus the gate: the average
  // probing rate (bytes sent over elapsed time, measured when each train
  // has crossed the link) stays under max_load of the TRUE capacity. With the
  // old budget rate it would be about four times that.
  const double max_load = 0.1;
  auto run = [&](bool use_new) {
    SmallQueue q2;
    std::vector<double> seen, by_len[2];
    auto factor = [&] { return load_loss_factor(by_len[0], by_len[1]); };
    Nanos t = 0, next = 0;
    std::uint64_t sent = 0;
    double worst = 0, best2 = 0;
    for (int i = 0; i < 40; ++i) {
      const int n = i % 2 == 0 ? 9 : 18;
      const std::uint64_t bytes = (2 + n) * 1500 + 2 * 40;
      const double cb_now = seen.empty() ? 0
                            : use_new    ? budget_capacity(seen, 0, factor())
                                         : 2 * best2;
      const Nanos gate = use_new ? load_ready_at(0, sent, bytes, cb_now, max_load) : 0;
      t = std::max({t, next, gate});
      const CapacitySample s = evaluate_capacity_train(q2.train(n), CapacityFilter{});
      seen.push_back(s.capacity_bps);
      by_len[i % 2].push_back(s.capacity_bps);
      best2 = std::max(best2, s.capacity_bps);
      sent += bytes;
      const Nanos crossed = t + from_seconds(8.0 * static_cast<double>(bytes) / C);
      if (i > 0) worst = std::max(worst, average_rate_bps(0, crossed, sent));
      const double cb_after = use_new ? budget_capacity(seen, 0, factor()) : 2 * best2;
      next = t + from_seconds(
                     capacity_idle_s(8.0 * static_cast<double>(bytes), n, cb_after, max_load));
    }
    return worst;
  };
  const double worst_new = run(true);
  const double worst_old = run(false);
  INFO("worst average: new " << worst_new / C << " of C, old " << worst_old / C);
  CHECK(worst_new <= 1.02 * max_load * C);
  CHECK(worst_old > 2.5 * max_load * C);
}

TEST_CASE("the gate re-prices what was sent before the budget rate fell", "[load_budget]") {
  // Ten trains idled as if the path were 4x faster than it is (an inflated
  // budget), then the budget rate falls to the truth: the next train waits
  // until bytes sent over elapsed time are back under max_load x C.
  const double C = 20e6, max_load = 0.1;
  const std::uint64_t b = 27000;
  Nanos t = 0;
  std::uint64_t sent = 0;
  for (int i = 0; i < 10; ++i) {
    sent += b;
    t += from_seconds(8.0 * b / (4 * C) / max_load);
  }
  CHECK(average_rate_bps(0, t, sent) == Approx(4 * max_load * C).epsilon(1e-6));
  const Nanos ready = load_ready_at(0, sent, b, C, max_load);
  // The past trains' debt: the average is back at the cap only after four
  // times the time they took.
  CHECK(to_seconds(ready) > 3.9 * to_seconds(t));
  const Nanos crossed = ready + from_seconds(8.0 * b / C);
  CHECK(average_rate_bps(0, crossed, sent + b) <= max_load * C * 1.000001);
}

TEST_CASE("bytes sent outside the trains count too", "[load_budget]") {
  // Reply checks, load-check SYNs and discovery are in the byte count the
  // gate reads, so a train after them waits for them as well.
  const double C = 10e6, max_load = 0.1;
  const Nanos a = load_ready_at(0, 100000, 10000, C, max_load);
  const Nanos b = load_ready_at(0, 100000 + 5000, 10000, C, max_load);
  CHECK(b - a == from_seconds(8.0 * 5000 / (max_load * C)));
}

TEST_CASE("the shaper stream is left out of the ledger: bytes and time", "[load_budget]") {
  // Capacity trains gated by the ledger on a 20 Mbit/s path at 10%, then the
  // shaper probe (its own caps): 5 s of idle, a 32 MB stream at 1 Gbit/s and
  // 1 s of reply wait, then more trains. Counted, the stream alone would keep
  // the next train waiting over two minutes; left out, the trains go on as if
  // it had not been sent, and their bytes over the time outside the probe
  // stay under max_load x C.
  const double C = 20e6, max_load = 0.1;
  const std::uint64_t b = 27000;  // one train
  const Nanos train_time = from_seconds(8.0 * b / C);
  LoadLedger l{0, 0, C};
  std::uint64_t sent = 0;    // everything our sender counted
  std::uint64_t trains = 0;  // the trains' bytes alone
  Nanos now = 0;
  auto send_train = [&] {
    now = std::max(now, ledger_ready_at(l, sent, b, max_load));
    sent += b;
    trains += b;
    now += train_time + 2 * kMs;  // crosses the link, its replies come back
  };
  for (int i = 0; i < 10; ++i) send_train();
  // Where the next train would go with no probe at all, relative to now.
  const Nanos wait_without = ledger_ready_at(l, sent, b, max_load) - now;
  const Nanos probe_start = now;
  const std::uint64_t stream = 32000000;
  now += 5 * kSec + from_seconds(8.0 * stream / 1e9) + 1 * kSec;
  sent += stream;
  const Nanos span = now - probe_start;
  {
    LoadLedger counted = l;  // the rule before: every byte of the phase
    CHECK(to_seconds(ledger_ready_at(counted, sent, b, max_load) - now) > 120);
  }
  exclude_from_ledger(l, span, stream);
  // The next train waits after the probe exactly what it would have waited
  // had there been no probe (its time is no idle for the trains either).
  CHECK(ledger_ready_at(l, sent, b, max_load) - now == wait_without);
  CHECK(wait_without > 0);
  for (int i = 0; i < 10; ++i) send_train();
  CHECK(average_rate_bps(0, now - span, trains) <= max_load * C * 1.000001);
  // And no credit from the probe's time: the trains right after it run at
  // the cap over the time outside it, not at a fraction of it.
  CHECK(average_rate_bps(0, now - span, trains) >= 0.9 * max_load * C);
  // A sender count below the excluded bytes (it never is) reads as nothing sent.
  CHECK(ledger_ready_at(LoadLedger{kSec, 100, C}, 50, 0, max_load) == kSec);
}

TEST_CASE("every train loses load: the loss factor keeps the budget under C", "[load_budget]") {
  // When even the short trains lose load (a 12 KB queue), nothing they show
  // is uninflated: the lower quartile reads C x (bits sent / bits carried) of
  // the short trains, here about 1.5 C. The long trains read faster still,
  // and dividing by that ratio brings the budget back under C.
  SmallQueue q;
  q.limit_bytes = 12000;
  const double C = q.cap_bps;
  std::vector<double> rates, by_len[2];
  double worst_short_inflation = 0;
  for (int i = 0; i < 40; ++i) {
    const int n = i % 2 == 0 ? 9 : 18;
    const CapacitySample s = evaluate_capacity_train(q.train(n), CapacityFilter{});
    REQUIRE(s.kept());
    rates.push_back(s.capacity_bps);
    by_len[i % 2].push_back(s.capacity_bps);
    if (n == 9) {
      REQUIRE(q.dropped > 0);
      worst_short_inflation = std::max(worst_short_inflation, q.sent_bits / q.delivered_bits);
    }
  }
  const double quartile = budget_capacity(rates, 0);
  INFO("lower quartile " << quartile / C << " of C; short trains carried 1/"
                         << worst_short_inflation << " of their bits");
  CHECK(quartile > 1.3 * C);  // inflated: the quartile alone is not enough
  CHECK(quartile <= 1.01 * worst_short_inflation * C);
  const double cb = budget_capacity(rates, 0, load_loss_factor(by_len[0], by_len[1]));
  INFO("with the loss factor: " << cb / C << " of C");
  CHECK(cb <= C);
}

TEST_CASE("load_loss_factor: long trains faster than short ones, by more than an offset",
          "[load_budget]") {
  CHECK(load_loss_factor({}, {}) == 1.0);
  CHECK(load_loss_factor({20e6}, {40e6, 40e6}) == 1.0);  // too few short trains
  // A fixed dispersion offset of 10% of a short train: long ones read ~5% faster.
  CHECK(load_loss_factor({19e6, 19.1e6, 18.9e6}, {20e6, 20.1e6, 19.9e6}) == 1.0);
  // Lost load: twice as fast.
  CHECK(load_loss_factor({19.8e6, 19.7e6, 19.9e6}, {39.5e6, 39.4e6, 39.6e6}) ==
        Approx(39.5 / 19.8));
  // Short trains faster (a token-bucket burst): no loss mark.
  CHECK(load_loss_factor({30e6, 30e6}, {20e6, 20e6}) == 1.0);
  // Garbage ignored.
  CHECK(load_loss_factor({0, NAN, 20e6, 20e6}, {INFINITY, 40e6, 40e6}) == Approx(2.0));
  // Never over the length ratio when it is given: lost load makes a train r
  // times as long read at most r times as fast; the rest is cross traffic
  // that slowed the short trains (seed 2034's path 20: 4.96 times).
  CHECK(load_loss_factor({4.1e6, 3.53e6}, {18.9e6, 18.91e6}) == Approx(18.905 / 3.815));
  CHECK(load_loss_factor({4.1e6, 3.53e6}, {18.9e6, 18.91e6}, 2.0) == 2.0);
  CHECK(load_loss_factor({19.8e6, 19.7e6, 19.9e6}, {29.5e6, 29.4e6, 29.6e6}, 2.0) ==
        Approx(29.5 / 19.8));
}
