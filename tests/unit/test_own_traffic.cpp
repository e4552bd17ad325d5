// This host's own traffic from its interface counters (estimate/own_traffic)
// and the avail-bw `measure` takes from it when the narrow link is our own
// interface (app/runs/availbw_run: add_availbw).
#include <catch2/catch.hpp>

#include <algorithm>
#include <utility>
#include <vector>

#include "app/runs/availbw_run.hpp"
#include "app/runs/capacity_run.hpp"
#include "estimate/own_qdisc.hpp"
#include "estimate/own_traffic.hpp"
#include "report/warning_codes.hpp"

using namespace lw;

namespace {

// Samples every `step_s` over `span_s`: other traffic at `other_bps(t)`
// (IP bytes of `pkt`-byte packets, counted with a 14-byte header), and our
// own probes at `ours_bps` in 1500-byte packets.
std::vector<CounterSample> counters(double span_s, double step_s, double ours_bps,
                                    double (*other_bps)(double), int pkt = 1500) {
  std::vector<CounterSample> v;
  double other_ip = 0, ours_ip = 0, t = 0;
  for (int i = 0; t <= span_s + 1e-9; ++i, t = i * step_s) {
    CounterSample s;
    s.t_s = t;
    const double other_pkts = other_ip / pkt, ours_pkts = ours_ip / 1500;
    s.our_bytes = static_cast<std::uint64_t>(ours_ip);
    s.our_packets = static_cast<std::uint64_t>(ours_pkts);
    s.tx_bytes = static_cast<std::uint64_t>(other_ip + 14 * other_pkts + ours_ip + 14 * ours_pkts);
    s.tx_packets = static_cast<std::uint64_t>(other_pkts + ours_pkts);
    v.push_back(s);
    other_ip += other_bps(t) * step_s / 8;
    ours_ip += ours_bps * step_s / 8;
  }
  return v;
}

double steady(double) { return 20e6; }
double on_off(double t) { return static_cast<int>(t) % 2 == 0 ? 30e6 : 10e6; }

}  // namespace

TEST_CASE("own traffic: the other traffic's rate on the link, our probes taken out",
          "[own_traffic]") {
  const OwnTraffic o = own_traffic(counters(4, 0.1, 5e6, steady), 14);
  REQUIRE(o.valid);
  CHECK(o.window_s == Approx(4).epsilon(0.01));
  // 20 Mbit/s of IP bytes in 1500-byte packets: 20 * 1514/1500 with headers.
  CHECK(o.link_bps == Approx(20e6 * 1514 / 1500).epsilon(0.005));
  CHECK(o.low_bps == Approx(o.link_bps).epsilon(0.01));
  CHECK(o.high_bps == Approx(o.link_bps).epsilon(0.01));
  CHECK(o.bins == 8);
  // The link's avail-bw for 1500-byte packets: C less 20 Mbit/s.
  CHECK(link_availbw(50e6 * 1500 / 1514, o.link_bps, 1500, 14) ==
        Approx(50e6 * 1500 / 1514 - 20e6).epsilon(0.005));
}

TEST_CASE("own traffic: a queue draining at the start counts what arrived, not what left",
          "[own_traffic]") {
  // A 50 Mbit/s link (with headers) whose other traffic arrives at 40. Our
  // earlier trains left 250 KB of it queued: it drains at 10 Mbit/s over
  // the link's 50 for the first 0.2 s, all of it leaving at 50 then. Counted
  // by what left, the first half second reads 44; by what arrived, 40.
  const double link = 50e6, arrive = 40e6, queued0 = 250e3 * 8;
  std::vector<CounterSample> v;
  double left_bits = 0, backlog = queued0;
  for (int i = 0; i <= 40; ++i) {
    const double t = 0.1 * i;
    CounterSample s;
    s.t_s = t;
    s.tx_bytes = static_cast<std::uint64_t>(left_bits / 8);
    s.tx_packets = static_cast<std::uint64_t>(left_bits / 8 / 1514);
    s.backlog_bytes = static_cast<std::int64_t>(backlog / 8);
    v.push_back(s);
    // Over the next 0.1 s: arrivals at 40; the queue drains at 50 while it
    // holds anything.
    const double in = arrive * 0.1;
    const double out = std::min(link * 0.1, backlog + in);
    left_bits += out;
    backlog += in - out;
  }
  const std::vector<CounterSample> first(v.begin(), v.begin() + 6);  // 0.5 s
  const OwnTraffic o = own_traffic(first, 14);
  REQUIRE(o.valid);
  CHECK(o.link_bps == Approx(arrive).epsilon(0.01));
  // The same samples without the backlog read what left.
  std::vector<CounterSample> blind = first;
  for (auto& s : blind) s.backlog_bytes = -1;
  const OwnTraffic b = own_traffic(blind, 14);
  REQUIRE(b.valid);
  CHECK(b.link_bps == Approx(arrive + queued0 / 0.5).epsilon(0.01));
  // One reading without it: what left (the correction needs both ends).
  blind = first;
  blind.back().backlog_bytes = -1;
  CHECK(own_traffic(blind, 14).link_bps == Approx(b.link_bps));
  // Over the whole 4 s (the first queue was 2 Mbit of 160 that left): 40.
  CHECK(own_traffic(v, 14).link_bps == Approx(arrive).epsilon(0.01));
}

TEST_CASE("own traffic: bins show how it varied, the mean over the window is exact",
          "[own_traffic]") {
  const OwnTraffic o = own_traffic(counters(4, 0.1, 0, on_off), 14);
  REQUIRE(o.valid);
  CHECK(o.link_bps == Approx(20e6 * 1514 / 1500).epsilon(0.03));
  CHECK(o.low_bps == Approx(10e6 * 1514 / 1500).epsilon(0.05));
  CHECK(o.high_bps == Approx(30e6 * 1514 / 1500).epsilon(0.05));
}

TEST_CASE("own traffic: small packets take more of the link than their IP bytes",
          "[own_traffic]") {
  // 10 Mbit/s of 100-byte packets: 11.4 with their headers, and that is
  // what they take of a shaper that counts headers.
  const OwnTraffic o = own_traffic(counters(2, 0.1, 0, [](double) { return 10e6; }, 100), 14);
  REQUIRE(o.valid);
  CHECK(o.link_bps == Approx(11.4e6).epsilon(0.01));
  CHECK(link_availbw(49.5e6, o.link_bps, 1500, 14) == Approx(49.5e6 - 11.4e6 * 1500 / 1514));
  // A tunnel: no header.
  CHECK(link_availbw(20e6, 5e6, 1500, 0) == Approx(15e6));
  CHECK(link_availbw(20e6, 30e6, 1500, 0) == 0);
}

TEST_CASE("own traffic: too few or inconsistent samples say nothing", "[own_traffic]") {
  CHECK_FALSE(own_traffic({}, 14).valid);
  std::vector<CounterSample> v = counters(2, 0.1, 0, steady);
  CHECK_FALSE(own_traffic({v.front()}, 14).valid);
  CHECK_FALSE(own_traffic({v[0], v[1]}, 14).valid);  // 0.1 s: under the window floor
  // Counters that ran backwards (the interface was reset).
  std::vector<CounterSample> reset = v;
  reset[10].tx_bytes = 0;
  reset[10].tx_packets = 0;
  CHECK_FALSE(own_traffic(reset, 14).valid);
  // Our own bytes beyond the count (probes our qdisc dropped): none, not negative.
  std::vector<CounterSample> ours = counters(1, 0.1, 0, [](double) { return 0.0; });
  for (auto& s : ours) s.our_bytes = static_cast<std::uint64_t>(s.t_s * 1e6);
  const OwnTraffic z = own_traffic(ours, 14);
  REQUIRE(z.valid);
  CHECK(z.link_bps == 0);
}

namespace {

// A capacity phase that read C in [low, high], the narrow link not ours.
MeasureResult measured_capacity(double C, double low, double high) {
  MeasureResult m;
  m.capacity.valid = true;
  m.capacity.capacity_bps = C;
  m.capacity.low_bps = low;
  m.capacity.high_bps = high;
  return m;
}

MeasureResult local_narrow(double C) {
  MeasureResult m = measured_capacity(C, 0.99 * C, 1.01 * C);
  m.capacity.warnings.push_back({WarningCode::kLocalBottleneck, "spread when they left"});
  return m;
}

AvailbwResult searched(double C, double a_bps, double other_link_bps) {
  AvailbwResult a;
  a.valid = true;
  a.availbw_bps = a_bps;
  a.low_bps = 0.9 * a_bps;
  a.high_bps = std::min(C, 1.1 * a_bps);
  a.search_capacity_bps = C;
  a.basis = "response_curve";
  a.own_traffic.valid = true;
  a.own_traffic.interface = "dn";
  a.own_traffic.l2_header = 14;
  a.own_traffic.packet_size = 1500;
  a.own_traffic.window_s = 8;
  a.own_traffic.link_bps = other_link_bps;
  a.own_traffic.low_bps = 0.8 * other_link_bps;
  a.own_traffic.high_bps = 1.2 * other_link_bps;
  a.own_traffic.bins = 16;
  return a;
}

bool warned(const AvailbwResult& a, const char* code) {
  for (const Warning& w : a.warnings) {
    if (w.code == code) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("measure: our own narrow interface's counters bound the avail-bw", "[own_traffic]") {
  const double C = 5.4e6;
  // Benchmark path 10: 5.5 Mbit/s on our own interface, 1.21 of TCP from
  // this host through the same qdisc; the trains read 5.12.
  const double other = 1.21e6 * 1514 / 1500;
  MeasureResult m = local_narrow(C);
  add_availbw(m, searched(C, 5.12e6, other), 0);
  const AvailbwResult& a = m.availbw;
  CHECK(a.availbw_bps == Approx(C - 1.21e6).epsilon(0.001));
  CHECK(a.basis == "own_interface_counters");
  CHECK(a.own_traffic.applied);
  CHECK(warned(a, "own_traffic"));
  CHECK(a.low_bps <= a.availbw_bps);
  CHECK(a.high_bps >= a.availbw_bps);
  // The range: the capacity's interval and the busiest and quietest bins.
  CHECK(a.low_bps == Approx(0.99 * C - 1.2 * 1.21e6).epsilon(0.001));
  CHECK(a.high_bps == Approx(1.01 * C - 0.8 * 1.21e6).epsilon(0.001));

  SECTION("the search read a little lower, its range holding the counters' value: they are "
          "the estimate, the range both") {
    MeasureResult m1 = local_narrow(C);
    add_availbw(m1, searched(C, 4.0e6, other), 0);  // range [3.6, 4.4]
    CHECK(m1.availbw.availbw_bps == Approx(C - 1.21e6).epsilon(0.001));
    // The search's range [3.6, 4.4] and the bins' (0.8 and 1.2 x the mean).
    CHECK(m1.availbw.low_bps == Approx(3.6e6));
    CHECK(m1.availbw.high_bps == Approx(1.01 * C - 0.8 * 1.21e6).epsilon(0.001));
    CHECK(m1.availbw.own_traffic.applied);
    CHECK(warned(m1.availbw, "own_traffic"));
  }
  SECTION("the search read far lower: another link is tighter, the search stands") {
    MeasureResult m2 = local_narrow(C);
    add_availbw(m2, searched(C, 3.0e6, other), 0);
    CHECK(m2.availbw.availbw_bps == 3.0e6);
    CHECK(m2.availbw.basis == "response_curve");
    CHECK_FALSE(m2.availbw.own_traffic.applied);
    CHECK_FALSE(warned(m2.availbw, "own_traffic"));
  }
  SECTION("just past the search's range, within its resolution: the counters") {
    // Benchmark path 46 at 999e704: our 25.3 Mbit/s interface, 4.97 of
    // on/off of this host; a fleet at 19.1 read "above" and the search said
    // 12.74 in [5.22, 19.87] (resolution 0.76): truth 20.39.
    const double c46 = 25.34e6;
    const double other46 = 4.97e6 * 1514 / 1500;
    MeasureResult m5 = local_narrow(c46);
    AvailbwResult a5 = searched(c46, 12.74e6, other46);
    a5.low_bps = 5.22e6;
    a5.high_bps = 19.87e6;
    a5.resolution_bps = 0.03 * c46;
    MeasureResult m6 = m5;
    AvailbwResult a6 = a5;
    add_availbw(m5, a5, 0);
    CHECK(m5.availbw.own_traffic.applied);
    CHECK(m5.availbw.availbw_bps == Approx(c46 - 4.97e6).epsilon(0.001));
    CHECK(m5.availbw.low_bps == Approx(5.22e6));
    CHECK(m5.availbw.high_bps >= m5.availbw.availbw_bps);
    // By more than the resolution: a tighter link after ours...
    a6.resolution_bps = 0.3e6;
    MeasureResult m7 = m6;
    AvailbwResult a7 = a6;
    add_availbw(m6, a6, 0);
    // ... unless the range reached 0.9 of the counters' 20.37 (19.87 does):
    // from there up the trains are judged as sent, and our own queue's
    // bursts read as the path (kOwnLinkFree).
    CHECK(m6.availbw.own_traffic.applied);
    a7.high_bps = 18.0e6;
    add_availbw(m7, a7, 0);
    CHECK_FALSE(m7.availbw.own_traffic.applied);
    CHECK(m7.availbw.availbw_bps == 12.74e6);
  }
  SECTION("the narrow link is not our own interface, no qdisc rate: the counters say nothing "
          "of it") {
    MeasureResult m3 = local_narrow(C);
    m3.capacity.warnings.clear();
    add_availbw(m3, searched(C, 5.12e6, other), 0);
    CHECK(m3.availbw.availbw_bps == 5.12e6);
    CHECK_FALSE(m3.availbw.own_traffic.applied);
  }
  SECTION("no counters read") {
    MeasureResult m4 = local_narrow(C);
    AvailbwResult a4 = searched(C, 5.12e6, other);
    a4.own_traffic.valid = false;
    add_availbw(m4, a4, 0);
    CHECK(m4.availbw.availbw_bps == 5.12e6);
  }
}

TEST_CASE("measure: our own tight interface's counters where the search reached 0.9 of them",
          "[own_traffic]") {
  // The lab's local_tight_remote_narrow_tcp: our own tbf of 100 Mbit/s
  // (99.08 at the IP layer), 75% of it TCP of this host, an idle 40 Mbit/s
  // link after it (the narrow one). The search read 20.19 in [12.73, 23.68]
  // for 24.75: under 0.9 x our link's avail-bw its trains are judged on the
  // lower view, over it as sent, and the bursts of TCP in our queue read
  // "above" there.
  const double rate = 100e6, ip = rate * 1500 / 1514;
  const double other_ip = 74.33e6, other = other_ip * 1514 / 1500;
  MeasureResult m = measured_capacity(39.6e6, 39.2e6, 40.0e6);
  AvailbwResult a = searched(39.6e6, 20.19e6, other);
  a.low_bps = 12.73e6;
  a.high_bps = 23.68e6;
  a.own_traffic.qdisc_kind = "tbf";
  a.own_traffic.qdisc_rate_bps = rate;
  AvailbwResult far = a;
  add_availbw(m, a, 0);
  CHECK(m.availbw.own_traffic.applied);
  CHECK(m.availbw.basis == "own_interface_counters");
  CHECK(m.availbw.availbw_bps == Approx(ip - other_ip).epsilon(0.001));
  // The range: both the search's and the bins' (here 0.8 to 1.2 x the mean,
  // the upper end up to the capacity's interval: the search's ended at C).
  CHECK(m.availbw.low_bps == Approx(ip - 1.2 * other_ip).epsilon(0.001));
  CHECK(m.availbw.high_bps >= ip - 0.8 * other_ip);
  CHECK(m.availbw.high_bps <= m.capacity.high_bps);
  SECTION("a range that stops short of it: a tighter link after ours") {
    far.high_bps = 21.0e6;  // under 0.9 x 24.75
    MeasureResult m2 = m;
    m2.availbw = AvailbwResult();
    add_availbw(m2, far, 0);
    CHECK_FALSE(m2.availbw.own_traffic.applied);
    CHECK(m2.availbw.availbw_bps == 20.19e6);
  }
}

TEST_CASE("measure: no traffic of this host in our queue: the counters do not override the search",
          "[own_traffic]") {
  // Benchmark path 39 at d5c039b: our own 6.54 Mbit/s htb (6.48 at the IP
  // layer) with no other traffic, Poisson at 60% of a 7.85 Mbit/s link two
  // hops on (truth 3.10). The crossing read 3.69, the search's range [0,
  // 7.0] reached our link's rate; the counters' 6.48 was reported (+109%).
  const double rate = 6.54e6, ip = rate * 1500 / 1514;
  auto path39 = [&](double other_link_bps) {
    AvailbwResult a = searched(ip, 3.69e6, other_link_bps);
    a.low_bps = 0;
    a.high_bps = 7.0e6;
    a.own_traffic.qdisc_kind = "htb";
    a.own_traffic.qdisc_rate_bps = rate;
    return a;
  };
  MeasureResult m = measured_capacity(ip, 0.99 * ip, 1.2 * ip);
  add_availbw(m, path39(0), 0);
  CHECK_FALSE(m.availbw.own_traffic.applied);
  CHECK(m.availbw.availbw_bps == 3.69e6);
  CHECK(m.availbw.basis == "response_curve");
  CHECK_FALSE(warned(m.availbw, "own_traffic"));
  SECTION("a trickle under 5% of our link in every bin: the same") {
    MeasureResult m2 = measured_capacity(ip, 0.99 * ip, 1.2 * ip);
    add_availbw(m2, path39(0.03 * rate), 0);  // busiest bin 1.2 x 3%
    CHECK_FALSE(m2.availbw.own_traffic.applied);
    CHECK(m2.availbw.availbw_bps == 3.69e6);
  }
  SECTION("traffic of this host that could fill our queue: the counters, as before") {
    MeasureResult m2 = measured_capacity(ip, 0.99 * ip, 1.2 * ip);
    AvailbwResult a = path39(0.4 * rate);
    a.availbw_bps = 3.6e6;  // within the range, under our link's 3.9
    add_availbw(m2, a, 0);
    CHECK(m2.availbw.own_traffic.applied);
    CHECK(m2.availbw.availbw_bps == Approx(ip - 0.4 * rate * 1500 / 1514).epsilon(0.001));
  }
  SECTION("our interface the narrow link (local_bottleneck), idle: the search stands too") {
    MeasureResult m2 = local_narrow(ip);
    add_availbw(m2, searched(ip, 0.995 * ip, 0), 0);
    CHECK_FALSE(m2.availbw.own_traffic.applied);
    CHECK(m2.availbw.basis == "response_curve");
  }
  SECTION("a search that read over our idle link's rate: the counters still cap it") {
    MeasureResult m2 = measured_capacity(ip, 0.99 * ip, 1.2 * ip);
    AvailbwResult a = path39(0);
    a.availbw_bps = 1.1 * ip;
    add_availbw(m2, a, 0);
    CHECK(m2.availbw.availbw_bps <= ip);
  }
}

TEST_CASE("measure: our own narrow interface's shaper rate is its capacity", "[own_traffic]") {
  // Benchmark path 54 at 999e704: an htb of 112.39 Mbit/s on our own
  // interface (111.35 at the IP layer), 91.9 Mbit/s of on/off from this host
  // through it; the capacity trains read 120.1 (+8%).
  const double rate = 112.39e6;
  const double ip = rate * 1500 / 1514;
  const double other = 91.9e6 * 1514 / 1500;  // on the wire
  const double C = 120.1e6;
  MeasureResult m = local_narrow(C);
  AvailbwResult a = searched(C, 29.0e6, other);
  a.low_bps = 1e6;
  a.high_bps = 55e6;
  a.own_traffic.qdisc_kind = "htb";
  a.own_traffic.qdisc_rate_bps = rate;
  add_availbw(m, a, 0);
  CHECK(m.availbw.own_traffic.applied);
  CHECK(m.availbw.basis == "own_interface_counters");
  CHECK(m.availbw.availbw_bps == Approx(ip - 91.9e6).epsilon(0.001));  // not C - 91.9
  // The range: the shaper's rate less the busiest and quietest bins.
  CHECK(m.availbw.low_bps == Approx(ip - 1.2 * 91.9e6).epsilon(0.001));
  CHECK(m.availbw.high_bps == Approx(ip - 0.8 * 91.9e6).epsilon(0.001));
  bool named = false;
  for (const Warning& w : m.availbw.warnings) {
    named = named || (w.code == "own_traffic" && w.message.find("htb shaper") != std::string::npos);
  }
  CHECK(named);
  // The capacity too: the shaper's IP-layer rate, not the trains' 120.1.
  CHECK(m.capacity.capacity_bps == Approx(ip));
  CHECK(m.capacity.capacity_source == "own_shaper");
  CHECK(m.capacity.high_bps >= ip + 8);  // the kernel's whole bytes per second
  CHECK(m.capacity.high_bps <= 1.001 * ip + 1);
  CHECK(m.capacity.low_bps == Approx(0.99 * ip));
  CHECK(m.capacity.warnings.back().code == "capacity_from_own_shaper");
  CHECK(m.availbw.high_bps <= m.capacity.high_bps);
  SECTION("trains not spread leaving our interface: every packet still passes the shaper") {
    // (14 benchmark runs replayed: 17 capacities over 0.1% above our own
    // shaper, 4 of them without local_bottleneck, the shaper's rate the
    // truth in all.)
    MeasureResult m3 = local_narrow(C);
    m3.capacity.warnings.clear();
    AvailbwResult b = searched(C, 29.0e6, other);
    b.own_traffic.qdisc_kind = "htb";
    b.own_traffic.qdisc_rate_bps = rate;
    add_availbw(m3, b, 0);
    CHECK(m3.capacity.capacity_bps == Approx(ip));
    CHECK(m3.capacity.capacity_source == "own_shaper");
    CHECK(m3.capacity.warnings.back().message.find("every packet of ours") != std::string::npos);
  }
  SECTION("no shaper read: the capacity stays the trains'") {
    MeasureResult m3 = local_narrow(C);
    AvailbwResult b = searched(C, 29.0e6, other);
    add_availbw(m3, b, 0);
    CHECK(m3.capacity.capacity_bps == C);
    CHECK(m3.capacity.capacity_source != "own_shaper");
  }
  SECTION("a shaper faster than the trains read: the trains' capacity (a slower NIC)") {
    MeasureResult m2 = local_narrow(100e6);
    AvailbwResult b = searched(100e6, 10e6, other);
    b.high_bps = 15e6;
    b.own_traffic.qdisc_kind = "htb";
    b.own_traffic.qdisc_rate_bps = rate;
    add_availbw(m2, b, 0);
    CHECK(m2.availbw.own_traffic.applied);
    CHECK(m2.availbw.availbw_bps == Approx(100e6 - 91.9e6).epsilon(0.001));
    CHECK(m2.capacity.capacity_bps == 100e6);
    CHECK(m2.capacity.capacity_source != "own_shaper");
  }
}

TEST_CASE("measure: trains our own queue spread below its shaper, gaps above it", "[own_traffic]") {
  // Benchmark path 58 at 93287ab: a tbf of 147.96 Mbit/s on our own
  // interface (146.59 at the IP layer), 114.3 Mbit/s of this host's CBR
  // through it, links after it of 208 Mbit/s and more. The trains, spread by
  // our own queue before they left, read 74.3; the reply gaps of
  // back-to-back SYNs 209.8.
  const double rate = 147.96e6;
  const double ip = rate * 1500 / 1514;
  const double other = 114.33e6;
  auto path58 = [&](double gaps_bps) {
    MeasureResult m = measured_capacity(74.28e6, 72.0e6, 214.9e6);
    m.capacity.gap_check = {{"capacity_bps", gaps_bps}, {"min_delay_bps", 146.6e6}};
    // The hops phase named hop 4 (a 208 Mbit/s link with TCP after ours).
    for (double r : {105.2e6, 104.4e6, 104.4e6, 74.2e6}) {
      HopRecord h;
      h.used = true;
      h.rate_bps = r;
      h.choke_fraction = r < 100e6 ? 0.5 : 1.0;
      m.hops.hops.push_back(h);
    }
    m.hops.bottleneck_hop = m.hops.bottleneck_earliest_hop = 4;
    m.hops.warnings.push_back({WarningCode::kLowConfidence, "fewer than half"});
    return m;
  };
  auto search = [&] {
    AvailbwResult a = searched(74.28e6, 33.3e6, other);
    a.warnings.push_back({WarningCode::kLocalShaping, "28 of 63 trains spread before they left"});
    a.low_bps = 20e6;
    a.high_bps = 60e6;
    a.own_traffic.qdisc_kind = "tbf";
    a.own_traffic.qdisc_rate_bps = rate;
    return a;
  };
  MeasureResult m = path58(209.76e6);
  add_availbw(m, search(), 0);
  CHECK(m.capacity.capacity_bps == Approx(ip));
  CHECK(m.capacity.capacity_source == "own_shaper");
  CHECK(m.capacity.low_bps <= ip);
  CHECK(m.capacity.high_bps >= ip);
  CHECK(m.capacity.warnings.back().code == "capacity_from_own_shaper");
  CHECK(m.capacity.warnings.back().message.find("209.76") != std::string::npos);
  CHECK(m.availbw.high_bps <= m.capacity.high_bps);
  // The narrow link is ours: the bottleneck is the link into hop 1.
  CHECK(m.hops.bottleneck_hop == 1);
  CHECK(m.hops.bottleneck_earliest_hop == 1);
  CHECK(m.hops.bottleneck_rate_bps == 105.2e6);
  CHECK(m.hops.warnings.empty());
  SECTION("gaps below the shaper: a slower link after ours may be the narrow one") {
    MeasureResult m2 = path58(0.9 * ip);
    add_availbw(m2, search(), 0);
    CHECK(m2.capacity.capacity_bps == 74.28e6);
    CHECK(m2.capacity.capacity_source != "own_shaper");
    CHECK(m2.hops.bottleneck_hop == 4);
  }
  SECTION("the hops phase took a later hop's rate for the capacity: not our shaper") {
    // Seed 2028 at 7c5f399, paths 6 and 7: hop 1 read our shaper's rate,
    // a later hop slowed the trains and was taken (capacity_from_hop); the
    // gaps read a loaded link after that one.
    MeasureResult m2 = path58(209.76e6);
    m2.capacity.capacity_source = "hop_dispersion";
    m2.capacity.capacity_bps = 74.2e6;
    add_availbw(m2, search(), 0);
    CHECK(m2.capacity.capacity_bps == 74.2e6);
    CHECK(m2.capacity.capacity_source == "hop_dispersion");
    CHECK(m2.hops.bottleneck_hop == 4);
    // Hop 1 taken instead (the narrow link ours): the shaper's rate stands.
    MeasureResult m3 = path58(209.76e6);
    m3.capacity.capacity_source = "hop_dispersion";
    m3.capacity.capacity_bps = 105.2e6;
    m3.hops.bottleneck_hop = m3.hops.bottleneck_earliest_hop = 1;
    add_availbw(m3, search(), 0);
    CHECK(m3.capacity.capacity_bps == Approx(ip));
    CHECK(m3.capacity.capacity_source == "own_shaper");
  }
  SECTION("hop 1 read the shaper's rate: our queue did not slow the trains") {
    // Seed 2028 path 7 run again: hop 1 at 100.29 [98.93, 100.98] for our
    // 100.07 Mbit/s htb, trains 29.67 (a 40.9 Mbit/s link with CBR after it).
    auto at_shaper = [&](double trains_bps) {
      MeasureResult m2 = path58(209.76e6);
      m2.has_hops = true;
      m2.capacity.capacity_bps = trains_bps;
      HopRecord& h1 = m2.hops.hops.front();
      h1.rate_bps = 1.002 * ip;
      h1.rate_low_bps = 0.989 * ip;
      h1.rate_high_bps = 1.009 * ip;
      add_availbw(m2, search(), 0);
      return m2;
    };
    const MeasureResult far = at_shaper(0.30 * ip);
    CHECK(far.capacity.capacity_bps == Approx(0.30 * ip));
    CHECK(far.capacity.capacity_source != "own_shaper");
    // Trains a little under it (within 5%): the shaper's rate, as before.
    const MeasureResult near = at_shaper(0.97 * ip);
    CHECK(near.capacity.capacity_bps == Approx(ip));
    CHECK(near.capacity.capacity_source == "own_shaper");
  }
  SECTION("the least-delayed spans, the trains and a later hop agree: a slower link after ours") {
    // Seed 2039 path 43 at 472255b, scaled: trains 43.41, spans 43.50, hop
    // 2 43.66 for our 52.32 (IP) htb; here trains 74.28, spans 74.5.
    auto spans_at = [&](double spans_bps, double hop_bps) {
      MeasureResult m2 = path58(209.76e6);
      m2.capacity.gap_check["min_delay_bps"] = spans_bps;
      for (std::size_t k = 0; k < m2.hops.hops.size(); ++k) {
        m2.hops.hops[k].ttl = static_cast<int>(k) + 1;
      }
      m2.hops.hops[1].rate_bps = hop_bps;
      add_availbw(m2, search(), 0);
      return m2;
    };
    const MeasureResult slower = spans_at(74.5e6, 75.0e6);
    CHECK(slower.capacity.capacity_bps == 74.28e6);
    CHECK(slower.capacity.capacity_source != "own_shaper");
    // No hop after ours reads the spans (the fixture's hop 4, at 74.2, moved
    // to 90): the shaper stands.
    MeasureResult none = path58(209.76e6);
    none.capacity.gap_check["min_delay_bps"] = 74.5e6;
    for (std::size_t k = 0; k < none.hops.hops.size(); ++k) {
      none.hops.hops[k].ttl = static_cast<int>(k) + 1;
    }
    none.hops.hops[3].rate_bps = 90e6;
    add_availbw(none, search(), 0);
    CHECK(none.capacity.capacity_source == "own_shaper");
    // Spans that do not agree with the trains: the shaper stands.
    CHECK(spans_at(80e6, 80e6).capacity.capacity_source == "own_shaper");
  }
  SECTION("hop 1 and every hop up to the target's at the shaper, gaps above it: ours") {
    // Seed 2036 path 2 at d846b28: our 5.7 Mbit/s tbf, hops 1-3 at 5.63,
    // the target's 3.86 [2.91, 23.38] (TCP on the 23.5 Mbit/s link into
    // it), trains 2.97, gaps 23.34.
    auto unchanged = [&](double mid_rate, bool reached) {
      MeasureResult m2 = path58(209.76e6);
      m2.has_hops = true;
      m2.capacity.capacity_bps = 0.53 * ip;
      for (std::size_t k = 0; k < m2.hops.hops.size(); ++k) {
        HopRecord& h = m2.hops.hops[k];
        h.ttl = static_cast<int>(k) + 1;
        h.addr = "198.18." + std::to_string(k + 1) + ".2";
        h.rate_bps = k == 0 ? ip : mid_rate;
        h.rate_low_bps = 0.998 * h.rate_bps;
        h.rate_high_bps = 1.001 * h.rate_bps;
      }
      HopRecord& t = m2.hops.hops.back();
      t.rate_bps = 0.68 * ip;
      t.rate_low_bps = 0.52 * ip;
      t.rate_high_bps = 4.1 * ip;
      m2.hops.target_reached = reached;
      m2.hops.target_addr = t.addr;
      add_availbw(m2, search(), 0);
      return m2;
    };
    const MeasureResult mine = unchanged(0.999 * ip, true);
    CHECK(mine.capacity.capacity_bps == Approx(ip));
    CHECK(mine.capacity.capacity_source == "own_shaper");
    // A hop between ours and the target's read slower: the veto stands.
    CHECK(unchanged(0.9 * ip, true).capacity.capacity_source != "own_shaper");
    // The target not reached: nothing says which hops lie before it.
    CHECK(unchanged(0.999 * ip, false).capacity.capacity_source != "own_shaper");
  }
  SECTION("a hop after ours slowed every train far below the shaper: not our shaper") {
    // Seed 2031 at 556f335, path 58: our 127.3 Mbit/s tbf, hop 1 at 128.3,
    // hop 2 at 49.7 [44.7, 52.1] (a 58.7 link with on/off), trains 48.6, the
    // gaps squeezed to 190.1 by a busy 193.9 link after it.
    auto at_hop = [&](std::size_t i, double low, double mid, double high) {
      MeasureResult m2 = path58(209.76e6);
      m2.has_hops = true;
      for (std::size_t k = 0; k < m2.hops.hops.size(); ++k) {
        m2.hops.hops[k].ttl = static_cast<int>(k) + 1;
      }
      HopRecord& h = m2.hops.hops[i];
      h.rate_low_bps = low * ip;
      h.rate_bps = mid * ip;
      h.rate_high_bps = high * ip;
      h.choke_fraction = 1.0;
      add_availbw(m2, search(), 0);
      return m2;
    };
    // Its fastest train under half the shaper.
    const MeasureResult far = at_hop(1, 0.35, 0.39, 0.41);
    CHECK(far.capacity.capacity_bps == 74.28e6);
    CHECK(far.capacity.capacity_source != "own_shaper");
    // Every train within 5% of each other, over 10% below the shaper (seed
    // 2031 path 32: hop 2 at 7.7 [7.7, 8.0] for our 9.2 Mbit/s htb).
    CHECK(at_hop(1, 0.80, 0.81, 0.84).capacity.capacity_bps == 74.28e6);
    // ... within 10% of it: the shaper stands.
    CHECK(at_hop(1, 0.88, 0.89, 0.92).capacity.capacity_source == "own_shaper");
    // Spread by cross traffic, the fastest over half the shaper (a loaded
    // faster link after ours: seed 2029's paths 32 and 51): the shaper stands.
    const MeasureResult loaded = at_hop(1, 0.70, 0.76, 0.89);
    CHECK(loaded.capacity.capacity_bps == Approx(ip));
    CHECK(loaded.capacity.capacity_source == "own_shaper");
    // The same reading at hop 1, our own queue's: the rule's very case.
    CHECK(at_hop(0, 0.35, 0.39, 0.41).capacity.capacity_source == "own_shaper");
  }
  SECTION("no gap check: nothing says the links after ours are faster") {
    MeasureResult m2 = path58(0);
    m2.capacity.gap_check = nullptr;
    add_availbw(m2, search(), 0);
    CHECK(m2.capacity.capacity_bps == 74.28e6);
  }
  SECTION("trains not spread by our own queue: a remote link read them") {
    MeasureResult m2 = path58(209.76e6);
    AvailbwResult a = search();
    a.warnings.clear();
    add_availbw(m2, a, 0);
    CHECK(m2.capacity.capacity_bps == 74.28e6);
  }
  SECTION("no traffic of this host in our queue to explain the trains") {
    MeasureResult m2 = path58(209.76e6);
    AvailbwResult a = search();
    a.own_traffic.link_bps = 0.01 * ip;
    add_availbw(m2, a, 0);
    CHECK(m2.capacity.capacity_bps == 74.28e6);
  }
}

TEST_CASE("measure: our own narrow interface, trains spread below its shaper", "[own_traffic]") {
  // The lab's local_narrow_busy_remote (2026-11-29): our own tbf of 100
  // Mbit/s, 75 Mbit/s of this host's CBR through it, a 150 Mbit/s link after
  // it half loaded. The trains left our interface spread (local_bottleneck)
  // to 88.27, the gaps read 148.61; the avail-bw by the counters from the
  // trains' C read 13.96 (-44%).
  const double rate = 100e6, ip = rate * 1500 / 1514;
  const double other = 75.0e6;  // on the wire, as the counters count
  MeasureResult m = local_narrow(88.27e6);
  m.capacity.gap_check = {{"capacity_bps", 148.61e6}};
  AvailbwResult a = searched(88.27e6, 19.36e6, other);
  a.low_bps = 10.15e6;
  a.high_bps = 29.96e6;
  a.own_traffic.qdisc_kind = "tbf";
  a.own_traffic.qdisc_rate_bps = rate;
  add_availbw(m, a, 0);
  CHECK(m.capacity.capacity_bps == Approx(ip));
  CHECK(m.capacity.capacity_source == "own_shaper");
  CHECK(m.availbw.own_traffic.applied);
  CHECK(m.availbw.availbw_bps == Approx(ip - other * 1500 / 1514).epsilon(0.001));
  SECTION("gaps no faster than the trains: a slower NIC under the shaper") {
    MeasureResult m2 = local_narrow(88.27e6);
    m2.capacity.gap_check = {{"capacity_bps", 88.5e6}};
    add_availbw(m2, a, 0);
    CHECK(m2.capacity.capacity_bps == 88.27e6);
    CHECK(m2.availbw.availbw_bps == Approx(88.27e6 - other * 1500 / 1514).epsilon(0.001));
  }
}

TEST_CASE("capacity phase: a capacity above our own shaper's rate is that rate", "[own_traffic]") {
  const OwnShaper own{"dn", "tbf", 20e6, 20e6 * 1500 / 1514};
  CapacityResult r;
  r.valid = true;
  r.capacity_bps = 96.7e6;  // a bucket's bursts read at our line rate
  r.low_bps = 95e6;
  r.high_bps = 98e6;
  SECTION("an estimate") {
    CHECK(cap_at_own_shaper(r, own, false));
    CHECK(r.capacity_bps == Approx(own.ip_bps));
    CHECK(r.capacity_source == "own_shaper");
    CHECK(r.low_bps == Approx(0.99 * own.ip_bps));
    CHECK(r.high_bps == Approx(1.001 * own.ip_bps));
    CHECK(r.warnings.back().code == "capacity_from_own_shaper");
    CHECK(r.warnings.back().message.find("every packet of ours") != std::string::npos);
    CHECK_FALSE(cap_at_own_shaper(r, own, false));  // once
  }
  SECTION("a lower bound: every train at our own rate") {
    r.lower_bound = true;
    CHECK(cap_at_own_shaper(r, own, true));
    CHECK_FALSE(r.lower_bound);
    CHECK(r.warnings.back().message.find("at least 96.70") != std::string::npos);
  }
  SECTION("at or under the shaper's rate, a found bucket, a policer: left alone") {
    CapacityResult under = r;
    under.capacity_bps = 19e6;
    CHECK_FALSE(cap_at_own_shaper(under, own, false));
    CHECK(under.capacity_bps == 19e6);
    CapacityResult bucket = r;
    bucket.shaper.found = true;
    CHECK_FALSE(cap_at_own_shaper(bucket, own, false));
    CapacityResult policed = r;
    policed.capacity_source = "policer";
    CHECK_FALSE(cap_at_own_shaper(policed, own, false));
    CHECK_FALSE(cap_at_own_shaper(r, OwnShaper{}, false));  // no shaper read
    CHECK(r.capacity_bps == 96.7e6);
  }
}

TEST_CASE("own qdisc: the rate our probes and the host's traffic share", "[own_traffic]") {
  QdiscConfig tbf;
  tbf.root_kind = "tbf";
  tbf.root_handle = 0x10000;
  tbf.tbf_rate.bytes_per_s = 147958496.0 / 8;
  OwnQdisc q = own_qdisc_rate(tbf);
  REQUIRE(q.known);
  CHECK(q.kind == "tbf");
  CHECK(q.rate_bps == Approx(147958496.0));
  // IP capacity of 1500-byte packets, each counted with its 14-byte header.
  CHECK(qdisc_ip_capacity(q.rate_bps, q.overhead, 1500, 14) == Approx(147958496.0 * 1500 / 1514));
  // An overhead configured on the rate counts too.
  tbf.tbf_rate.overhead = 24;
  const OwnQdisc with_overhead = own_qdisc_rate(tbf);
  CHECK(qdisc_ip_capacity(with_overhead.rate_bps, with_overhead.overhead, 1500, 14) ==
        Approx(147958496.0 * 1500 / 1538));
  SECTION("ATM cells and size tables are not modelled") {
    QdiscConfig atm = tbf;
    atm.tbf_rate.linklayer = 2;
    CHECK_FALSE(own_qdisc_rate(atm).known);
    QdiscConfig stab = tbf;
    stab.size_table = true;
    CHECK_FALSE(own_qdisc_rate(stab).known);
  }
  SECTION("no shaper at the root") {
    QdiscConfig none;
    none.root_kind = "noqueue";
    const OwnQdisc n = own_qdisc_rate(none);
    CHECK_FALSE(n.known);
    CHECK(n.why_not.find("noqueue") != std::string::npos);
    CHECK_FALSE(own_qdisc_rate(QdiscConfig{}).known);
    CHECK(qdisc_ip_capacity(n.rate_bps, n.overhead, 1500, 14) == 0);
  }

  QdiscConfig htb;
  htb.root_kind = "htb";
  htb.root_handle = 0x10000;
  htb.htb_default = 0x20;
  HtbClass top, leaf, other;
  top.handle = 0x10001;
  top.parent = 0x10000;
  top.ceil.bytes_per_s = 50e6 / 8;
  leaf.handle = 0x10020;
  leaf.parent = 0x10001;
  leaf.ceil.bytes_per_s = 80e6 / 8;  // may borrow up to 80, its parent stops it at 50
  other.handle = 0x10030;
  other.parent = 0x10001;
  other.ceil.bytes_per_s = 10e6 / 8;
  htb.classes = {other, leaf, top};
  SECTION("htb: the least ceil from the default class up") {
    const OwnQdisc h = own_qdisc_rate(htb);
    REQUIRE(h.known);
    CHECK(h.rate_bps == Approx(50e6));
    htb.classes[1].ceil.bytes_per_s = 20e6 / 8;
    CHECK(own_qdisc_rate(htb).rate_bps == Approx(20e6));
  }
  SECTION("htb: filters, an unshaped default or a missing class say nothing") {
    QdiscConfig f = htb;
    f.filters = true;
    CHECK_FALSE(own_qdisc_rate(f).known);
    QdiscConfig d0 = htb;
    d0.htb_default = 0;
    CHECK_FALSE(own_qdisc_rate(d0).known);
    QdiscConfig missing = htb;
    missing.htb_default = 0x40;
    CHECK_FALSE(own_qdisc_rate(missing).known);
  }
  SECTION("htb: parents in a loop end") {
    QdiscConfig loop = htb;
    loop.classes[2].parent = 0x10020;  // top's parent is the leaf
    const OwnQdisc l = own_qdisc_rate(loop);
    CHECK(l.known);
    CHECK(l.rate_bps == Approx(50e6));
  }
}

TEST_CASE("measure: our interface's qdisc rate and counters bound the avail-bw when the "
          "narrow link is elsewhere", "[own_traffic]") {
  // Benchmark path 58: our interface a 147.96 Mbit/s tbf with 113 Mbit/s of
  // CBR from this host through it; the capacity trains read 81, the search 59.4.
  const double rate = 147958496.0;
  const double other = 114.27e6;
  MeasureResult m = measured_capacity(81e6, 66e6, 102e6);
  AvailbwResult a = searched(81e6, 59.4e6, other);
  a.own_traffic.qdisc_kind = "tbf";
  a.own_traffic.qdisc_rate_bps = rate;
  const double own = (rate - other) * 1500 / 1514;
  SECTION("below the search's reading: the estimate") {
    add_availbw(m, a, 0);
    CHECK(m.availbw.availbw_bps == Approx(own));
    CHECK(m.availbw.availbw_bps == Approx(33.4e6).epsilon(0.01));
    CHECK(m.availbw.basis == "own_interface_counters");
    CHECK(m.availbw.own_traffic.applied);
    CHECK(warned(m.availbw, "own_traffic"));
    CHECK(m.availbw.low_bps <= own);
    CHECK(m.availbw.high_bps >= own);
    // The range: the busiest and quietest bins (1.2 and 0.8 x the mean).
    CHECK(m.availbw.low_bps == Approx((rate - 1.2 * other) * 1500 / 1514));
    CHECK(m.availbw.high_bps == Approx(std::min(1.1 * 59.4e6, (rate - 0.8 * other) * 1500 / 1514)));
  }
  SECTION("above it: a tighter link after ours, the search stands") {
    AvailbwResult b = a;
    b.availbw_bps = 20e6;
    b.low_bps = 18e6;
    b.high_bps = 22e6;
    add_availbw(m, b, 0);
    CHECK(m.availbw.availbw_bps == 20e6);
    CHECK(m.availbw.basis == "response_curve");
    CHECK_FALSE(m.availbw.own_traffic.applied);
  }
  SECTION("no qdisc rate: nothing") {
    a.own_traffic.qdisc_rate_bps = 0;
    a.own_traffic.qdisc_not_used = "filters classify the traffic";
    add_availbw(m, a, 0);
    CHECK(m.availbw.availbw_bps == 59.4e6);
    CHECK_FALSE(m.availbw.own_traffic.applied);
  }
}

namespace {

// A fleet of trains at `offered` that left our interface as sent (local
// ratio `local_ratio`, their packets' delay in our queue spread by
// `local_queue_s`), our link's avail-bw from its counters `own`, each
// reaching the target at `ratios`.
RateRecord fleet_left_as_sent(double offered, double own, const std::vector<double>& ratios,
                              double local_ratio = 1.0, double local_queue_s = 0.0) {
  RateRecord r;
  r.phase = "search";
  r.rate_bps = offered;
  r.offered_bps = offered;
  for (double x : ratios) {
    PacedTrainRecord t;
    t.offered_bps = offered;
    t.ratio = x;
    t.local_ratio = local_ratio;
    t.local_queue_s = local_queue_s;
    t.own_link_availbw_bps = own;
    t.verdict = x > 1.01 ? "above" : "below";
    r.trains.push_back(t);
  }
  return r;
}

}  // namespace

TEST_CASE("measure: trains that left our interface as sent and still read a rise keep the "
          "search's reading over our link's counters", "[own_traffic]") {
  // Benchmark path 6 at a89f333: our interface a 48.2 Mbit/s htb with 14.2
  // Mbit/s of this host's on/off through it (33.66 left); a 126.6 Mbit/s
  // link with 100 Mbit/s of Poisson two hops on (26.9 left). The search read
  // 24.0 in [17.5, 40.4]: its range reached 0.9 x 33.66, and the counters
  // were reported (+25%). Its fleet at 20.7 Mbit/s: four trains that left
  // unspread read 1.069, 1.070, 1.093 and 0.948, at 22.4 three read 1.011
  // to 1.018.
  const double rate = 48.2e6;
  const double other = 14.23e6;
  const double own = (rate - other) * 1500 / 1514;
  MeasureResult m = measured_capacity(41.6e6, 40e6, 43e6);
  AvailbwResult a = searched(41.6e6, 24.0e6, other);
  a.low_bps = 17.5e6;
  a.high_bps = 40.4e6;
  a.own_traffic.qdisc_kind = "htb";
  a.own_traffic.qdisc_rate_bps = rate;
  a.noise_baseline = 1.0;
  a.noise_threshold = 0.003;
  RateRecord calib = fleet_left_as_sent(4.2e6, own, {1.2, 1.3, 1.2, 1.3, 1.2});
  calib.phase = "calibration";  // never evidence, whatever it read
  a.rates.push_back(calib);
  SECTION("a rise: the search stands, and says why") {
    a.rates.push_back(fleet_left_as_sent(20.7e6, own, {1.069, 1.070, 1.093, 0.948}));
    a.rates.push_back(fleet_left_as_sent(22.4e6, own, {1.013, 1.018, 1.011}));
    // (Its fleet at 29.7, over 0.85 x 33.66, is no evidence: left out.)
    a.rates.push_back(fleet_left_as_sent(29.7e6, own, {0.9, 0.9, 0.9, 0.9, 0.9, 0.9}));
    add_availbw(m, a, 0);
    CHECK(m.availbw.availbw_bps == 24.0e6);
    CHECK(m.availbw.basis == "response_curve");
    CHECK_FALSE(m.availbw.own_traffic.applied);
    CHECK(warned(m.availbw, "tighter_link_after_ours"));
    CHECK_FALSE(warned(m.availbw, "own_traffic"));
  }
  SECTION("without those trains: the counters, as before") {
    add_availbw(m, a, 0);
    CHECK(m.availbw.own_traffic.applied);
    CHECK(m.availbw.availbw_bps == Approx(own));
    CHECK_FALSE(warned(m.availbw, "tighter_link_after_ours"));
  }
  // The counters are taken with these fleets added.
  auto counters_taken = [&](std::vector<RateRecord> fleets) {
    for (RateRecord& r : fleets) a.rates.push_back(std::move(r));
    add_availbw(m, a, 0);
    return m.availbw.own_traffic.applied;
  };
  SECTION("fewer than five such trains: not enough") {
    CHECK(counters_taken({fleet_left_as_sent(20.7e6, own, {1.069, 1.070, 1.093, 1.05})}));
  }
  SECTION("flat trains (a tighter link not seen): the counters") {
    CHECK(counters_taken(
        {fleet_left_as_sent(20.7e6, own, {1.0, 1.001, 0.999, 1.003, 1.0, 1.02})}));
  }
  SECTION("a rise within the noise threshold: the counters") {
    a.noise_threshold = 0.06;
    CHECK(counters_taken({fleet_left_as_sent(20.7e6, own, {1.02, 1.03, 1.01, 1.025, 1.02})}));
  }
  SECTION("a rise past a wide threshold, over 3% and three standard errors: the search") {
    // Seed 2036's path 51: TCP on the remote tight link spread the
    // calibration trains too (threshold 0.184); trains that left as sent read
    // a median 1.066 over a baseline of 1.015.
    a.noise_threshold = 0.18;
    CHECK_FALSE(
        counters_taken({fleet_left_as_sent(20.7e6, own, {1.06, 1.07, 1.05, 1.065, 1.07, 1.06})}));
    CHECK(warned(m.availbw, "tighter_link_after_ours"));
  }
  SECTION("... but not when those trains spread as widely as the threshold says") {
    a.noise_threshold = 0.18;
    CHECK(counters_taken({fleet_left_as_sent(20.7e6, own, {0.9, 1.25, 1.0, 1.2, 0.95, 1.1})}));
  }
  SECTION("trains our queue spread or moved about: our queue, not evidence") {
    CHECK(counters_taken(
        {fleet_left_as_sent(20.7e6, own, {1.07, 1.08, 1.09, 1.07, 1.1}, 1.05),
         fleet_left_as_sent(20.7e6, own, {1.07, 1.08, 1.09, 1.07, 1.1}, 1.0, 2e-3)}));
  }
  SECTION("trains near our link's avail-bw: our own link may do it") {
    CHECK(counters_taken({fleet_left_as_sent(0.9 * own, own, {1.07, 1.08, 1.09, 1.07, 1.1})}));
  }
  SECTION("the counters below the search's reading still cap it") {
    a.availbw_bps = 38e6;
    CHECK(counters_taken({fleet_left_as_sent(20.7e6, own, {1.069, 1.070, 1.093, 0.948, 1.05})}));
    CHECK(m.availbw.availbw_bps == Approx(own));
  }
}

TEST_CASE("measure: no hop named, trains spread as they left us: the bottleneck is hop 1",
          "[own_traffic]") {
  // The random-path benchmark's path 10 at 5c6288a: our own 5.5 Mbit/s htb
  // with this host's TCP in it, a 7 Mbit/s link after it; the hops phase ran
  // out of time after one hop train answered by every hop and named none.
  auto path10 = [](bool spread, int named) {
    MeasureResult m = spread ? local_narrow(5.41e6) : measured_capacity(5.41e6, 5.36e6, 5.46e6);
    for (double r : {565e6, 584e6}) {
      HopRecord h;
      h.used = true;
      h.rate_bps = r;
      h.choke_fraction = r < 570e6 ? 1.0 : 0.0;
      m.hops.hops.push_back(h);
    }
    m.hops.bottleneck_hop = m.hops.bottleneck_earliest_hop = named;
    if (named == 0) m.hops.warnings.push_back({WarningCode::kNoBottleneck, "too few trains"});
    return m;
  };
  MeasureResult m = path10(true, 0);
  add_availbw(m, searched(5.41e6, 4.2e6, 1.2e6), 0);
  CHECK(m.hops.bottleneck_hop == 1);
  REQUIRE(m.hops.warnings.size() == 1);
  CHECK(m.hops.warnings[0].code == "bottleneck_own_link");
  SECTION("a hop named by the hop trains stands") {
    MeasureResult m2 = path10(true, 2);
    add_availbw(m2, searched(5.41e6, 4.2e6, 1.2e6), 0);
    CHECK(m2.hops.bottleneck_hop == 2);
  }
  SECTION("trains not spread as they left: nothing names our own link") {
    MeasureResult m2 = path10(false, 0);
    add_availbw(m2, searched(5.41e6, 4.2e6, 1.2e6), 0);
    CHECK(m2.hops.bottleneck_hop == 0);
    CHECK(m2.hops.warnings[0].code == "no_bottleneck");
  }
}
