// Safety caps: --max-rate in the plan (the pacer's refusal uses
// planned_peak_rate), refused targets on this host's own subnets.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "app/cli.hpp"
#include "app/net.hpp"
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

TEST_CASE("planned peak rate of trains", "[plan][safety]") {
  CapacityTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.load_packets = 20;
  SeqAllocator seqs(1);
  // Back to back: line rate, which no finite cap allows.
  CHECK(std::isinf(planned_peak_rate(make_capacity_train(p, 0, seqs))));
  // Capped: every packet waits for the previous one's bits at the cap.
  for (double cap : {1e9, 9e8, 123.4e6, 100e3}) {
    p.gap = p.drain_gap = 0;
    p.warmup_lead = 50 * kUs;
    apply_rate_cap(p, cap);
    const Train t = make_capacity_train(p, 1, seqs);
    INFO(cap);
    CHECK(planned_peak_rate(t) <= cap);
    CHECK(planned_peak_rate(t) >= 0.999 * cap);                     // and not needlessly slower
    CHECK(t.probes[2].offset - t.probes[1].offset == p.drain_gap);  // drain packets spaced
  }
  // Paced avail-bw trains with back-to-back drain packets exceed any cap;
  // apply_rate_cap spaces the drain and keeps the slower pacing.
  p.gap = gap_for_rate(60e6, 1500);
  p.drain_gap = 0;
  p.warmup_lead = 50 * kUs;
  CHECK(std::isinf(planned_peak_rate(make_capacity_train(p, 2, seqs))));
  apply_rate_cap(p, 1e9);
  CHECK(p.gap == gap_for_rate(60e6, 1500));
  CHECK(planned_peak_rate(make_capacity_train(p, 2, seqs)) <= 1e9);
  p.drain_packets = 0;
  CHECK(planned_peak_rate(make_capacity_train(p, 3, seqs)) == Approx(60e6).epsilon(1e-6));
  CHECK(planned_peak_rate(Train{}) == 0);
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
// back-to-back train with max_rate_exceeded, and kept every gap of the capped
// train at or above the previous packet's bits at the cap.
int pacer_cap_checks() {
  if (unshare(CLONE_NEWNET) != 0) return 10;
  try {
    RawSocket sock("", 1 << 20);
    PacerOptions opt;
    opt.max_rate_bps = 100e6;
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
    const Train paced = make_capacity_train(p, 1, seqs);
    const auto rec = pacer.send(paced, bytes_of(paced), nullptr);
    for (std::size_t i = 1; i < rec.size(); ++i) {
      const double min_gap = 8.0 * paced.probes[i - 1].ip_len * 1e9 / opt.max_rate_bps;
      if (static_cast<double>(rec[i].actual - rec[i - 1].actual) < min_gap - 1) return 13;
    }
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
