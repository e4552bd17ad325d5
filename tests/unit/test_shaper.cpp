// Token-bucket detection (estimate/shaper) on synthetic reply times: a stream
// of RST load with SYN markers (plan/shaper_plan's placement) through a
// simulated tbf (rate, bucket, optional peak rate, byte-limited queue), reply
// noise of 20-200 us, lost replies, cross traffic. Known answers: the
// sustained rate, the peak and the bucket; ordinary paths (no bucket, a
// bottleneck with cross traffic, an overflowing queue) must not report one.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>
#include <random>
#include <vector>

#include "estimate/reply_rate.hpp"
#include "estimate/shaper.hpp"
#include "app/runs/shaper_run.hpp"
#include "plan/shaper_plan.hpp"

using namespace lw;

namespace {

struct Path {
  double rate_bps = 20e6;     // sustained (tbf rate); with bucket 0: a plain bottleneck
  double bucket_bytes = 0;    // 0: no shaper
  double peak_bps = 0;        // tbf peakrate (0: the line, i.e. as sent)
  double queue_bytes = 4e6;   // drop-tail limit of the shaper's queue
  double offered_bps = 1e9;   // the stream's send rate
  double noise_s = 50e-6;     // reply timing noise, uniform in [0, noise]
  double reply_loss = 0;      // fraction of marker replies lost
  double cross_bps = 0;       // Poisson cross traffic through the same queue (1500 B)
  // ... from this time on (0: from the start), in bursts of this many
  // packets back to back (1: single packets; a TCP window: tens).
  double cross_start_s = 0;
  int cross_burst = 1;
  double initial_bytes = -1;  // the bucket's content at the head (-1: full)
  // A freeze of the host (a VM descheduled): nothing leaves the shaper from
  // pause_at for pause_s seconds; its tokens go on filling up to the bucket.
  double pause_at = -1;
  double pause_s = 0;
  // Our own sending slows to send_slow_bps after send_slow_after bytes (a
  // busy host); 0: it does not.
  double send_slow_after = 0;
  double send_slow_bps = 0;
  // Our sending stands still for send_stall_s after send_stall_after bytes
  // (a scheduler tick on a busy host); 0: it does not.
  double send_stall_after = 0;
  double send_stall_s = 0;
  // The way back stalls for this long from the head's reply on (a delay
  // element or a host descheduled): the replies due meanwhile come out
  // together when it resumes, 2 us apart.
  double reverse_stall_s = 0;
};

struct Stream {
  std::vector<ShaperPoint> points;
};

// Sends `load_packets` 1500-byte RSTs with markers (40 B) at the plan's
// positions, back to back at offered_bps, through the shaper; returns the
// markers' (bits after head, reply time).
Stream simulate(const Path& p, int load_packets, int markers, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(0, p.noise_s);
  std::uniform_real_distribution<double> u(0, 1);
  const std::vector<int> pos = shaper_marker_positions(load_packets, markers);
  struct Pkt {
    double t;  // arrival at the shaper
    double bytes;
    int marker;  // -1 for load and cross traffic
  };
  std::vector<Pkt> pkts;
  std::vector<double> sent_at(markers, 0);
  double t = 0, sent_bytes = 0;
  bool stalled = false;
  auto send = [&](double bytes) {
    if (p.send_stall_s > 0 && !stalled && sent_bytes >= p.send_stall_after) {
      stalled = true;
      t += p.send_stall_s;
    }
    sent_bytes += bytes;
    const bool slow = p.send_slow_after > 0 && sent_bytes > p.send_slow_after;
    t += bytes * 8 / (slow ? p.send_slow_bps : p.offered_bps);
  };
  std::size_t m = 0;
  for (int i = 0; i <= load_packets; ++i) {
    while (m < pos.size() && pos[m] == i) {
      pkts.push_back({t, 40, static_cast<int>(m)});
      sent_at[m] = t;
      send(40);
      ++m;
    }
    if (i == load_packets) break;
    pkts.push_back({t, 1500, -1});
    send(1500);
  }
  if (p.cross_bps > 0) {
    std::exponential_distribution<double> gap(p.cross_bps / (1500 * 8 * p.cross_burst));
    for (double c = p.cross_start_s + gap(rng); c < t + 2.0; c += gap(rng)) {
      for (int b = 0; b < p.cross_burst; ++b) pkts.push_back({c + b * 1e-6, 1500, -1});
    }
    std::stable_sort(pkts.begin(), pkts.end(), [](const Pkt& a, const Pkt& b) { return a.t < b.t; });
  }
  // tbf: tokens (bytes) at rate R up to the bucket; a packet leaves when the
  // tokens cover it and the link (peak) is free; FIFO with a byte limit.
  const double bucket = p.bucket_bytes > 0 ? p.bucket_bytes : 1514;
  double tokens = p.initial_bytes >= 0 ? p.initial_bytes : bucket, tok_t = 0, link_free = 0;
  std::deque<std::pair<double, double>> queued;  // (departure, bytes) of accepted packets
  std::vector<double> reply(markers, 0);
  double prev_dep = 0;
  for (const Pkt& k : pkts) {
    while (!queued.empty() && queued.front().first <= k.t) queued.pop_front();
    double backlog = 0;
    for (const auto& q : queued) backlog += q.second;
    if (backlog + k.bytes > p.queue_bytes) continue;  // dropped
    double dep = std::max({k.t, prev_dep, link_free});
    if (p.pause_at >= 0 && dep >= p.pause_at && dep < p.pause_at + p.pause_s) dep = p.pause_at + p.pause_s;
    tokens = std::min(bucket, tokens + (dep - tok_t) * p.rate_bps / 8);
    tok_t = dep;
    if (tokens < k.bytes) {
      dep += (k.bytes - tokens) * 8 / p.rate_bps;
      if (p.pause_at >= 0 && dep >= p.pause_at && dep < p.pause_at + p.pause_s) {
        dep = p.pause_at + p.pause_s;
        tokens = std::min(bucket, tokens + (dep - tok_t) * p.rate_bps / 8);
      }
      tokens = k.bytes;
      tok_t = dep;
    }
    tokens -= k.bytes;
    prev_dep = dep;
    if (p.peak_bps > 0) link_free = dep + k.bytes * 8 / p.peak_bps;
    queued.push_back({dep, k.bytes});
    if (k.marker >= 0) reply[k.marker] = dep + 0.001 + noise(rng);
  }
  if (p.reverse_stall_s > 0 && reply[0] > 0) {
    const double until = reply[0] + p.reverse_stall_s;
    int held = 0;
    for (int i = 0; i < markers; ++i) {
      if (reply[i] > 0 && reply[i] < until) reply[i] = until + 2e-6 * held++;
    }
  }
  Stream s;
  double bits = 0;
  int prev = 0;
  for (int i = 0; i < markers; ++i) {
    if (i > 0) bits += 8.0 * 1500 * (pos[i] - prev) + 8.0 * 40;
    prev = pos[i];
    const bool lost = reply[i] == 0 || (i > 0 && u(rng) < p.reply_loss);
    s.points.push_back({bits, lost ? 0 : static_cast<Nanos>((5.0 + reply[i]) * 1e9),
                        static_cast<Nanos>((5.0 + sent_at[i]) * 1e9)});
  }
  return s;
}

ShaperFinding run(const Path& p, double stream_bytes, unsigned seed, int markers = kShaperMarkers) {
  const int n = static_cast<int>(stream_bytes / 1500);
  return detect_shaper(simulate(p, n, markers, seed).points, p.offered_bps);
}

}  // namespace

TEST_CASE("shaper: marker positions are dense at the start and strictly increasing",
          "[shaper]") {
  const auto pos = shaper_marker_positions(2000, 48);
  REQUIRE(pos.size() == 48);
  CHECK(pos.front() == 0);
  CHECK(pos.back() == 2000);
  for (std::size_t i = 1; i < pos.size(); ++i) CHECK(pos[i] > pos[i - 1]);
  CHECK(pos[2] <= 10);  // a 30 KB bucket in a 3 MB stream still has burst points
  const auto few = shaper_marker_positions(5, 48);  // fewer packets than markers
  CHECK(few.size() == 6);
  CHECK(few.back() == 5);
}

TEST_CASE("shaper: buckets of 10 KB to 10 MB at 1 to 500 Mbit/s", "[shaper]") {
  struct Case {
    double rate, bucket, stream, noise;
  };
  const Case cases[] = {
      {1e6, 10e3, 60e3, 200e-6},     {10e6, 30e3, 400e3, 200e-6},  {20e6, 300e3, 1.2e6, 200e-6},
      {100e6, 3e6, 6e6, 100e-6},     {20e6, 3e6, 5e6, 200e-6},     {500e6, 10e6, 40e6, 20e-6},
      {100e6, 30e3, 2e6, 20e-6},     {10e6, 300e3, 1e6, 100e-6},   {500e6, 300e3, 4e6, 20e-6},
  };
  for (const Case& c : cases) {
    for (unsigned seed = 1; seed <= 5; ++seed) {
      Path p;
      p.rate_bps = c.rate;
      p.bucket_bytes = c.bucket;
      p.noise_s = c.noise;
      p.queue_bytes = 1e9;
      INFO("rate " << c.rate << " bucket " << c.bucket << " seed " << seed);
      const ShaperFinding f = run(p, c.stream, seed);
      INFO("reason " << f.reason << " rate " << f.rate_bps << " bucket " << f.bucket_bytes);
      REQUIRE(f.found);
      CHECK(f.rate_bps == Approx(c.rate).epsilon(0.03));
      CHECK(f.bucket_bytes == Approx(c.bucket).epsilon(0.15));
      CHECK(f.peak_bps > 1.4 * c.rate);
      // The peak (the line: as sent) is measured where the burst outlasts
      // the reply noise; a 30 KB burst at 1 Gbit/s lasts 240 us.
      if (c.bucket * 8 / p.offered_bps > 20 * c.noise) {
        CHECK(f.peak_bps == Approx(p.offered_bps).epsilon(0.1));
        CHECK(f.peak_at_offered);
      }
      CHECK(f.rate_low_bps <= f.rate_bps);
      CHECK(f.rate_high_bps >= f.rate_bps);
    }
  }
}

TEST_CASE("shaper: a second bucket's peak rate is measured", "[shaper]") {
  Path p;
  p.rate_bps = 20e6;
  p.bucket_bytes = 300e3;
  p.peak_bps = 100e6;
  p.queue_bytes = 1e9;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 1.5e6, seed);
    REQUIRE(f.found);
    CHECK(f.rate_bps == Approx(20e6).epsilon(0.03));
    CHECK(f.peak_bps == Approx(100e6).epsilon(0.1));
    CHECK_FALSE(f.peak_at_offered);
    // Bucket drains at P - R: B = (P - R) x time to the shift.
    CHECK(f.bucket_bytes == Approx(300e3).epsilon(0.15));
  }
}

TEST_CASE("shaper: lost replies and cross traffic", "[shaper]") {
  Path p;
  p.rate_bps = 20e6;
  p.bucket_bytes = 300e3;
  p.queue_bytes = 1e9;
  p.noise_s = 200e-6;
  p.reply_loss = 0.1;
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const ShaperFinding f = run(p, 1.2e6, seed);
    REQUIRE(f.found);
    CHECK(f.rate_bps == Approx(20e6).epsilon(0.03));
    CHECK(f.bucket_bytes == Approx(300e3).epsilon(0.2));
  }
  p.reply_loss = 0;
  p.cross_bps = 2e6;  // 10% of the sustained rate, through the same bucket
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const ShaperFinding f = run(p, 1.2e6, seed);
    REQUIRE(f.found);
    // What is left to us of the sustained rate, give or take the burstiness.
    CHECK(f.rate_bps > 0.8 * 20e6);
    CHECK(f.rate_bps < 1.03 * 20e6);
    CHECK(f.bucket_bytes == Approx(300e3).epsilon(0.25));
  }
}

TEST_CASE("shaper: the overflowing queue's tail is cut off", "[shaper]") {
  Path p;
  p.rate_bps = 20e6;
  p.bucket_bytes = 300e3;
  p.queue_bytes = 400e3;  // overflows after 700 KB of a 2 MB stream
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 2e6, seed);
    REQUIRE(f.found);
    CHECK(f.dropped_tail >= 2);
    CHECK(f.rate_bps == Approx(20e6).epsilon(0.03));
    CHECK(f.bucket_bytes == Approx(300e3).epsilon(0.2));
  }
}

TEST_CASE("shaper: ordinary paths report none", "[shaper]") {
  int false_alarms = 0, runs = 0;
  for (double rate : {1e6, 10e6, 50e6, 100e6, 500e6, 950e6}) {
    for (double noise : {20e-6, 200e-6}) {
      for (double cross : {0.0, 0.3}) {
        for (unsigned seed = 1; seed <= 10; ++seed) {
          Path p;
          p.rate_bps = rate;
          p.bucket_bytes = 0;
          p.noise_s = noise;
          p.cross_bps = cross * rate;
          p.queue_bytes = 1e9;
          // A stream of 100 ms at the path's rate, as the probe would send.
          const ShaperFinding f = run(p, std::max(60e3, rate * 0.1 / 8), seed);
          ++runs;
          if (f.found) {
            ++false_alarms;
            WARN("false shaper at " << rate << " noise " << noise << " cross " << cross
                                    << ": rate " << f.rate_bps << " peak " << f.peak_bps
                                    << " bucket " << f.bucket_bytes);
          }
          if (cross == 0) CHECK(f.stream_rate_bps == Approx(rate).epsilon(0.03));
        }
      }
    }
  }
  CHECK(false_alarms == 0);
  CHECK(runs == 240);
  // A short drop-tail queue overflowing on a plain bottleneck: markers at
  // the send spacing behind it are not a burst.
  Path p;
  p.rate_bps = 20e6;
  p.queue_bytes = 100e3;
  for (unsigned seed = 1; seed <= 5; ++seed) CHECK_FALSE(run(p, 1e6, seed).found);
}

TEST_CASE("shaper: a bucket larger than the stream shows as an uncompressed stream",
          "[shaper]") {
  Path p;
  p.rate_bps = 20e6;
  p.bucket_bytes = 5e6;
  p.offered_bps = 500e6;
  p.queue_bytes = 1e9;
  const ShaperFinding f = run(p, 1e6, 3);
  CHECK_FALSE(f.found);
  CHECK(f.uncompressed);
  CHECK(f.stream_rate_bps == Approx(500e6).epsilon(0.1));
}

TEST_CASE("shaper: too few replies", "[shaper]") {
  std::vector<ShaperPoint> pts = {{0, 1000}, {12000, 0}, {24000, 3000}};
  const ShaperFinding f = detect_shaper(pts, 1e9);
  CHECK_FALSE(f.found);
  CHECK(f.reason == "too few replies");
  CHECK_FALSE(detect_shaper({}, 0).found);
}

TEST_CASE("shaper: drain time", "[shaper]") {
  CHECK(shaper_drain_time_s(300e3, 20e6, 1e9) == Approx(300e3 * 8 / 980e6));
  CHECK(std::isinf(shaper_drain_time_s(300e3, 20e6, 10e6)));
}

TEST_CASE("shaper: triggers", "[shaper]") {
  CHECK(rate_drop_suggests_bucket(974e6, 37e6));
  CHECK_FALSE(rate_drop_suggests_bucket(100e6, 80e6));  // cross traffic, noise
  CHECK_FALSE(rate_drop_suggests_bucket(0, 80e6));
  // 30 KB bucket at 20 Mbit/s: offset -12 ms.
  CHECK(offset_suggests_bucket(-0.012, 20e6, 1500));
  // A late head reply (GRO timer, wake-up) of 200 us to 1 ms: no bucket worth 8 KB.
  CHECK_FALSE(offset_suggests_bucket(-200e-6, 1e9, 1500));
  CHECK_FALSE(offset_suggests_bucket(-1e-3, 20e6, 1500));
  CHECK_FALSE(offset_suggests_bucket(50e-6, 20e6, 1500));
}

TEST_CASE("shaper: a follow-up stream puts most markers after the shift", "[shaper]") {
  const auto pos = shaper_marker_positions(6000, 40, 2000);
  REQUIRE(pos.size() == 40);
  CHECK(pos.front() == 0);
  CHECK(pos.back() == 6000);
  int after = 0;
  for (std::size_t i = 1; i < pos.size(); ++i) {
    CHECK(pos[i] > pos[i - 1]);
    after += pos[i] > 2000 ? 1 : 0;
  }
  CHECK(after >= 28);
}

TEST_CASE("shaper: the avail-bw from the bucket's refill", "[shaper]") {
  // The reading stream meets a bucket holding (R - X)·tau, cross traffic X
  // through the same queue during the stream too: 8·content/tau is R - X.
  struct Case {
    double rate, bucket, cross;
  };
  for (const Case k : {Case{10e6, 30e3, 0}, Case{10e6, 30e3, 2.5e6}, Case{20e6, 300e3, 5e6},
                       Case{100e6, 3e6, 25e6}, Case{100e6, 300e3, 50e6}}) {
    const double tau = 0.6 * 8 * k.bucket / k.rate;
    const double truth = k.rate - k.cross;
    std::vector<double> errs;
    for (unsigned seed = 1; seed <= 5; ++seed) {
      Path p;
      p.rate_bps = k.rate;
      p.bucket_bytes = k.bucket;
      p.cross_bps = k.cross;
      p.initial_bytes = truth * tau / 8;
      const double b_max = k.rate * tau / 8;
      const double bytes = 1.15 * b_max * 1.03 + std::max(24.0 * 1500, k.rate * 0.03 / 8);
      ShaperOptions opt;
      opt.min_bucket_bytes = std::min(8000.0, std::max(0.1 * k.bucket, 3000.0));
      const int n = static_cast<int>(bytes / 1500);
      const ShaperFinding f = detect_shaper(simulate(p, n, 24, seed).points, p.offered_bps, opt);
      const RefillSample r = refill_sample(f, k.rate, k.bucket, tau, opt);
      INFO(k.rate << " " << k.bucket << " " << k.cross << " seed " << seed << ": " << f.reason);
      REQUIRE(r.ok);
      CHECK_FALSE(r.saturated);
      errs.push_back(r.availbw_bps / truth - 1);
    }
    std::sort(errs.begin(), errs.end());
    INFO(k.rate << " " << k.bucket << " " << k.cross << ": median error " << errs[2]);
    CHECK(std::abs(errs[2]) <= 0.05);
  }
}

TEST_CASE("shaper: refill arithmetic (tail wait, saturation, no burst)", "[shaper]") {
  ShaperFinding f;
  f.found = true;
  f.rate_bps = 20e6;
  // A = 15 Mbit/s, tau 50 ms, the tail waited 20 ms: the other flows' 5 Mbit/s
  // queued behind it spend (R - A)·D of the refill first.
  const double A = 15e6, tau = 0.05, D = 0.02;
  f.bucket_bytes = (A * tau - (20e6 - A) * D) / 8;
  RefillSample r = refill_sample(f, 20e6, 300e3, tau, {}, D);
  REQUIRE(r.ok);
  CHECK(r.availbw_bps == Approx(A).epsilon(1e-9));
  // Without the correction it would read low.
  CHECK(refill_sample(f, 20e6, 300e3, tau).availbw_bps < 0.9 * A);
  // A tail that waited longer than the idle: unusable.
  CHECK_FALSE(refill_sample(f, 20e6, 300e3, tau, {}, 0.06).ok);
  // Nearly a full bucket: tau was too long for the rate; not a sample.
  f.bucket_bytes = 0.9 * 300e3;
  r = refill_sample(f, 20e6, 300e3, 0.2);
  CHECK(r.saturated);
  CHECK_FALSE(r.ok);
  // No burst at all, the stream came back at R: nothing refilled.
  ShaperFinding none;
  none.points = 24;
  none.stream_rate_bps = 19.9e6;
  none.reason = "no level shift";
  r = refill_sample(none, 20e6, 300e3, tau);
  REQUIRE(r.ok);
  CHECK(r.availbw_bps == 0);
  CHECK(r.upper_bps > 0);
  // A stream that passed at line rate is no reading.
  none.stream_rate_bps = 900e6;
  CHECK_FALSE(refill_sample(none, 20e6, 300e3, tau).ok);
}

TEST_CASE("shaper: a freeze of the host during the stream is not read as a slower rate",
          "[shaper]") {
  // The fresh-clone CI at d364570 read a 10 Mbit/s, 30 KB bucket as 6.86
  // Mbit/s: a VM descheduled for ~100 ms in the middle of the stream, the
  // shaper's tokens capped at its bucket while it stood still.
  Path p;
  p.rate_bps = 10e6;
  p.bucket_bytes = 30e3;
  p.noise_s = 100e-6;
  for (double pause : {0.02, 0.05, 0.1}) {
    for (unsigned seed = 1; seed <= 5; ++seed) {
      p.pause_at = 0.05 + 0.02 * seed;
      p.pause_s = pause;
      const ShaperFinding f = run(p, 277e3, seed, 40);
      INFO("pause " << pause << " seed " << seed << " rate " << f.rate_bps << " " << f.reason );
      if (f.found) {
        CHECK(f.rate_bps == Approx(10e6).epsilon(0.03));
      } else {
        CHECK(f.paused);
      }
    }
  }
}

TEST_CASE("shaper: our own sending slowing down is not a shaper", "[shaper]") {
  // The fresh-clone CI at d364570: a firewall dropped our load before a 50
  // Mbit/s link, the replies showed only our sending, which ran at about 1
  // Gbit/s for 934 KB and then at 518 Mbit/s: read as a bucket.
  Path p;
  p.rate_bps = 5e9;  // the path is faster than anything we send
  p.offered_bps = 1e9;
  p.send_slow_after = 934e3;
  p.send_slow_bps = 518e6;
  p.noise_s = 20e-6;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 3e6, seed);
    INFO("seed " << seed << " rate " << f.rate_bps << " " << f.reason);
    CHECK_FALSE(f.found);
  }
  // A real bucket with the same slowdown of our sending, but still above
  // the sustained rate: found.
  p.rate_bps = 100e6;
  p.bucket_bytes = 300e3;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 2e6, seed);
    INFO("seed " << seed << " rate " << f.rate_bps << " " << f.reason);
    REQUIRE(f.found);
    CHECK(f.rate_bps == Approx(100e6).epsilon(0.03));
  }
}

TEST_CASE("shaper: our sending slowing at a stream's end is no short sustained phase",
          "[shaper]") {
  // The fresh-clone CI at 8dc5d37: an unshaped 1 Gbit/s path, a 10 MB
  // stream whose last markers came back at 617 Mbit/s read "sustained phase
  // too short", and a third stream followed it. Our own sending slowed
  // there: the replies only show that, whatever the phase's length.
  Path p;
  p.rate_bps = 5e9;
  p.offered_bps = 1e9;
  p.send_slow_after = 9.2e6;
  p.send_slow_bps = 600e6;
  p.noise_s = 20e-6;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 10e6, seed);
    INFO("seed " << seed << " rate " << f.rate_bps << " " << f.reason);
    CHECK_FALSE(f.found);
    CHECK(f.reason != "sustained phase too short");
  }
  // A bucket that empties as near the end, our sending at full speed: still
  // a short sustained phase, which the run loop follows up.
  p.send_slow_after = 0;
  p.rate_bps = 600e6;
  p.bucket_bytes = 9.2e6 * (1 - 600e6 / 1e9);
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 10e6, seed);
    INFO("seed " << seed << " rate " << f.rate_bps << " " << f.reason);
    CHECK_FALSE(f.found);
    CHECK(f.reason == "sustained phase too short");
  }
}

TEST_CASE("shaper: replies bunched behind a late head are not a burst", "[shaper]") {
  // The lab at 0.5 ms RTT through a delay element on a busy VM: a plain 50
  // Mbit/s link read as a bucket of 69 KB with a 14 Gbit/s "peak": the way
  // back stood still for about 11 ms from the head's reply on.
  Path p;
  p.rate_bps = 50e6;
  p.noise_s = 30e-6;
  p.reverse_stall_s = 0.011;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const ShaperFinding f = run(p, 1.44e6, seed);
    INFO("seed " << seed << " rate " << f.rate_bps << " peak " << f.peak_bps << " " << f.reason);
    CHECK_FALSE(f.found);
  }
}

TEST_CASE("shaper: a refill pair on a bucket its emptying stream did not empty", "[shaper]") {
  // R 20 Mbit/s, P 1 Gbit/s, tau 60 ms; the emptying stream went 30 KB past
  // the bucket: its tail should wait about 8·30 KB·0.98/R = 11.8 ms.
  const double R = 20e6, P = 1e9, tau = 0.06, excess = 30e3, L = 1500;
  RefillSample s;
  s.ok = true;
  s.content_bytes = 0.75 * R * tau / 8;  // 15 Mbit/s of refill: plausible
  CHECK_FALSE(refill_left_tokens(s, R, P, tau, 0.012, excess, L));
  // The same content, but the tail never queued: the bucket was not emptied.
  CHECK(refill_left_tokens(s, R, P, tau, 0.0, excess, L));
  // More than R·tau in the bucket, whatever the tail did: tokens left over.
  s.content_bytes = 1.2 * R * tau / 8;
  CHECK(refill_left_tokens(s, R, P, tau, 0.012, excess, L));
  // A saturated sample with a free tail is the tau rule's, not this one's.
  RefillSample sat;
  sat.saturated = true;
  CHECK_FALSE(refill_left_tokens(sat, R, P, tau, 0.0, excess, L));
  // No peak above R: nothing to judge.
  CHECK_FALSE(refill_left_tokens(s, R, R, tau, 0.0, excess, L));
}

TEST_CASE("shaper: a refill pair that contradicts the bucket it was sized for", "[shaper]") {
  // A real bucket (10 Mbit/s, 30 KB, 2.5 Mbit/s of cross traffic through it):
  // the reading stream after tau shows the refill; no contradiction.
  const double R = 10e6, B = 30e3, X = 2.5e6;
  const double tau = 0.6 * 8 * B / R;
  ShaperOptions opt;
  opt.min_bucket_bytes = std::max(0.1 * B, 3000.0);
  const double b_max = R * tau / 8;
  const int n = static_cast<int>((1.15 * b_max * 1.03 + 24.0 * 1500) / 1500);
  for (unsigned seed = 1; seed <= 5; ++seed) {
    Path p;
    p.rate_bps = R;
    p.bucket_bytes = B;
    p.cross_bps = X;
    p.initial_bytes = (R - X) * tau / 8;
    const ShaperFinding f = detect_shaper(simulate(p, n, 24, seed).points, p.offered_bps, opt);
    const RefillSample r = refill_sample(f, R, B, tau, opt);
    INFO("seed " << seed << ": " << f.reason);
    CHECK_FALSE(refill_contradicts_bucket(r, f, R, B, tau, false, opt));
    // ... unless its emptying stream did not empty it.
    CHECK(refill_contradicts_bucket(r, f, R, B, tau, true, opt));
  }
  // No bucket: a 9.9 Mbit/s link whose streams had read a "sustained" 4.7
  // behind an on/off source that was on. With the source off, the reading
  // stream is one line at 9.9: the path carries twice the rate claimed.
  for (unsigned seed = 1; seed <= 5; ++seed) {
    Path p;
    p.rate_bps = 9.9e6;
    const ShaperFinding f = detect_shaper(simulate(p, n, 24, seed).points, p.offered_bps, opt);
    const RefillSample r = refill_sample(f, 4.7e6, B, tau, opt);
    INFO("seed " << seed << ": " << f.reason << " at " << f.stream_rate_bps);
    CHECK_FALSE(r.ok);
    CHECK(refill_contradicts_bucket(r, f, 4.7e6, B, tau, false, opt));
    // Read against the link's own rate, the same stream is a refill of nothing.
    CHECK_FALSE(refill_contradicts_bucket(refill_sample(f, 9.9e6, B, tau, opt), f, 9.9e6, B, tau,
                                          false, opt));
  }
  // The bucket full again after an idle sized to refill 60% of it (R too
  // low): contradicts.
  RefillSample sat;
  sat.saturated = true;
  CHECK(refill_contradicts_bucket(sat, ShaperFinding{}, R, B, tau, false, opt));
  // ... and after an idle in which R refilled 65% of it (a little longer
  // than planned): still over 1.2·R.
  CHECK(refill_contradicts_bucket(sat, ShaperFinding{}, R, B, 0.65 * 8 * B / R, false, opt));
  // Full after an idle in which R refills all of it: what a bucket does
  // (30 KB at 100 Mbit/s refills in 2.4 ms, under the idle's 5 ms floor,
  // and its tau/2 of 2.5 ms too): no contradiction.
  CHECK_FALSE(refill_contradicts_bucket(sat, ShaperFinding{}, 100e6, 28e3, 0.00558, false, opt));
  CHECK_FALSE(refill_contradicts_bucket(sat, ShaperFinding{}, 96.5e6, 28e3, 0.00325, false, opt));
  // Nothing known of the bucket or the idle: as planned, a contradiction.
  CHECK(refill_contradicts_bucket(sat, ShaperFinding{}, R, 0, tau, false, opt));
  CHECK(refill_contradicts_bucket(sat, ShaperFinding{}, R, B, 0, false, opt));
  // A fast stream with too few replies to say so: no verdict.
  ShaperFinding few;
  few.points = opt.min_sustained_points - 1;
  few.stream_rate_bps = 5 * R;
  few.reason = "no level shift";
  CHECK_FALSE(refill_contradicts_bucket(RefillSample{}, few, R, B, tau, false, opt));
}

TEST_CASE("shaper: a bucket that may be larger than the streams found", "[shaper]") {
  // A 3 MB bucket at 20 Mbit/s found part-full: its burst came at 980 Mbit/s.
  CHECK(bucket_may_be_larger(980e6, 19.7e6));
  // Behind a peak rate 5 x R.
  CHECK(bucket_may_be_larger(5 * 19.7e6, 19.7e6));
  // A false bucket: on/off traffic took half our 10 Mbit/s link (2.1 R), or
  // a third of a 123 Mbit/s one.
  CHECK_FALSE(bucket_may_be_larger(9.9e6, 4.77e6));
  CHECK_FALSE(bucket_may_be_larger(123e6, 79.4e6));
  // Nothing known.
  CHECK_FALSE(bucket_may_be_larger(0, 19.7e6));
  CHECK_FALSE(bucket_may_be_larger(980e6, 0));
}

TEST_CASE("the bucket the fast capacity trains suggest counts their refill", "[shaper]") {
  // 14 MB in trains over 0.9 s, the slow train at 100 Mbit/s: the bucket
  // refilled 11.25 MB of it; 2.75 MB were bucket.
  CHECK(bucket_hint_bytes(14e6, 1.2e6, 0.9, 100e6) == Approx(2.75e6));
  // Never under the largest train that passed whole.
  CHECK(bucket_hint_bytes(14e6, 1.2e6, 2.0, 100e6) == Approx(1.2e6));
  // No slow rate (the replies stopped) or no span: the sum.
  CHECK(bucket_hint_bytes(14e6, 1.2e6, 0.9, 0) == Approx(14e6));
  CHECK(bucket_hint_bytes(14e6, 1.2e6, 0, 100e6) == Approx(14e6));
  // A largest train over the sum is a caller's slip: the sum bounds it.
  CHECK(bucket_hint_bytes(1e6, 3e6, 0.01, 100e6) == Approx(1e6));
  // The largest train not known: the sum stands for it.
  CHECK(bucket_hint_bytes(14e6, 0, 0.9, 100e6) == Approx(14e6));
}

TEST_CASE("a noisy overflow does not hide a small burst (recorded stream)", "[shaper]") {
  // A live stream (lab: tbf 100 Mbit/s, 30 KB bucket; two CPU hogs beside
  // the prober): bytes after the head, sent and reply in microseconds. The
  // first four markers came back at 1 Gbit/s (the bucket), then 100 Mbit/s;
  // from 2.74 MB on the shaper's queue overflowed, and the replies keep our
  // own send stalls of 5-7 ms. With one noise for all phases the stalls
  // outweighed the burst and the detector said "no level shift".
  const double rec[][3] = {
      {0, 0.0, 0.0},           {3040, 31.1, 30.4},         {13580, 110.5, 110.0},
      {30120, 242.9, 242.2},   {52660, 459.7, 1921.1},     {81200, 708.3, 4207.8},
      {117240, 1020.2, 7118.2}, {159280, 1435.1, 10521.1},  {208820, 1961.1, 14517.6},
      {264360, 2573.8, 19002.8}, {325900, 7258.4, 23995.6}, {394940, 7881.6, 29557.0},
      {469980, 8598.4, 35611.7}, {551020, 9314.6, 42156.2}, {639560, 10168.5, 49295.3},
      {734100, 15063.1, 56941.6}, {834640, 15994.4, 65078.1}, {942680, 17008.7, 73820.3},
      {1056720, 18157.9, 83016.8}, {1176760, 23283.0, 92683.9}, {1304300, 24492.4, 102985.5},
      {1437840, 25718.1, 113776.8}, {1577380, 31089.9, 125048.7}, {1724420, 32472.4, 136938.2},
      {1877460, 33870.6, 149291.1}, {2038000, 39416.8, 162266.0}, {2203040, 40899.0, 175583.9},
      {2377080, 42552.2, 189664.8}, {2555620, 48245.1, 204069.5}, {2741660, 49944.5, 209894.5},
      {2933700, 55757.6, 215686.7}, {3133240, 57606.8, 217504.0}, {3337280, 64370.7, 224306.3},
      {3550320, 66820.9, 226723.8}, {3767860, 73258.0, 233165.0}, {3992900, 79885.4, 239817.3},
      {4223940, 82445.6, 242362.4}, {4462480, 90396.1, 250382.4}, {4707020, 92514.1, 252430.6},
      {4957560, 94707.5, 254604.5}};
  std::vector<ShaperPoint> pts;
  const Nanos base = 1000 * kSec;
  for (const auto& r : rec) {
    ShaperPoint p;
    p.bits = 8 * r[0];
    p.sent = base + static_cast<Nanos>(r[1] * 1e3);
    p.reply = base + 5 * kMs + static_cast<Nanos>(r[2] * 1e3);
    pts.push_back(p);
  }
  const double offered = 8 * 4957560 / 94707.5e-6;
  const ShaperFinding f = detect_shaper(pts, offered);
  INFO(f.reason);
  REQUIRE(f.found);
  CHECK(f.rate_bps == Approx(99.05e6).epsilon(0.02));
  CHECK(f.bucket_bytes == Approx(28.9e3).epsilon(0.15));
  CHECK(f.overflow_bits / 8 == Approx(2.74e6).epsilon(0.1));
}

TEST_CASE("shaper: our own sending standing still early in the stream is said", "[shaper]") {
  // The fresh-clone CI at 1f2a5e6 found no 30 KB bucket at 100 Mbit/s; on a
  // busy host the streams' send times showed 4 ms stalls (the scheduler's
  // tick), one at 25 KB into the stream: the bucket refilled before it
  // emptied, and the replies showed no burst.
  Path p;
  p.rate_bps = 100e6;
  p.bucket_bytes = 30e3;
  p.noise_s = 20e-6;
  p.send_stall_s = 0.004;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    p.send_stall_after = 20e3 + 2e3 * seed;
    const ShaperFinding f = run(p, 3e6, seed);
    INFO("seed " << seed << " found " << f.found << " " << f.reason << " bucket "
                 << f.bucket_bytes << " stall at " << f.send_stall_bits / 8);
    REQUIRE(f.send_stall_bits > 0);
    CHECK(f.send_stall_bits / 8 <= p.send_stall_after);
    CHECK(f.send_stall_bits / 8 >= p.send_stall_after - 20e3);
  }
  // The same stall late in the stream (the bucket long empty, its refill
  // small against what was sent): not early; the bucket is found.
  for (unsigned seed = 1; seed <= 5; ++seed) {
    p.send_stall_after = 1e6 + 1e4 * seed;
    const ShaperFinding f = run(p, 3e6, seed);
    INFO("seed " << seed << " " << f.reason);
    CHECK(f.send_stall_bits == 0);
    CHECK(f.found);
  }
  // No stall: none said (an even stream, a slower one on an ordinary path).
  p.send_stall_s = 0;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    CHECK(run(p, 3e6, seed).send_stall_bits == 0);
    Path plain;
    plain.rate_bps = 50e6;
    plain.noise_s = 100e-6;
    CHECK(run(plain, 1.5e6, seed).send_stall_bits == 0);
  }
}

TEST_CASE("shaper: one step in the reply curve does not hide a small bucket", "[shaper]") {
  // A 30 KB bucket at 100 Mbit/s with 25 Mbit/s of cross traffic through
  // the same queue: the burst puts the head about 2.2 ms ahead of the
  // sustained line. The lab (4 runs in 30 of test_shaper.py's
  // sustained-regime case) showed one 4-7 ms step in mid-stream, every
  // later reply that much later (the path passed nothing meanwhile): left
  // in, it is noise the size of the step, and the streams read "no level
  // shift" or "burst within the timing noise" (capacity +120%, from trains
  // inside the burst). Here: 6 ms added to every reply after 1.5 MB.
  auto stepped = [](unsigned seed, const ShaperOptions& opt) {
    Path p;
    p.rate_bps = 100e6;
    p.bucket_bytes = 30e3;
    p.cross_bps = 25e6;
    p.noise_s = 100e-6;
    Stream st = simulate(p, static_cast<int>(4e6 / 1500), kShaperMarkers, seed);
    for (auto& q : st.points) {
      if (q.reply != 0 && q.bits > 8.0 * 1.5e6) q.reply += 6 * kMs;
    }
    return detect_shaper(st.points, p.offered_bps, opt);
  };
  int found = 0, found_without = 0;
  ShaperOptions without;
  without.max_steps = 0;
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const ShaperFinding f = stepped(seed, {});
    INFO("seed " << seed << ": " << f.reason << " rate " << f.rate_bps << " bucket "
                 << f.bucket_bytes << " steps " << f.steps_removed);
    CHECK(f.steps_removed == 1);
    if (f.found) {
      ++found;
      CHECK(f.rate_bps == Approx(100e6).epsilon(0.3));
      CHECK(f.bucket_bytes == Approx(30e3).epsilon(0.35));
    }
    found_without += stepped(seed, without).found;
  }
  CHECK(found >= 9);
  // The step left in: what the lab's streams read.
  CHECK(found_without <= 5);
}

TEST_CASE("shaper: a recorded 3 MB bucket whose queue overflowed is found without steps taken out",
          "[shaper]") {
  // tests/data/README.md: the lab's second stream into tbf 100 Mbit/s with a
  // 3 MB bucket and a 2 MB queue. Its overflow (1.2 MB after the shift)
  // carries one 0.6 ms step; taken out, the refit put the overflow three
  // points early and read "sustained phase too short" (6 of 10 lab runs
  // "not emptied"). The curve as it came shows the bucket.
  std::ifstream in(std::string(LW_TEST_DATA_DIR) + "/shaper_stream_3mb_100m_overflow.txt");
  REQUIRE(in);
  std::vector<ShaperPoint> points;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    ShaperPoint p;
    long long sent = 0, reply = 0;
    is >> p.bits >> sent >> reply;
    REQUIRE(is);
    p.sent = sent;
    p.reply = reply;
    points.push_back(p);
  }
  REQUIRE(points.size() == 40);
  const ShaperFinding f = detect_shaper(points, 9e8);
  INFO(f.reason);
  REQUIRE(f.found);
  CHECK(f.steps_removed == 0);
  CHECK(f.rate_bps == Approx(100e6 * 1500 / 1514).epsilon(0.03));
  CHECK(f.bucket_bytes == Approx(3e6 * 1500 / 1514).epsilon(0.25));
  CHECK(f.overflow_bits > 8.0 * 4.5e6);
}

TEST_CASE("shaper: a ragged sustained phase is not a bucket's line", "[shaper]") {
  // The level shifts, but what follows scatters around its slope by
  // milliseconds (cross traffic in bursts joining mid-stream: the random-path
  // benchmark's path 14 at 2261564, 61.7 Mbit/s behind TCP on three links,
  // read as a 19 KB bucket with a sustained 44.8 in [33.9, 65.7]). Here: a
  // 20 Mbit/s bucket's stream of 500 KB whose replies after the shift
  // (80 ms of it) each move by up to +-10 ms.
  int found = 0, refused = 0;
  for (unsigned seed = 1; seed <= 10; ++seed) {
    Path p;
    p.rate_bps = 20e6;
    p.bucket_bytes = 300e3;
    p.queue_bytes = 1e9;
    Stream st = simulate(p, static_cast<int>(0.5e6 / 1500), kShaperMarkers, seed);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> jitter(-10e-3, 10e-3);
    for (auto& q : st.points) {
      if (q.reply != 0 && q.bits > 8.0 * 400e3) q.reply += static_cast<Nanos>(jitter(rng) * 1e9);
    }
    const ShaperFinding f = detect_shaper(st.points, p.offered_bps);
    refused += f.reason == "sustained rate too noisy";
    if (f.found) {
      ++found;
      INFO("seed " << seed << ": " << f.rate_bps << " [" << f.rate_low_bps << ", "
                   << f.rate_high_bps << "]");
      CHECK(f.rate_high_bps - f.rate_low_bps <= 2 * ShaperOptions{}.max_rate_spread * f.rate_bps);
    }
  }
  // (Without the rule, 5 of these 10 were found, two with +-18%.)
  CHECK(refused >= 2);
  CHECK(found <= 3);
  // Without that jitter every one is found, its interval within +-10%.
  for (unsigned seed = 1; seed <= 10; ++seed) {
    Path p;
    p.rate_bps = 20e6;
    p.bucket_bytes = 300e3;
    p.queue_bytes = 1e9;
    const ShaperFinding f = run(p, 1.2e6, seed);
    REQUIRE(f.found);
    CHECK(f.rate_high_bps - f.rate_low_bps <= 0.2 * f.rate_bps);
  }
}

TEST_CASE("a stream passed whole: at our rate, or one line about as fast as the bucket's trains") {
  ShaperHints h;
  h.trigger = "replies_lost";
  h.fast_bps = 6e6;
  ShaperFinding f;
  f.reason = "no level shift";
  f.stream_rate_bps = 6.3e6;
  CHECK(stream_passed_whole(f, h));
  // Well above every train: load a small queue dropped, counted over the
  // bare-SYN markers' times (benchmark path 12), not a bucket.
  f.stream_rate_bps = 9.1e6;
  f.offered_bps = 865e6;
  CHECK_FALSE(stream_passed_whole(f, h));
  // Near our own sending (a sizing train a busy host slowed is a low
  // reference): passed whole.
  h.fast_bps = 500e6;
  f.stream_rate_bps = 0.8e9;
  CHECK(stream_passed_whole(f, h));
  h.fast_bps = 6e6;
  f.stream_rate_bps = 4.0e6;  // compressed below the trains
  CHECK_FALSE(stream_passed_whole(f, h));
  // After capacity_lower_bound the trains read our own sending: any rate
  // from 0.8 of them up.
  h.trigger = "capacity_lower_bound";
  h.fast_bps = 1.2e9;
  f.stream_rate_bps = 0.976e9;
  CHECK(stream_passed_whole(f, h));
  f.stream_rate_bps = 1.6e9;
  CHECK(stream_passed_whole(f, h));
  // A stream that showed a shift, or came back at our rate.
  f.reason = "burst too small";
  CHECK_FALSE(stream_passed_whole(f, h));
  f.uncompressed = true;
  CHECK(stream_passed_whole(f, h));
}

TEST_CASE("the routine check's stream and markers", "[shaper][routine]") {
  // A tenth of a second at the trains' rate, 64 KB to 1 MB.
  CHECK(routine_stream_bytes(1e6) == Approx(64e3));
  CHECK(routine_stream_bytes(20e6) == Approx(250e3));
  CHECK(routine_stream_bytes(100e6) == Approx(1e6));
  CHECK(routine_stream_bytes(1e9) == Approx(1e6));
  // A quarter second of the reply budget, 24 at most; none under 12 or when
  // the target answers fewer at once.
  CHECK(routine_markers(100, ReplyGovernor::kNoBurstLimit) == 24);
  CHECK(routine_markers(60, ReplyGovernor::kNoBurstLimit) == 15);
  CHECK(routine_markers(48, ReplyGovernor::kNoBurstLimit) == 12);
  CHECK(routine_markers(47, ReplyGovernor::kNoBurstLimit) == 0);
  CHECK(routine_markers(20, ReplyGovernor::kNoBurstLimit) == 0);
  CHECK(routine_markers(100, 5) == 0);
  CHECK(routine_markers(100, 24) == 24);
}

TEST_CASE("a shift inside an earlier stream that came back whole is no bucket", "[shaper]") {
  // The lab's unshaped 1 Gbit/s path: 4.1 MB whole at 971 Mbit/s, then a
  // 10.2 MB stream whose tail lost its replies "shifted" to 641 Mbit/s 364 KB in.
  CHECK(shift_refuted_by_whole_stream(364e3, 641e6, 4.1e6, 971e6));
  // A shift past the whole stream's end: a larger bucket it did not empty.
  CHECK_FALSE(shift_refuted_by_whole_stream(5e6, 641e6, 4.1e6, 971e6));
  // A sustained rate about the whole stream's own: it could not tell.
  CHECK_FALSE(shift_refuted_by_whole_stream(364e3, 920e6, 4.1e6, 971e6));
  // Nothing known: nothing refuted.
  CHECK_FALSE(shift_refuted_by_whole_stream(364e3, 641e6, 0, 971e6));
  CHECK_FALSE(shift_refuted_by_whole_stream(364e3, 0, 4.1e6, 971e6));
  CHECK_FALSE(shift_refuted_by_whole_stream(0, 641e6, 4.1e6, 971e6));
}

TEST_CASE("a refuted bucket gives the capacity back to the trains", "[shaper]") {
  // The random-path benchmark's path 7 at 86b52ad: trains 9.90 Mbit/s, the
  // streams a "bucket" of 28 KB sustained at 4.70 behind this host's on/off
  // traffic in our own queue.
  CapacityResult res;
  res.valid = true;
  res.capacity_bps = 9.90e6;
  res.low_bps = 9.88e6;
  res.high_bps = 9.92e6;
  res.kde_bandwidth_bps = 1e4;
  res.warnings.push_back({WarningCode::kSlopeTooNoisy, "noisy"});
  ShaperRecord rec;
  rec.probed = true;
  rec.found = true;
  rec.verdict = "found";
  rec.rate_bps = 4.70e6;
  rec.rate_low_bps = 4.28e6;
  rec.rate_high_bps = 5.22e6;
  rec.peak_bps = 9.91e6;
  rec.bucket_bytes = 28e3;
  rec.streams = 4;
  auto has = [&](WarningCode code) {
    return std::any_of(res.warnings.begin(), res.warnings.end(),
                       [&](const Warning& w) { return w.code == warning_name(code); });
  };
  // Without a snapshot (nothing applied) there is nothing to undo.
  CHECK_FALSE(unapply_shaper(res, 2));
  apply_shaper(rec, res);
  REQUIRE(res.capacity_bps == 4.70e6);
  REQUIRE(res.capacity_source == "shaper_stream");
  CHECK_FALSE(has(WarningCode::kSlopeTooNoisy));
  // A warning added after the shaper (a check's) stays.
  res.warnings.push_back({WarningCode::kSendStalls, "stalls"});
  res.shaper.refill_pairs = 0;
  res.shaper.refill_bytes = 800e3;
  REQUIRE(unapply_shaper(res, 2));
  CHECK(res.capacity_bps == 9.90e6);
  CHECK(res.capacity_source == "rst_trains");
  CHECK(res.kde_bandwidth_bps == 1e4);
  // The interval, with the systematic margin every estimate gets.
  CHECK(res.low_bps <= 9.88e6);
  CHECK(res.high_bps >= 9.92e6);
  CHECK(res.low_bps < res.capacity_bps);
  CHECK(res.valid);
  CHECK_FALSE(res.lower_bound);
  CHECK(has(WarningCode::kSlopeTooNoisy));
  CHECK(has(WarningCode::kSendStalls));
  CHECK(has(WarningCode::kShaperRefuted));
  CHECK_FALSE(has(WarningCode::kTokenBucket));
  CHECK_FALSE(res.shaper.found);
  CHECK(res.shaper.verdict == kShaperRefutedVerdict);
  CHECK(res.shaper.streams == 4);
  CHECK(res.shaper.refill_bytes == 800000u);
  // Once: the snapshot is spent.
  CHECK_FALSE(unapply_shaper(res, 2));
}

TEST_CASE("the search after a refuted refill carries the refill's pairs and costs", "[shaper]") {
  AvailbwResult refill;
  refill.rates.resize(2);
  refill.rates[0].phase = refill.rates[1].phase = "shaper_refill";
  refill.trains_sent = 4;
  refill.elapsed_s = 3.0;
  refill.probe_bytes = 800000;
  refill.probe_packets = 560;
  refill.warnings.push_back({WarningCode::kTokenBucket, "bucket"});
  refill.warnings.push_back({WarningCode::kSendStalls, "stalls"});
  AvailbwResult search;
  search.valid = true;
  search.availbw_bps = 3.7e6;
  search.rates.resize(5);
  search.trains_sent = 30;
  search.elapsed_s = 4.0;
  search.probe_bytes = 500000;
  search.probe_packets = 400;
  merge_refill(search, refill);
  CHECK(search.valid);
  CHECK(search.availbw_bps == 3.7e6);
  REQUIRE(search.rates.size() == 7);
  CHECK(search.rates[0].phase == "shaper_refill");
  CHECK(search.trains_sent == 34);
  CHECK(search.elapsed_s == Approx(7.0));
  CHECK(search.probe_bytes == 1300000);
  CHECK(search.probe_packets == 960);
  REQUIRE(search.warnings.size() == 1);
  CHECK(search.warnings[0].code == "send_stalls");
}

TEST_CASE("lost replies suggest a bucket when tails go train after train, not when a lossy wire "
          "takes warm-ups and heads as well", "[shaper]") {
  // Two of the last four trains lost their tail, no early loss: a bucket.
  CHECK(lost_replies_suggest_bucket(2, 0, 2));
  // The same with the early losses a lossy wire also makes.
  CHECK_FALSE(lost_replies_suggest_bucket(2, 2, 2));
  CHECK_FALSE(lost_replies_suggest_bucket(3, 2, 2));
  CHECK(lost_replies_suggest_bucket(4, 2, 3));
  // Tails lost far apart (at most one in the last four trains).
  CHECK_FALSE(lost_replies_suggest_bucket(5, 0, 1));
  CHECK_FALSE(lost_replies_suggest_bucket(0, 0, 0));
}
