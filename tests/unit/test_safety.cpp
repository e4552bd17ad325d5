// Safety caps: --max-rate in the plan (the pacer's refusal uses
// first_over_rate), refused targets on this host's own subnets.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "app/frontends/cli.hpp"
#include "app/plumbing/net.hpp"
#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"

using namespace lw;

TEST_CASE("--max-rate parses with suffixes and refuses absurd values", "[cli][safety]") {
  CHECK(parse_cli({"capacity", "x"}).config.max_rate_bps == 1e9);
  CHECK(parse_cli({"capacity", "x", "--max-rate", "250M"}).config.max_rate_bps == 250e6);
  CHECK(parse_cli({"capacity", "x", "--max-rate", "10G"}).config.max_rate_bps == 10e9);
  for (const char* bad : {"0", "-5M", "50", "1T", "200G", "1e300", "inf", "fast", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_cli({"capacity", "x", "--max-rate", bad}), UsageError);
  }
}

TEST_CASE("--max-rate as a token bucket over planned schedules", "[plan][safety]") {
  CapacityTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.load_packets = 20;
  SeqAllocator seqs(1);
  // Back to back (line rate): the warm-up, the drain pair and the head fit
  // the burst; the first load packet (index 4) does not.
  CHECK(first_over_rate(make_capacity_train(p, 0, seqs), 1e9) == 4);
  for (double cap : {1e9, 9e8, 123.4e6, 100e3}) {
    CapacityTrainParams q = p;
    apply_rate_cap(q, cap);
    const Train t = make_capacity_train(q, 1, seqs);
    INFO(cap);
    CHECK(first_over_rate(t, cap) == -1);
    // Not needlessly slower: the load leaves at >= 97% of the cap.
    CHECK(8.0 * q.packet_size / to_seconds(q.gap) >= 0.97 * cap);
    CHECK(q.drain_gap == 0);  // two drain packets fit the burst
  }
  // Many drain packets do not fit: apply_rate_cap spaces them.
  p.drain_packets = 16;
  CHECK(first_over_rate(make_capacity_train(p, 2, seqs), 1e9) == 3);
  apply_rate_cap(p, 1e9);
  CHECK(p.drain_gap > 0);
  CHECK(first_over_rate(make_capacity_train(p, 3, seqs), 1e9) == -1);
  // Sustained 1% over the cap lives on the burst for a while (no warm-up, no
  // drain: the bucket starts full), then is caught.
  CapacityTrainParams s = p;
  s.warmup = false;
  s.drain_packets = 0;
  s.drain_gap = 0;
  s.load_packets = 2000;
  s.gap = static_cast<Nanos>(0.99 * static_cast<double>(min_gap_for_rate(1e9, 1500)));
  const int over = first_over_rate(make_capacity_train(s, 4, seqs), 1e9);
  CHECK(over > 100);
  CHECK(over < 500);
  // Paced avail-bw trains slower than the cap need nothing (the drain pair is
  // a burst the bucket allows), and apply_rate_cap keeps their gap.
  CapacityTrainParams a = p;
  a.drain_packets = 2;
  a.drain_gap = 0;
  a.gap = gap_for_rate(60e6, 1500);
  CHECK(first_over_rate(make_capacity_train(a, 5, seqs), 1e9) == -1);
  apply_rate_cap(a, 1e9);
  CHECK(a.gap == gap_for_rate(60e6, 1500));
  // A marker riding right behind a load packet fits the 40 bytes of slack.
  Train r;
  for (int i = 0; i < 200; ++i) {
    Probe q;
    q.ip_len = 1500;
    q.offset = i * min_gap_for_rate(1e9, 1540);
    r.probes.push_back(q);
    if (i % 50 == 49) {
      q.ip_len = 40;
      r.probes.push_back(q);
    }
  }
  CHECK(first_over_rate(r, 1e9) == -1);
  CHECK(first_over_rate(Train{}, 1e9) == -1);
}

TEST_CASE("this host's own addresses and subnet broadcasts are refused", "[net][safety]") {
  // lo carries 127.0.0.1/8 on every Linux host.
  CHECK(local_target_reason(0x7f000001).find("an address of this host (lo)") != std::string::npos);
  CHECK(local_target_reason(0x7fffffff).find("broadcast address of 127.0.0.0/8") !=
        std::string::npos);
  CHECK(local_target_reason(0x7f000000).find("network address of 127.0.0.0/8") !=
        std::string::npos);
  CHECK(local_target_reason(0xC6130302).empty());  // 198.19.3.2: nothing local
}

TEST_CASE("SI values are plain decimals", "[cli][safety]") {
  for (const char* bad : {"0x10M", "inf", "nan", " 5M", "M", "+", "1e5e5", "5 M", "0X1"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_si(bad, "--max-rate"), UsageError);
  }
  CHECK(parse_si("1e3K", "x") == 1e6);
  CHECK_THROWS_WITH(parse_si("5X", "x"), Catch::Contains("unknown unit"));
  CHECK(parse_si("-2", "x") == -2);  // the caller's range check refuses it
  CHECK_THROWS_WITH(parse_cli({"capacity", "x", "--reply-timeout", "1e-9"}),
                    Catch::Contains("--reply-timeout must be between 0.001 and 10 seconds"));
}

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "send/pacer.hpp"
#include "send/packet_builder.hpp"
#include "send/raw_socket.hpp"

namespace {

// In the child: a new, empty network namespace (nothing can leave it), a raw
// socket, and the pacer under a 100 Mbit/s cap. Returns 0 if it refused the
// back-to-back train with max_rate_exceeded, and sent the capped train (twice
// in a row) at times that fit the bucket.
int pacer_cap_checks() {
  if (unshare(CLONE_NEWNET) != 0) return 10;
  try {
    RawSocket sock("", 1 << 20);
    PacerOptions opt;
    opt.max_rate_bps = 100e6;
    opt.lead = 1 * kUs;  // trains right after each other: the bucket carries over
    Pacer pacer(sock, opt);
    PacketBuilder builder;
    CapacityTrainParams p;
    p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
    p.load_packets = 30;
    SeqAllocator seqs(1);
    auto bytes_of = [&](const Train& t) {
      std::vector<std::vector<std::uint8_t>> b;
      for (const auto& q : t.probes) b.push_back(builder.build(q));
      return b;
    };
    const Train fast = make_capacity_train(p, 0, seqs);
    try {
      pacer.send(fast, bytes_of(fast), nullptr);
      return 11;  // sent a line-rate train under the cap
    } catch (const Error& e) {
      if (e.code() != "max_rate_exceeded") return 12;
    }
    apply_rate_cap(p, opt.max_rate_bps);
    p.warmup = false;  // its 50 us lead would refill the bucket between the trains
    const Train paced = make_capacity_train(p, 1, seqs);
    // Twice in a row: the second train starts with the bucket the first left,
    // which only the pacer's run-time bucket knows. The actual send times of
    // both, as one schedule, must fit the bucket.
    // The send times as a schedule, appended to `into`.
    auto as_sent = [](const Train& t, const std::vector<SendRecord>& rec, Train& into) {
      for (std::size_t i = 0; i < rec.size(); ++i) {
        Probe q;
        q.ip_len = t.probes[i].ip_len;
        q.offset = rec[i].actual;
        into.probes.push_back(q);
      }
    };
    Train actual;
    const auto paced_bytes = bytes_of(paced);
    for (int k = 0; k < 2; ++k) as_sent(paced, pacer.send(paced, paced_bytes, nullptr), actual);
    if (first_over_rate(actual, opt.max_rate_bps) != -1) return 13;
    // The prober drains its capture between the sends of a long train (the
    // capture ring holds about 64 ms of it): `between` runs where the pacer
    // would sleep anyway, at most every 1 ms (every 10 ms back to back), and
    // the cap still holds. 300 x 1500 bytes at 100 Mbit/s: 36 ms.
    p.load_packets = 300;
    const Train longer = make_capacity_train(p, 2, seqs);
    int calls = 0;
    Nanos last_call = 0, closest = kSec;
    const auto rec = pacer.send(longer, bytes_of(longer), nullptr, [&] {
      const Nanos t = mono_now();
      if (last_call > 0) closest = std::min(closest, t - last_call);
      last_call = t;
      ++calls;
    });
    Train sent_long;
    as_sent(longer, rec, sent_long);
    if (first_over_rate(sent_long, opt.max_rate_bps) != -1) return 15;
    if (calls < 3) return 16;  // at least every 10 ms over 36 ms
    if (closest < Pacer::kBetweenEvery) return 17;
  } catch (const Error&) {
    return 14;
  }
  return 0;
}

}  // namespace

TEST_CASE("the pacer refuses trains above --max-rate and never sends faster", "[send][safety]") {
  if (geteuid() != 0) {
    WARN("skipped: needs root for a raw socket in a private network namespace");
    return;
  }
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(pacer_cap_checks());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("space_to_rate makes any train fit the --max-rate bucket", "[safety]") {
  CapacityTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.load_packets = 50;
  SeqAllocator seqs(1);
  Train t = make_capacity_train(p, 0, seqs);  // back to back: line rate
  REQUIRE(first_over_rate(t, 100e6) >= 0);
  const Train before = t;
  space_to_rate(t, 100e6);
  CHECK(first_over_rate(t, 100e6) == -1);
  // Order kept, nothing earlier than planned, and no slower than needed: the
  // span is what 100 Mbit/s needs for the bytes beyond the burst, plus rounding.
  double bytes = 0;
  for (std::size_t i = 0; i < t.probes.size(); ++i) {
    CHECK(t.probes[i].offset >= before.probes[i].offset);
    if (i > 0) CHECK(t.probes[i].offset >= t.probes[i - 1].offset);
    bytes += t.probes[i].ip_len;
  }
  const double span = to_seconds(t.probes.back().offset - t.probes.front().offset);
  CHECK(span <= (bytes - t.probes.back().ip_len) * 8 / 100e6 + 1e-4);
  // A train already slow enough is left alone.
  p.gap = gap_for_rate(50e6, 1500);
  p.drain_packets = 0;
  const Train paced = make_capacity_train(p, 1, seqs);
  Train slow = paced;
  space_to_rate(slow, 100e6);
  for (std::size_t i = 0; i < slow.probes.size(); ++i) {
    CHECK(slow.probes[i].offset == paced.probes[i].offset);
  }
}
