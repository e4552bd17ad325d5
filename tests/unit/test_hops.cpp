// Per-hop dispersion and the bottleneck vote on synthetic recursive trains sent
// through a simulated chain of FIFO links; the recursive train's layout; the
// ICMP token bucket.
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "app/runs/availbw_run.hpp"
#include "estimate/hops.hpp"
#include "plan/hops_plan.hpp"

using namespace lw;

namespace {

// The narrow-hop rules' view of one hop of an estimate.
HopRate hop_rate(const HopEstimate& h) {
  return {h.used, h.rate_bps, h.choke_fraction, h.passed_fraction, h.rate_low_bps, h.rate_high_bps,
          h.passed_trains};
}

struct Chain {
  std::vector<double> rate_bps;  // link k+1 arrives at hop k+1 (index k)
  Nanos jitter_ns = 0;           // per reply, normal
  double cross_bps = 0;          // cross traffic on link `cross_link` (FIFO, random bursts)
  int cross_link = -1;
};

// Sends the recursive train of `rt` (bits of each probe; marker k expires at
// hop k+1) back to back at `send_bps` through `chain`; returns reply times.
HopTrainTiming simulate(const RecursiveTrain& rt, const Chain& chain, double send_bps,
                        std::mt19937& rng) {
  const int H = static_cast<int>(rt.head.size());
  const auto& probes = rt.train.probes;
  const int n = static_cast<int>(probes.size());
  // Last hop (1-based) each probe reaches.
  std::vector<int> reach(n, H);
  for (int k = 0; k < H; ++k) reach[rt.head[k]] = reach[rt.tail[k]] = k + 1;
  std::vector<double> t(n);  // seconds: current position of each probe
  double s = 0;
  HopTrainTiming out;
  out.bits = rt.bits;
  out.head_reply.assign(H, 0);
  out.tail_reply.assign(H, 0);
  out.head_sent.assign(H, 0);
  out.tail_sent.assign(H, 0);
  const Nanos t0 = 5 * kSec;
  for (int i = 0; i < n; ++i) {
    s += 8.0 * probes[i].ip_len / send_bps;
    t[i] = s;
  }
  for (int k = 0; k < H; ++k) {
    out.head_sent[k] = t0 + static_cast<Nanos>(t[rt.head[k]] * 1e9);
    out.tail_sent[k] = t0 + static_cast<Nanos>(t[rt.tail[k]] * 1e9);
  }
  std::normal_distribution<double> noise(0.0, static_cast<double>(chain.jitter_ns));
  std::exponential_distribution<double> gap(1.0);
  for (int hop = 1; hop <= H; ++hop) {
    const double c = chain.rate_bps[hop - 1];
    double free_at = 0;
    // Cross traffic: 1500-byte packets at Poisson times on this link.
    double next_cross = 0, cross_size = 8.0 * 1500;
    const bool cross = hop - 1 == chain.cross_link && chain.cross_bps > 0;
    if (cross) next_cross = gap(rng) * cross_size / chain.cross_bps;
    for (int i = 0; i < n; ++i) {
      if (reach[i] < hop) continue;
      while (cross && next_cross < t[i]) {
        free_at = std::max(free_at, next_cross) + cross_size / c;
        next_cross += gap(rng) * cross_size / chain.cross_bps;
      }
      free_at = std::max(free_at, t[i]) + 8.0 * probes[i].ip_len / c;
      t[i] = free_at + 1e-4;  // propagation
    }
  }
  for (int k = 0; k < H; ++k) {
    auto reply = [&](int i) { return t0 + static_cast<Nanos>(t[i] * 1e9 + 1e6 + noise(rng)); };
    out.head_reply[k] = reply(rt.head[k]);
    out.tail_reply[k] = reply(rt.tail[k]);
  }
  return out;
}

RecursiveTrain train_for(int H, int load = 40) {
  RecursiveTrainParams p;
  p.flow = {0xC6120102u, 0xC6120402u, 40000, 47391};
  for (int k = 1; k <= H; ++k) {
    p.hops.push_back({k, 0, k == H ? MarkerKind::kTarget : MarkerKind::kTtl});
  }
  p.load_packets = load;
  SeqAllocator seqs(100);
  return make_recursive_train(p, 0, seqs);
}

std::vector<HopTrainTiming> many(const RecursiveTrain& rt, const Chain& c, int trains,
                                 std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<HopTrainTiming> v;
  for (int i = 0; i < trains; ++i) v.push_back(simulate(rt, c, 3e9, rng));
  return v;
}

}  // namespace

TEST_CASE("recursive train: TTL 1..H in the head, H..1 in the tail, bits per hop") {
  const RecursiveTrain rt = train_for(4, 10);
  const auto& p = rt.train.probes;
  REQUIRE(p.size() == 2 + 4 + 10 + 4);
  CHECK(p[0].role == Role::kDrain);
  CHECK(p[0].ttl == 64);
  for (int k = 0; k < 3; ++k) {
    CHECK(p[rt.head[k]].ttl == k + 1);
    CHECK(p[rt.tail[k]].ttl == k + 1);
    CHECK((p[rt.head[k]].flags & kSyn) != 0);
  }
  CHECK(p[rt.head[3]].ttl == 64);  // the target's markers go all the way
  CHECK(rt.head[0] < rt.head[1]);
  CHECK(rt.tail[1] < rt.tail[0]);
  CHECK(rt.head[3] + 1 == rt.tail[3] - 10);
  // Hop 1: 3 later head markers + load + 3 later tail markers + its own tail.
  CHECK(rt.bits[0] == Approx(8.0 * (3 * 40 + 10 * 1500 + 3 * 40 + 40)));
  CHECK(rt.bits[3] == Approx(8.0 * (10 * 1500 + 40)));
  // Every marker has a distinct sequence number (replies are told apart by it).
  std::set<std::uint32_t> seqs;
  for (int m : rt.train.markers) seqs.insert(p[m].seq);
  CHECK(seqs.size() == 8);
}

TEST_CASE("recursive train: markers addressed to a router go to its address at full TTL") {
  RecursiveTrainParams prm;
  prm.flow = {1, 99, 40000, 47391};
  prm.hops = {{1, 11, MarkerKind::kAddr}, {2, 0, MarkerKind::kTtl}, {3, 0, MarkerKind::kTarget}};
  prm.load_packets = 4;
  SeqAllocator seqs(7);
  const RecursiveTrain rt = make_recursive_train(prm, 3, seqs);
  const auto& p = rt.train.probes;
  CHECK(p[rt.head[0]].dst == 11);
  CHECK(p[rt.head[0]].ttl == 64);
  CHECK(p[rt.tail[0]].dst == 11);
  CHECK(p[rt.head[1]].dst == 99);
  CHECK(p[rt.head[1]].ttl == 2);
  CHECK(p[rt.head[2]].dst == 99);
}

TEST_CASE("bottleneck found at every position of a 3-6 hop chain") {
  for (int H = 3; H <= 6; ++H) {
    for (int b = 0; b < H; ++b) {
      Chain c;
      c.rate_bps.assign(H, 1e9);
      c.rate_bps[b] = 50e6;
      if (b > 0) c.rate_bps[b - 1] = 150e6;  // a slower-than-line link before it
      c.jitter_ns = 20 * kUs;
      const RecursiveTrain rt = train_for(H);
      const HopsEstimate e = estimate_hops(many(rt, c, 8, 17u + H * 10 + b), HopsFilter{});
      INFO("H=" << H << " b=" << b);
      REQUIRE(e.bottleneck == b);
      CHECK(e.confidence >= 0.75);
      // At and after the bottleneck the train carries 50 Mbit/s.
      for (int k = b; k < H; ++k) CHECK(e.hops[k].rate_bps == Approx(50e6).epsilon(0.02));
      // Before it: faster.
      for (int k = 0; k < b; ++k) CHECK(e.hops[k].rate_bps > 100e6);
    }
  }
}

TEST_CASE("the narrowest link wins over an earlier, larger step") {
  // 100 Mbit/s then 60: the step into 100 is the larger one, 60 is the narrow link.
  Chain c;
  c.rate_bps = {100e6, 1e9, 60e6, 1e9};
  c.jitter_ns = 10 * kUs;
  const HopsEstimate e = estimate_hops(many(train_for(4), c, 6, 5), HopsFilter{});
  CHECK(e.bottleneck == 2);
  CHECK(e.hops[0].choke_fraction == Approx(1.0));  // a choke point, not the bottleneck
  CHECK(e.hops[2].rate_bps == Approx(60e6).epsilon(0.02));
}

TEST_CASE("a silent hop is kept, unused, and the rest still works") {
  Chain c;
  c.rate_bps = {1e9, 1e9, 40e6, 1e9};
  auto trains = many(train_for(4), c, 6, 9);
  for (auto& t : trains) t.head_reply[1] = t.tail_reply[1] = 0;  // hop 2 never answers
  const HopsEstimate e = estimate_hops(trains, HopsFilter{});
  CHECK(e.hops[1].replies == 0);
  CHECK_FALSE(e.hops[1].used);
  CHECK(e.hops[1].rate_bps == 0);
  CHECK(e.bottleneck == 2);
  CHECK(e.trains_voting == 6);
}

TEST_CASE("rate-limited replies: a hop answering too rarely is skipped in every train") {
  Chain c;
  c.rate_bps = {1e9, 40e6, 1e9, 1e9};
  auto trains = many(train_for(4), c, 8, 21);
  // Hop 2 answers only the first two trains (its ICMP budget ran out), hop 3
  // lost one tail reply.
  for (std::size_t i = 2; i < trains.size(); ++i) trains[i].tail_reply[1] = 0;
  trains[5].tail_reply[2] = 0;
  HopsFilter f;
  const HopsEstimate e = estimate_hops(trains, f);
  CHECK(e.hops[1].replies == 2);
  CHECK_FALSE(e.hops[1].used);
  CHECK(e.hops[2].replies == 7);
  CHECK(e.trains_voting == 7);  // train 5 lacks hop 3
  // With hop 2 skipped the step shows at hop 3, the next hop that answers.
  CHECK(e.bottleneck == 2);
}

TEST_CASE("reordered replies (tail before head) are not a dispersion") {
  Chain c;
  c.rate_bps = {1e9, 40e6, 1e9};
  auto trains = many(train_for(3), c, 5, 3);
  std::swap(trains[0].head_reply[1], trains[0].tail_reply[1]);
  CHECK(hop_dispersion(trains[0], 1) == 0);
  const HopsEstimate e = estimate_hops(trains, HopsFilter{});
  CHECK(e.hops[1].replies == 4);
  CHECK(e.bottleneck == 1);
}

TEST_CASE("noise and cross traffic: the vote still names the narrow link") {
  Chain c;
  c.rate_bps = {1e9, 300e6, 1e9, 50e6, 1e9};
  c.jitter_ns = 80 * kUs;  // large against a ~10 ms train
  c.cross_link = 1;
  c.cross_bps = 150e6;  // half of the 300 Mbit/s link
  const HopsEstimate e = estimate_hops(many(train_for(5, 40), c, 10, 77), HopsFilter{});
  CHECK(e.bottleneck == 3);
  CHECK(e.confidence >= 0.7);
  CHECK(e.hops[4].rate_bps == Approx(50e6).epsilon(0.05));
}

TEST_CASE("no hop slows the train: no bottleneck named") {
  Chain c;
  c.rate_bps = {10e9, 10e9, 10e9};  // faster than our 3 Gbit/s sender
  const HopsEstimate e = estimate_hops(many(train_for(3), c, 5, 1), HopsFilter{});
  CHECK(e.bottleneck == -1);
  CHECK(e.no_choke_fraction == Approx(1.0));
}

TEST_CASE("too few answered trains: no bottleneck named") {
  Chain c;
  c.rate_bps = {1e9, 40e6, 1e9};
  const HopsEstimate e = estimate_hops(many(train_for(3), c, 2, 4), HopsFilter{});
  CHECK(e.trains_voting == 2);
  CHECK(e.bottleneck == -1);
  CHECK(e.hops[1].choke_fraction == Approx(1.0));
  CHECK(estimate_hops({}, HopsFilter{}).hops.empty());
}

TEST_CASE("ICMP budget: burst, then one token per second") {
  IcmpBudget b(1.0, 6);
  const Nanos t0 = 100 * kSec;
  CHECK(b.ready_at(2, t0) == t0);
  b.spend(2, t0);
  b.spend(2, t0);
  b.spend(2, t0);
  CHECK(b.tokens(t0) == Approx(0));
  CHECK(b.ready_at(2, t0) == t0 + 2 * kSec);
  CHECK(b.tokens(t0 + 500 * kMs) == Approx(0.5));
  CHECK(b.tokens(t0 + 60 * kSec) == Approx(6));  // never more than the burst
  IcmpBudget fresh(1.0, 6);
  fresh.drain(t0);  // the router said no: its bucket is empty whatever we thought
  CHECK(fresh.ready_at(2, t0) == t0 + 2 * kSec);
}

TEST_CASE("marker kinds: initial choice per mode") {
  CHECK(initial_marker_kind(HopMarkers::kAuto, true, false, false) == MarkerKind::kTarget);
  CHECK(initial_marker_kind(HopMarkers::kTtl, false, true, true) == MarkerKind::kTtl);
  CHECK(initial_marker_kind(HopMarkers::kAddr, false, true, false) == MarkerKind::kAddr);
  CHECK(initial_marker_kind(HopMarkers::kAddr, false, false, false) == MarkerKind::kTtl);  // unknown addr
  CHECK(initial_marker_kind(HopMarkers::kAuto, false, true, true) == MarkerKind::kAddr);
  CHECK(initial_marker_kind(HopMarkers::kAuto, false, true, false) == MarkerKind::kTtl);
  CHECK(initial_marker_kind(HopMarkers::kAuto, false, false, true) == MarkerKind::kTtl);
}

TEST_CASE("marker kinds: a hop silent to one kind switches to the other once") {
  MarkerChoice a;  // addressed router that stops answering TCP
  a.kind = MarkerKind::kAddr;
  CHECK_FALSE(a.record(false, true));
  CHECK(a.record(false, true));
  CHECK(a.kind == MarkerKind::kTtl);
  CHECK_FALSE(a.record(false, true));  // silent to both: no flapping back
  CHECK_FALSE(a.record(false, true));
  CHECK(a.kind == MarkerKind::kTtl);

  MarkerChoice t;  // ICMP-silent router that answers TCP on its address
  CHECK_FALSE(t.record(false, true));
  CHECK(t.record(false, true));
  CHECK(t.kind == MarkerKind::kAddr);

  MarkerChoice n;  // answers sometimes: keeps its kind
  CHECK_FALSE(n.record(true, true));
  CHECK_FALSE(n.record(false, true));
  CHECK_FALSE(n.record(false, true));
  CHECK(n.kind == MarkerKind::kTtl);

  MarkerChoice q;  // ICMP-silent and no TCP: nothing to switch to
  CHECK_FALSE(q.record(false, false));
  CHECK_FALSE(q.record(false, false));
  CHECK(q.kind == MarkerKind::kTtl);

  MarkerChoice tg;
  tg.kind = MarkerKind::kTarget;
  CHECK_FALSE(tg.record(false, true));
  CHECK_FALSE(tg.record(false, true));
  CHECK(tg.kind == MarkerKind::kTarget);
}

TEST_CASE("the narrow link's hop when a loaded link after it spread the capacity trains") {
  // Benchmark path 4: 382 -> 21.6 -> 25.9 Mbit/s (15.7 of CBR on the last):
  // the trains read 15.4 at the target, the gaps 26.0; the hops phase's
  // trains left hop 2 at 21.55.
  std::vector<HopRate> h = {{true, 479.8e6, 1.0}, {true, 21.55e6, 1.0}, {true, 14.89e6, 1.0}};
  CHECK(narrow_hop_above_trains(h, 15.44e6, 26.04e6, 25.95e6) == 1);
  // Not above the trains (the narrow link's own cross traffic slowed it).
  CHECK(narrow_hop_above_trains(h, 21.0e6, 26.04e6, 25.95e6) == -1);
  // Above what the gaps allow: no.
  CHECK(narrow_hop_above_trains(h, 15.44e6, 21.0e6, 25.95e6) == -1);
  // No interval above the trains: nothing to choose within.
  CHECK(narrow_hop_above_trains(h, 15.44e6, 15.44e6, 25.95e6) == -1);
  CHECK(narrow_hop_above_trains(h, 0, 26.04e6, 25.95e6) == -1);
  // A hop that slowed few trains, or that was not used, is not the narrow link.
  h[1].choke_fraction = 0.25;
  CHECK(narrow_hop_above_trains(h, 15.44e6, 26.04e6, 25.95e6) == -1);
  h[1].choke_fraction = 1.0;
  h[1].used = false;
  CHECK(narrow_hop_above_trains(h, 15.44e6, 26.04e6, 25.95e6) == -1);
  h[1].used = true;
  // A later hop that reads faster contradicts it (dispersion only grows).
  h.push_back({true, 23.0e6, 0.0});
  CHECK(narrow_hop_above_trains(h, 15.44e6, 26.04e6, 25.95e6) == -1);
  h.back().rate_bps = 14.5e6;
  CHECK(narrow_hop_above_trains(h, 15.44e6, 26.04e6, 25.95e6) == 1);
  // The target's hop reads what the capacity trains read, a little above
  // them now and then (path 4 rebuilt: 14.8 against 14.0): never chosen, no
  // loaded link shows after it.
  const std::vector<HopRate> t = {{true, 479.8e6, 1.0}, {true, 21.6e6, 1.0}, {true, 14.81e6, 1.0}};
  CHECK(narrow_hop_above_trains(t, 14.0e6, 26.1e6, 25.95e6) == 1);
  const std::vector<HopRate> only_target = {{true, 479.8e6, 1.0}, {true, 14.81e6, 1.0}};
  CHECK(narrow_hop_above_trains(only_target, 14.0e6, 26.1e6, 25.95e6) == -1);
}

TEST_CASE("no loaded link after the narrow one halves a train: a hop over twice the trains is "
          "not the narrow link") {
  // Benchmark path 15 at 7730fff: our own 379 Mbit/s htb (bursting: the hop
  // trains left hop 1 at 424.9), then the narrow 35.0 Mbit/s link (hops 2-4
  // read 34.3-34.7). The gaps were adopted at 35.45 with an interval up to
  // 432, and hop 1 was taken for the narrow link: +983%.
  const std::vector<HopRate> h = {{true, 424.93e6, 1.0},
                                  {true, 34.65e6, 1.0},
                                  {true, 34.32e6, 0.0},
                                  {true, 34.31e6, 0.0}};
  CHECK(narrow_hop_above_trains(h, 35.45e6, 431.96e6, 35.45e6) == -1);
  // Just under half: a loaded later link could have done that.
  const std::vector<HopRate> k = {{true, 70.0e6, 1.0}, {true, 34.65e6, 0.5}};
  CHECK(narrow_hop_above_trains(k, 35.45e6, 80e6, 71e6) == 0);
}

TEST_CASE("the last qualifying hop: a narrower link after a wider one") {
  // 142.7 -> 142.7 -> 22.9 (choke) -> 20.8 (few chokes) -> 20.4: path 19.
  const std::vector<HopRate> h = {{true, 142.7e6, 1.0}, {true, 142.7e6, 0.0},
                                  {true, 22.88e6, 1.0}, {true, 20.79e6, 0.125},
                                  {true, 20.38e6, 0.0}};
  CHECK(narrow_hop_above_trains(h, 19.42e6, 75.76e6, 74.3e6) == 2);
  // Two chokes above the trains: the later (narrower) one.
  const std::vector<HopRate> g = {{true, 479e6, 1.0}, {true, 60e6, 1.0}, {true, 40e6, 1.0},
                                  {true, 29e6, 1.0}};
  CHECK(narrow_hop_above_trains(g, 30e6, 70e6, 68e6) == 2);
}

TEST_CASE("no hop whose drop to the trains no cross traffic on the later link explains") {
  // Benchmark path 14 at 6267dbf: the trains read the narrow link right
  // (61.9, hop 2), the gaps 445 (a TCP-loaded 462 Mbit/s link after it), and
  // hop 1 at 405.7 was taken for the narrow link. From 405.7 down to 61.9
  // would need more cross traffic than a 445 Mbit/s link carries.
  const std::vector<HopRate> h = {{true, 405.74e6, 1.0}, {true, 61.86e6, 1.0},
                                  {true, 61.88e6, 0.0}, {true, 61.56e6, 0.0}};
  CHECK(narrow_hop_above_trains(h, 61.86e6, 476.81e6, 445.18e6) == -1);
  // Path 4's drop, 21.55 to 15.44 behind a 25.95 link: X = 10.7, possible.
  const std::vector<HopRate> p4 = {{true, 479.8e6, 1.0}, {true, 21.55e6, 1.0},
                                   {true, 14.89e6, 1.0}};
  CHECK(narrow_hop_above_trains(p4, 15.44e6, 26.04e6, 25.95e6) == 1);
  // No gaps' reading: nothing.
  CHECK(narrow_hop_above_trains(p4, 15.44e6, 26.04e6, 0) == -1);
}

namespace {

// A measure result with the hops phase's records (rate, choke fraction) and
// a capacity of `source` at `bps` in [low, high], the gap check `gaps`.
MeasureResult measured(const char* source, double bps, double low, double high,
                       nlohmann::json gaps,
                       const std::vector<std::pair<double, double>>& hops) {
  MeasureResult m;
  m.has_hops = true;
  m.capacity.valid = true;
  m.capacity.capacity_source = source;
  m.capacity.capacity_bps = bps;
  m.capacity.low_bps = low;
  m.capacity.high_bps = high;
  m.capacity.gap_check = std::move(gaps);
  for (const auto& [rate, choke] : hops) {
    HopRecord h;
    h.ttl = static_cast<int>(m.hops.hops.size()) + 1;
    h.used = true;
    h.rate_bps = rate;
    h.choke_fraction = choke;
    m.hops.hops.push_back(h);
  }
  return m;
}

// Hop k's trains left it between `low` and `high`.
void spread(MeasureResult& m, std::size_t k, double low, double high) {
  m.hops.hops[k].rate_low_bps = low;
  m.hops.hops[k].rate_high_bps = high;
}

// The last hop is the target's, reached.
void last_is_target(MeasureResult& m, const std::string& addr) {
  m.hops.hops.back().addr = m.hops.target_addr = addr;
  m.hops.target_reached = true;
}

}  // namespace

TEST_CASE("measure takes the narrow link's hop rate when the gaps read above the trains") {
  // Benchmark path 6 at b93126c: our own 47.8 Mbit/s link is the narrow one,
  // a loaded 127 Mbit/s link after it; trains 41.0, gaps 51.5 [41.2, 57.2]
  // ("agrees"), hops 48.0, 47.9, 48.1 and 43.3 at the target.
  MeasureResult m = measured("rst_trains", 40.96e6, 35.68e6, 43.91e6,
                             {{"verdict", "agrees"}, {"capacity_bps", 51.52e6},
                              {"low_bps", 41.23e6}, {"high_bps", 57.21e6}},
                             {{48.04e6, 1.0}, {47.88e6, 0.0}, {48.14e6, 0.0}, {43.29e6, 0.375}});
  m.hops.bottleneck_hop = 4;
  MeasureResult same = m;
  double C = 40.96e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 48.04e6);
  CHECK(m.capacity.capacity_bps == 48.04e6);
  CHECK(m.capacity.capacity_source == "hop_dispersion");
  CHECK(m.capacity.low_bps <= 47.75e6);
  CHECK(m.capacity.high_bps >= 57.21e6);
  CHECK(m.hops.bottleneck_hop == 1);
  CHECK(m.capacity.warnings.size() == 1);
  CHECK(m.capacity.warnings[0].code == "capacity_from_hop");
  // Gaps that agree and read within 5% of the trains: nothing changes.
  same.capacity.gap_check["capacity_bps"] = 42.0e6;
  C = 40.96e6;
  narrow_capacity_from_hops(same, &C);
  CHECK(C == 40.96e6);
  CHECK(same.capacity.capacity_source == "rst_trains");
  CHECK(same.hops.bottleneck_hop == 4);
  // Nor with a capacity from elsewhere, or without the hops phase.
  MeasureResult other = same;
  other.capacity.capacity_source = "syn_pairs";
  other.capacity.gap_check["capacity_bps"] = 51.52e6;
  C = 40.96e6;
  narrow_capacity_from_hops(other, &C);
  CHECK(C == 40.96e6);
  other.capacity.capacity_source = "rst_trains";
  other.has_hops = false;
  narrow_capacity_from_hops(other, &C);
  CHECK(C == 40.96e6);
}

TEST_CASE("measure takes no hop's rate that a later hop's trains all contradict") {
  // The random-path benchmark, seed 2031, path 32 rerun: our 9.19 Mbit/s
  // htb (hop 1), the idle 7.7 Mbit/s narrow link into hop 2; trains 7.69,
  // gaps 9.23 (widened); hop 2 at 7.71 [7.69, 8.05], choke 0.75; hop 1 was
  // taken (+19.4%).
  auto path32 = [](double hop2_high) {
    MeasureResult m = measured("rst_trains", 7.69e6, 7.6e6, 7.8e6,
                               {{"verdict", "trains_too_slow"}, {"capacity_bps", 9.23e6},
                                {"low_bps", 9.2e6}, {"high_bps", 9.24e6}, {"widened", true}},
                               {{9.19e6, 1.0}, {7.71e6, 0.75}, {7.71e6, 0.0}, {7.73e6, 0.0},
                                {7.71e6, 0.0}});
    for (auto& h : m.hops.hops) {
      h.rate_low_bps = 0.998 * h.rate_bps;
      h.rate_high_bps = 1.04 * h.rate_bps;
    }
    m.hops.hops[1].rate_high_bps = hop2_high;
    m.hops.bottleneck_hop = 2;
    return m;
  };
  MeasureResult m = path32(8.05e6);
  double C = 7.69e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 7.69e6);
  CHECK(m.capacity.capacity_source == "rst_trains");
  CHECK(m.hops.bottleneck_hop == 2);
  // Hop 2's trains spread by cross traffic (a loaded faster link can): hop 1
  // stands as the narrow link's.
  MeasureResult spread = path32(9.0e6);
  C = 7.69e6;
  narrow_capacity_from_hops(spread, &C);
  CHECK(C == 9.19e6);
  CHECK(spread.capacity.capacity_source == "hop_dispersion");
}

TEST_CASE("measure takes the narrow link's hop rate when the gaps were refused as squeezed inside "
          "the trains' interval") {
  // Benchmark path 40 at 967b8cc: 752 -> 9.5 (narrow, CBR) -> 80.5 -> 20.8
  // (on/off) -> 880 Mbit/s; trains 6.38 [5.78, 9.58], gaps 7.62 [5.94, 8.71]
  // squeezed after the narrow link (least-delayed 6.90), nothing widened;
  // the hops 534.5 (few chokes), 9.41, 9.41, 8.06, 8.03. Truth 9.44.
  MeasureResult m = measured("rst_trains", 6.38e6, 5.78e6, 9.58e6,
                             {{"verdict", "squeezed_after_narrow"}, {"capacity_bps", 7.62e6},
                              {"low_bps", 5.94e6}, {"high_bps", 8.71e6}, {"widened", false}},
                             {{534.5e6, 0.25}, {9.41e6, 1.0}, {9.41e6, 0.0}, {8.06e6, 0.5},
                              {8.03e6, 0.0}});
  m.hops.bottleneck_hop = 4;
  double C = 6.38e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 9.41e6);
  CHECK(m.capacity.capacity_source == "hop_dispersion");
  CHECK(m.hops.bottleneck_hop == 2);
  // Gaps that simply agree inside the interval: nothing changes.
  MeasureResult agree = measured("rst_trains", 6.38e6, 5.78e6, 9.58e6,
                                 {{"verdict", "agrees"}, {"capacity_bps", 6.5e6},
                                  {"low_bps", 5.94e6}, {"high_bps", 8.71e6}},
                                 {{534.5e6, 0.25}, {9.41e6, 1.0}, {9.41e6, 0.0}, {8.06e6, 0.5},
                                  {8.03e6, 0.0}});
  C = 6.38e6;
  narrow_capacity_from_hops(agree, &C);
  CHECK(C == 6.38e6);
}

TEST_CASE("measure: the target's own hop trains do not overrule the gaps") {
  // Benchmark path 21 at 93287ab: links of 232.7, 380.6 and 198.8 Mbit/s,
  // CBR of 76.2 on the last; trains 143.1, gaps 200.4 [197.6, 202.6]
  // adopted (CapProbe's least-delayed spans 205.2), every hop train at the
  // target 145.7-146.3. Truth 197.0.
  MeasureResult m = measured(
      "reply_gaps", 200.37e6, 197.55e6, 202.59e6,
      {{"verdict", "adopted"}, {"capacity_bps", 200.37e6}, {"low_bps", 197.55e6},
       {"high_bps", 202.59e6}, {"min_delay_bps", 205.24e6}},
      {{230.84e6, 1.0}, {229.51e6, 0.0}, {146.08e6, 1.0}});
  for (auto& h : m.hops.hops) {
    h.rate_low_bps = 0.997 * h.rate_bps;
    h.rate_high_bps = 1.002 * h.rate_bps;
  }
  m.hops.target_reached = true;
  m.hops.target_addr = "198.18.3.2";
  m.hops.hops.back().addr = "198.18.3.2";
  m.hops.bottleneck_hop = 3;
  MeasureResult mid = m;
  double C = 200.37e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 200.37e6);
  CHECK(m.capacity.capacity_source == "reply_gaps");
  // A router before the target that qualifies still counts.
  MeasureResult both = m;
  both.capacity = mid.capacity;
  both.hops.hops[1].rate_bps = 180e6;
  both.hops.hops[1].rate_low_bps = 179.6e6;
  both.hops.hops[1].rate_high_bps = 180.3e6;
  both.hops.hops[1].choke_fraction = 1.0;
  C = 200.37e6;
  narrow_capacity_from_hops(both, &C);
  CHECK(C == 180e6);
  // The same rates at a router before the target: that hop's rate.
  mid.hops.hops.back().addr = "198.18.3.1";
  mid.hops.target_reached = false;
  C = 200.37e6;
  narrow_capacity_from_hops(mid, &C);
  CHECK(C == 146.08e6);
  CHECK(mid.capacity.capacity_source == "hop_dispersion");
}

TEST_CASE("measure takes the narrow link's hop rate over adopted gaps with a wide interval") {
  // Benchmark path 40 at b93126c: 9.4 Mbit/s narrow (hop 2), then 20.6
  // carrying 14.8; gaps 6.87 [6.53, 10.23] adopted over trains at 6.11.
  MeasureResult m = measured(
      "reply_gaps", 6.87e6, 6.53e6, 10.23e6,
      {{"verdict", "adopted"}, {"capacity_bps", 6.87e6}, {"low_bps", 6.53e6}, {"high_bps", 10.23e6}},
      {{686.5e6, 1.0}, {9.41e6, 1.0}, {9.41e6, 0.0}, {8.15e6, 0.5}, {8.14e6, 0.0}});
  MeasureResult tight = m;
  double C = 6.87e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 9.41e6);
  CHECK(m.hops.bottleneck_hop == 2);
  // Adopted gaps with the usual narrow interval: no hop lies within it.
  tight.capacity.high_bps = 7.0e6;
  tight.capacity.gap_check["high_bps"] = 7.0e6;
  C = 6.87e6;
  narrow_capacity_from_hops(tight, &C);
  CHECK(C == 6.87e6);
  CHECK(tight.capacity.capacity_source == "reply_gaps");
}

TEST_CASE("passed share: the trains a loaded later link let through reach the target at the "
          "narrow hop's rate; an idle narrower link lets none through") {
  const RecursiveTrain rt = train_for(3, 40);
  HopsFilter f;
  // 10 Mbit/s narrow link into hop 2, then 20 carrying 14 of Poisson into
  // the target: a train meets it (on/off cross traffic, between its bursts,
  // meets none).
  Chain loaded{{1e9, 10e6, 20e6}, 20 * kUs, 14e6, 2};
  Chain quiet{{1e9, 10e6, 20e6}, 20 * kUs, 0, -1};
  std::vector<HopTrainTiming> v = many(rt, loaded, 6, 11);
  for (const auto& t : many(rt, quiet, 2, 12)) v.push_back(t);
  const HopsEstimate e = estimate_hops(v, f);
  REQUIRE(e.trains_voting == 8);
  // The 2 quiet trains, and any loaded one that met little (the fluid
  // model slows them 17%: 20 x 10 / 24).
  CHECK(e.hops[1].passed_fraction >= 0.25);
  CHECK(e.hops[1].passed_fraction <= 0.5);
  CHECK(e.hops[2].passed_fraction == 0);  // the target itself
  CHECK(e.hops[1].rate_low_bps <= e.hops[1].rate_bps);
  CHECK(e.hops[1].rate_high_bps >= e.hops[1].rate_bps);
  CHECK(e.hops[1].rate_low_bps > 0.97 * 10e6);
  CHECK(e.hops[1].rate_high_bps < 1.03 * 10e6);
  std::vector<HopRate> r;
  for (const auto& h : e.hops) r.push_back(hop_rate(h));
  INFO("target " << e.hops[2].rate_bps);
  CHECK(narrow_hop_passed(r, 0.8 * e.hops[2].rate_bps + 0.2 * 10e6) == 1);
  // An idle link 15% narrower than the hop after it: every train slowed by
  // it, none passes, and the hop is not taken for the narrow link.
  Chain narrower{{1e9, 10e6, 8.5e6}, 20 * kUs, 0, -1};
  const HopsEstimate n = estimate_hops(many(rt, narrower, 8, 13), f);
  CHECK(n.hops[1].passed_fraction == 0);
  std::vector<HopRate> nr;
  for (const auto& h : n.hops) nr.push_back(hop_rate(h));
  CHECK(narrow_hop_passed(nr, n.hops[2].rate_bps) == -1);
  // The same with cross traffic on that narrower link: slowed further, none passes.
  Chain narrower_loaded{{1e9, 10e6, 8.5e6}, 20 * kUs, 3e6, 2};
  const HopsEstimate nl = estimate_hops(many(rt, narrower_loaded, 8, 14), f);
  CHECK(nl.hops[1].passed_fraction == 0);
}

TEST_CASE("narrow_hop_passed: the conditions one by one") {
  // Benchmark path 39 at e048c44: 6.48 Mbit/s narrow (hop 1), then an idle
  // 494 and a 7.8 carrying 4.7; trains 5.06; 2 of 8 hop trains through.
  std::vector<HopRate> h = {{true, 6.474e6, 1.0, 0.25, 0, 0, 2}, {true, 6.47e6, 0.0, 0.25, 0, 0, 2},
                            {true, 5.426e6, 0.75, 0.0}};
  CHECK(narrow_hop_passed(h, 5.06e6) == 0);
  // The same share from one train (a hop that answered 4 trains of 8; benchmark
  // path 12 at e213ccf): one train can have lost load at a full queue.
  h[0].passed_trains = 1;
  CHECK(narrow_hop_passed(h, 5.06e6) == -1);
  h[0].passed_trains = 2;
  // Path 40: 9.43 at hop 2 over adopted gaps at 8.24, 6.78 after the load.
  const std::vector<HopRate> p40 = {{true, 701.98e6, 0.875, 0.0}, {true, 9.429e6, 1.0, 0.125},
                                    {true, 9.416e6, 0.0, 0.125}, {true, 6.783e6, 0.875, 0.0},
                                    {true, 6.77e6, 0.0, 0.0}};
  // One train of eight through is not enough (kMinPassed); two are.
  CHECK(narrow_hop_passed(p40, 8.242e6) == -1);
  // It bounds the capacity from above, though (hop_one_train_passed); not
  // once narrow_hop_passed takes a hop, nor with no train through.
  std::vector<HopRate> p40one = p40;
  p40one[1].passed_trains = p40one[2].passed_trains = 1;
  CHECK(hop_one_train_passed(p40one, 8.242e6) == 1);
  CHECK(hop_one_train_passed(p40, 8.242e6) == -1);  // no train counted through
  std::vector<HopRate> p40none = p40one;
  p40none[1].passed_fraction = p40none[2].passed_fraction = 0;
  CHECK(hop_one_train_passed(p40none, 8.242e6) == -1);
  std::vector<HopRate> p40b = p40;
  p40b[1].passed_fraction = p40b[2].passed_fraction = 0.25;
  p40b[1].passed_trains = p40b[2].passed_trains = 2;
  CHECK(narrow_hop_passed(p40b, 8.242e6) == 1);
  CHECK(hop_one_train_passed(p40b, 8.242e6) == -1);
  // No train through: nothing.
  h[0].passed_fraction = 0;
  CHECK(narrow_hop_passed(h, 5.06e6) == -1);
  h[0].passed_fraction = 0.25;
  // A hop that slowed few trains.
  h[0].choke_fraction = 0.25;
  CHECK(narrow_hop_passed(h, 5.06e6) == -1);
  h[0].choke_fraction = 1.0;
  // Not above the trains by 5%.
  CHECK(narrow_hop_passed(h, 6.3e6) == -1);
  // Trains under half the hop's rate: no faster loaded link does that.
  CHECK(narrow_hop_passed(h, 3.2e6) == -1);
  // No clear drop after it (under 10%).
  h[2].rate_bps = 6.0e6;
  CHECK(narrow_hop_passed(h, 5.06e6) == -1);
  h[2].rate_bps = 5.426e6;
  // A later hop faster than it: dispersion only grows.
  h.push_back({true, 7.0e6, 0.0, 0.0});
  CHECK(narrow_hop_passed(h, 5.06e6) == -1);
  CHECK(narrow_hop_passed(h, 0) == -1);
}

TEST_CASE("measure takes the narrow hop's rate from trains that passed, without the gaps") {
  // Path 39 at e048c44: the gap check gave no estimate.
  MeasureResult m = measured("rst_trains", 5.06e6, 4.581e6, 6.038e6,
                             {{"verdict", "no_estimate"}, {"trains_sent", 3}, {"trains_used", 0},
                              {"capacity_bps", nullptr}, {"high_bps", nullptr}},
                             {{6.474e6, 1.0}, {6.47e6, 0.0}, {5.426e6, 0.75}});
  m.hops.hops[0].passed_fraction = 0.25;
  m.hops.hops[1].passed_fraction = 0.25;
  m.hops.hops[0].passed_trains = m.hops.hops[1].passed_trains = 2;
  m.hops.hops[0].rate_low_bps = 6.41e6;
  m.hops.hops[0].rate_high_bps = 6.52e6;
  m.hops.bottleneck_hop = 3;
  m.hops.trains_voting = 8;  // 2 of 8 through
  MeasureResult none = m;
  MeasureResult one = m;
  double C = 5.06e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 6.474e6);
  CHECK(m.capacity.capacity_source == "hop_dispersion");
  CHECK(m.capacity.low_bps == 4.581e6);
  CHECK(m.capacity.high_bps == 6.52e6);
  CHECK(m.hops.bottleneck_hop == 1);
  REQUIRE(m.capacity.warnings.size() == 1);
  CHECK(m.capacity.warnings[0].code == "capacity_from_hop");
  // No train through: the trains stand.
  none.hops.hops[0].passed_fraction = 0;
  C = 5.06e6;
  narrow_capacity_from_hops(none, &C);
  CHECK(C == 5.06e6);
  CHECK(none.capacity.capacity_source == "rst_trains");
  CHECK(none.hops.bottleneck_hop == 3);
  CHECK(none.capacity.high_bps == 6.038e6);
  CHECK(none.capacity.warnings.empty());
  // Nor without a gap check at all when none passed; with one that passed,
  // the gap check is not needed.
  none.capacity.gap_check = nullptr;
  narrow_capacity_from_hops(none, &C);
  CHECK(C == 5.06e6);
  none.hops.hops[0].passed_fraction = 0.25;
  narrow_capacity_from_hops(none, &C);
  CHECK(C == 6.474e6);
  // The same share of 4 voting trains is one train: the trains stand.
  one.hops.trains_voting = 4;
  one.hops.hops[0].passed_trains = one.hops.hops[1].passed_trains = 1;
  C = 5.06e6;
  MeasureResult one_of_eight = one;
  narrow_capacity_from_hops(one, &C);
  CHECK(C == 5.06e6);
  CHECK(one.capacity.capacity_source == "rst_trains");
  // But its interval reaches the hop's rate: a loaded link after the hop
  // may have slowed the others (hop_one_train_passed).
  CHECK(one.capacity.low_bps == 4.581e6);
  CHECK(one.capacity.high_bps == 6.52e6);  // the hop's fastest train, within 3%
  CHECK(one.hops.bottleneck_hop == 3);
  REQUIRE(one.capacity.warnings.size() == 1);
  CHECK(one.capacity.warnings[0].code == "hop_train_passed");
  // One train of eight (the lab's 50 Mbit/s link before a 120 carrying 90
  // of UDP): the same.
  one_of_eight.hops.trains_voting = 8;
  one_of_eight.hops.hops[0].passed_fraction = one_of_eight.hops.hops[1].passed_fraction = 0.125;
  narrow_capacity_from_hops(one_of_eight, &C);
  CHECK(C == 5.06e6);
  CHECK(one_of_eight.capacity.high_bps == 6.52e6);
  // A fastest train far above the hop's median is noise: 3% over it at most.
  MeasureResult far = one_of_eight;
  far.capacity.warnings.clear();
  far.capacity.high_bps = 6.038e6;
  far.hops.hops[0].rate_high_bps = 15e6;
  narrow_capacity_from_hops(far, &C);
  CHECK(far.capacity.high_bps == Approx(1.03 * 6.474e6));
  // An interval that already reaches the hop is left alone.
  MeasureResult wide = one_of_eight;
  wide.capacity.warnings.clear();
  wide.capacity.high_bps = 7e6;
  narrow_capacity_from_hops(wide, &C);
  CHECK(wide.capacity.high_bps == 7e6);
  CHECK(wide.capacity.warnings.empty());
}

TEST_CASE("hop_at_capacity: a bottleneck hop far from the capacity gives way to the hop at it") {
  // Benchmark path 8 at e048c44: a 57.3 Mbit/s link carrying TCP (hop 2)
  // before the 47.3 narrow one (hop 3); C = 47.22; most trains last stepped
  // at hop 2.
  const std::vector<HopRate> p8 = {{true, 250.36e6, 1.0}, {true, 56.93e6, 1.0},
                                   {true, 49.84e6, 0.375}};
  CHECK(hop_at_capacity(p8, 1, 47.22e6) == 2);
  // Path 40 rebuilt: 9.41 at hop 2, the loaded 20.6 link reads 6.74 at hop 4.
  const std::vector<HopRate> p40 = {{true, 717.8e6, 0.75}, {true, 9.41e6, 1.0},
                                    {true, 9.42e6, 0.0}, {true, 6.74e6, 0.625},
                                    {true, 6.79e6, 0.0}};
  CHECK(hop_at_capacity(p40, 3, 9.50e6) == 1);
  // The named hop reads the capacity (within 5%): it stands.
  CHECK(hop_at_capacity(p40, 1, 9.50e6) == -1);
  CHECK(hop_at_capacity(p8, 2, 47.22e6) == -1);
  // Seed 2036's path 29: our busy 104.4 Mbit/s link named at 94.59 (+9.6%),
  // the narrow link's hop at 86.93 for C = 86.28.
  const std::vector<HopRate> p29 = {
      {true, 94.59e6, 1.0}, {true, 94.03e6, 0.0}, {true, 93.90e6, 0.0}, {true, 86.93e6, 0.14}};
  CHECK(hop_at_capacity(p29, 0, 86.28e6) == 3);
  // A hop within 8% but no nearer the capacity than the named one does not
  // take over.
  std::vector<HopRate> farther = p29;
  farther[0].rate_bps = 91.5e6;  // 6.1% over
  farther[3].rate_bps = 80.5e6;  // 6.7% under
  CHECK(hop_at_capacity(farther, 0, 86.28e6) == -1);
  farther[3].rate_bps = 83.0e6;  // 3.8% under
  CHECK(hop_at_capacity(farther, 0, 86.28e6) == 3);
  // No hop near the capacity, or the one near it slowed no train: none.
  CHECK(hop_at_capacity(p40, 3, 12.0e6) == -1);
  std::vector<HopRate> quiet = p40;
  quiet[1].choke_fraction = 0;
  CHECK(hop_at_capacity(quiet, 3, 9.50e6) == -1);
  // Two near it: the one that slowed more trains, the later on a tie.
  std::vector<HopRate> two = p40;
  two[2].choke_fraction = 1.0;
  CHECK(hop_at_capacity(two, 3, 9.50e6) == 2);
  CHECK(hop_at_capacity(p40, -1, 9.50e6) == -1);
  CHECK(hop_at_capacity(p40, 3, 0) == -1);
}

TEST_CASE("measure names the hop at the capacity when the voted hop reads far from it") {
  MeasureResult m = measured("rst_trains", 47.22e6, 46.9e6, 47.5e6, {{"verdict", "agrees"}},
                             {{250.36e6, 1.0}, {56.93e6, 1.0}, {49.84e6, 0.375}});
  m.hops.bottleneck_hop = 2;
  double C = 47.22e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 47.22e6);
  CHECK(m.capacity.capacity_source == "rst_trains");
  CHECK(m.hops.bottleneck_hop == 3);
  CHECK(m.hops.bottleneck_rate_bps == 49.84e6);
  REQUIRE(m.hops.warnings.size() == 1);
  CHECK(m.hops.warnings[0].code == "bottleneck_at_capacity");
  // A lower bound says nothing of where the narrow link is.
  MeasureResult lb = measured("rst_trains", 47.22e6, 47.22e6, 47.22e6, {{"verdict", "agrees"}},
                              {{250.36e6, 1.0}, {56.93e6, 1.0}, {49.84e6, 0.375}});
  lb.capacity.lower_bound = true;
  lb.hops.bottleneck_hop = 2;
  narrow_capacity_from_hops(lb, &C);
  CHECK(lb.hops.bottleneck_hop == 2);
}

TEST_CASE("passed share: a train a loaded link slowed below the narrow one's rate proves nothing") {
  // Benchmark path 8 rebuilt: a 57 Mbit/s link carrying TCP (hop 2), then
  // the 47 Mbit/s narrow one. A train the TCP queue held to 16 Mbit/s went
  // on through the 47 link unslowed; counted as passed, it made hop 2 (57.05)
  // the narrow link: +21%.
  const RecursiveTrain rt = train_for(3, 40);
  // Seven trains cross the 57 link idle; one finds it held to 16 (a TCP
  // window ahead of it), the way a queue of a loaded link does.
  std::vector<HopTrainTiming> v = many(rt, Chain{{1e9, 57e6, 47e6}, 20 * kUs, 0, -1}, 7, 21);
  v.push_back(many(rt, Chain{{1e9, 16e6, 47e6}, 20 * kUs, 0, -1}, 1, 22).front());
  const HopsEstimate e = estimate_hops(v, HopsFilter{});
  REQUIRE(e.trains_voting == 8);
  INFO("hop 2 " << e.hops[1].rate_low_bps << " .. " << e.hops[1].rate_bps << " .. "
                << e.hops[1].rate_high_bps << ", target " << e.hops[2].rate_bps);
  CHECK(e.hops[1].rate_low_bps < 17e6);
  CHECK(e.hops[1].passed_fraction == 0);
  std::vector<HopRate> r;
  for (const auto& h : e.hops) r.push_back(hop_rate(h));
  CHECK(narrow_hop_passed(r, 0.9 * 47e6) == -1);
}

TEST_CASE("passed share: a train that reads faster at the target than at the hop lost load") {
  // Benchmark path 24 at dce3dca: 20.6 Mbit/s carrying TCP (hop 2), then the
  // 17.1 narrow link; one train read 32.6 at the target (load dropped at the
  // full queue, its bits overcounted) and counted as passed.
  const RecursiveTrain rt = train_for(3, 40);
  std::vector<HopTrainTiming> v = many(rt, Chain{{1e9, 20e6, 20e6}, 20 * kUs, 0, -1}, 8, 31);
  // Three trains whose target dispersion came back 40% short.
  for (int i = 0; i < 3; ++i) {
    HopTrainTiming& t = v[static_cast<std::size_t>(i)];
    t.tail_reply[2] = t.head_reply[2] + (t.tail_reply[2] - t.head_reply[2]) * 6 / 10;
  }
  const HopsEstimate e = estimate_hops(v, HopsFilter{});
  REQUIRE(e.trains_voting == 8);
  // The 5 others reached the target at hop 2's rate (an equal later link).
  CHECK(e.hops[1].passed_fraction == Approx(5.0 / 8));
}

TEST_CASE("hop_below_capacity: no capacity above the rate every train left a hop at") {
  // Benchmark path 39 at 54f2cf1: all 8 hop trains left hop 1 at 6.47-6.48;
  // gaps from 3 trains were adopted at 7.72 (the loaded 7.8 link after it).
  std::vector<HopRate> h = {{true, 6.47e6, 1.0, 0.0, 6.47e6, 6.48e6},
                            {true, 6.47e6, 0.0, 0.0, 6.47e6, 6.47e6},
                            {true, 5.28e6, 0.875, 0.0, 5.09e6, 6.03e6}};
  CHECK(hop_below_capacity(h, 7.72e6) == 0);
  // A capacity within 3% of the hop's highest train: no contradiction.
  CHECK(hop_below_capacity(h, 6.6e6) == -1);
  // Trains that left it at different rates (cross traffic met them there):
  // that link may be faster than they read.
  h[0].rate_high_bps = 6.9e6;
  CHECK(hop_below_capacity(h, 7.72e6) == -1);
  h[0].rate_high_bps = 6.48e6;
  // A hop that slowed few trains bounds nothing; nor one without a spread.
  h[0].choke_fraction = 0.25;
  CHECK(hop_below_capacity(h, 7.72e6) == -1);
  h[0].choke_fraction = 1.0;
  h[0].rate_low_bps = 0;
  CHECK(hop_below_capacity(h, 7.72e6) == -1);
  h[0].rate_low_bps = 6.47e6;
  // Two such hops: the slower.
  h.push_back({true, 6.0e6, 1.0, 0.0, 5.98e6, 6.02e6});
  CHECK(hop_below_capacity(h, 7.72e6) == 3);
  CHECK(hop_below_capacity(h, 0) == -1);
}

TEST_CASE("measure lowers a capacity above the rate every hop train left a hop at") {
  MeasureResult m = measured("reply_gaps", 7.715e6, 7.244e6, 7.78e6, {{"verdict", "adopted"}},
                             {{6.47e6, 1.0}, {6.47e6, 0.0}, {5.28e6, 0.875}});
  for (auto& h : m.hops.hops) h.rate_low_bps = h.rate_high_bps = h.rate_bps;
  m.hops.hops[0].rate_high_bps = 6.48e6;
  m.hops.hops[2].rate_low_bps = 5.09e6;
  m.hops.hops[2].rate_high_bps = 6.03e6;
  m.hops.bottleneck_hop = 3;
  double C = 7.715e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 6.47e6);
  CHECK(m.capacity.capacity_source == "hop_dispersion");
  CHECK(m.capacity.low_bps <= 6.47e6);
  CHECK(m.capacity.high_bps >= 6.48e6);
  CHECK(m.capacity.high_bps < 6.6e6);
  CHECK(m.hops.bottleneck_hop == 1);
  REQUIRE(m.capacity.warnings.size() == 1);
  CHECK(m.capacity.warnings[0].code == "capacity_from_hop");
}

TEST_CASE(
    "hop_at_least_delayed: a capacity over a hop's rate that the least-delayed gaps agree with") {
  // Seed 2035's path 44 rebuilt: links of 874.8, 153.6 (Poisson) and 184.4
  // Mbit/s (TCP); trains and gaps 183.0, least-delayed spans 150.8.
  std::vector<HopRate> h = {{true, 596.0e6, 0.0, 0.0, 516.1e6, 875.5e6},
                            {true, 148.0e6, 1.0, 0.43, 141.3e6, 150.2e6}};
  CHECK(hop_at_least_delayed(h, 183.0e6, 150.8e6) == 1);
  // No least-delayed reading, or one away from the hop's rate: nothing.
  CHECK(hop_at_least_delayed(h, 183.0e6, 0) == -1);
  CHECK(hop_at_least_delayed(h, 183.0e6, 160.0e6) == -1);
  CHECK(hop_at_least_delayed(h, 183.0e6, 138.0e6) == -1);
  // A capacity within a tenth of both: no contradiction.
  CHECK(hop_at_least_delayed(h, 165.0e6, 150.8e6) == -1);
  CHECK(hop_at_least_delayed(h, 166.0e6, 150.8e6) == 1);
  // Trains that left the hop spread (cross traffic on the narrow link slows
  // them and the least-delayed spans alike: seed 2027's path 49, the
  // capacity 175.1 right): nothing.
  h[1] = {true, 130.8e6, 0.86, 0.57, 115.8e6, 146.7e6};
  CHECK(hop_at_least_delayed(h, 175.1e6, 127.4e6) == -1);
  h[1].rate_low_bps = 125.0e6;  // within 20%
  CHECK(hop_at_least_delayed(h, 175.1e6, 127.4e6) == 1);
  // A hop that slowed few trains, or one not used, says nothing.
  h[1].choke_fraction = 0.4;
  CHECK(hop_at_least_delayed(h, 175.1e6, 127.4e6) == -1);
  h[1].choke_fraction = 0.86;
  h[1].used = false;
  CHECK(hop_at_least_delayed(h, 175.1e6, 127.4e6) == -1);
}

TEST_CASE("measure takes the least-delayed gaps where they agree with a hop far under the trains") {
  MeasureResult m = measured("rst_trains", 183.0e6, 74.4e6, 183.9e6,
                             {{"verdict", "agrees"},
                              {"capacity_bps", 182.5e6},
                              {"low_bps", 149.3e6},
                              {"high_bps", 184.0e6},
                              {"min_delay_bps", 150.8e6}},
                             {{596.0e6, 0.0}, {148.0e6, 1.0}, {148.0e6, 0.29}});
  spread(m, 0, 516.1e6, 875.5e6);
  spread(m, 1, 141.3e6, 150.2e6);
  // The target's hop (its trains are capacity trains): never the one taken,
  // however its trains read.
  spread(m, 2, 147.0e6, 149.0e6);
  m.hops.hops[2].choke_fraction = 1.0;
  last_is_target(m, "198.18.3.2");
  m.hops.hops[1].rate_bps = 0;  // without hop 2, nothing
  double C = 183.0e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 183.0e6);
  CHECK(m.capacity.capacity_source == "rst_trains");
  m.hops.hops[1].rate_bps = 148.0e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 150.8e6);
  CHECK(m.capacity.capacity_bps == 150.8e6);
  CHECK(m.capacity.capacity_source == "reply_gaps");
  CHECK(m.capacity.low_bps <= 141.3e6);
  CHECK(m.capacity.high_bps >= 152.2e6);  // the truth
  CHECK(m.capacity.high_bps < 160.0e6);
  CHECK(m.hops.bottleneck_hop == 2);
  REQUIRE(!m.capacity.warnings.empty());
  CHECK(m.capacity.warnings.back().code == "least_delayed_at_hop");
}

TEST_CASE(
    "hop_under_least_delayed: trains far under a hop that the least-delayed gaps agree with") {
  // Seed 2036's path 51: our 83.7 Mbit/s tbf, then 295.7 with TCP (the
  // target's hop, left out); trains 55.12, least-delayed spans 84.58.
  std::vector<HopRate> h = {{true, 83.30e6, 1.0, 0.0, 77.37e6, 85.61e6}};
  CHECK(hop_under_least_delayed(h, 55.12e6, 84.58e6, 295.01e6) == 0);
  // Not far enough under (a tenth, below the hop's slowest train too).
  CHECK(hop_under_least_delayed(h, 71.0e6, 84.58e6, 295.01e6) == -1);
  CHECK(hop_under_least_delayed(h, 70.0e6, 84.58e6, 295.01e6) == 0);
  // The least-delayed spans elsewhere, or none.
  CHECK(hop_under_least_delayed(h, 55.12e6, 95.0e6, 295.01e6) == -1);
  CHECK(hop_under_least_delayed(h, 55.12e6, 0, 295.01e6) == -1);
  // The gaps not squeezed (0), or squeezed to no faster a link than the hop.
  CHECK(hop_under_least_delayed(h, 55.12e6, 84.58e6, 0) == -1);
  CHECK(hop_under_least_delayed(h, 55.12e6, 84.58e6, 88.0e6) == -1);
  // Spread over a fifth at the hop: cross traffic met them there.
  h[0].rate_low_bps = 65.0e6;
  CHECK(hop_under_least_delayed(h, 55.12e6, 84.58e6, 295.01e6) == -1);
  h[0].rate_low_bps = 77.37e6;
  // A later hop clearly slower (seed 2033's path 24: hop 2 at 34.68 for a
  // 39.4 Mbit/s narrow link with CBR, least-delayed 48.31 at hop 1's rate):
  // that link slowed the trains, not the one into the target.
  std::vector<HopRate> p24 = {{true, 48.30e6, 1.0, 0.0, 48.04e6, 48.65e6},
                              {true, 34.68e6, 1.0, 0.0, 34.48e6, 36.92e6},
                              {true, 26.79e6, 1.0, 0.62, 25.07e6, 27.76e6}};
  CHECK(hop_under_least_delayed(p24, 26.89e6, 48.31e6, 201.51e6) == -1);
  // Later hops at the hop's rate do not count against it.
  h.push_back({true, 82.0e6, 0.0, 0.0, 80.0e6, 84.0e6});
  CHECK(hop_under_least_delayed(h, 55.12e6, 84.58e6, 295.01e6) == 0);
}

TEST_CASE("measure takes the least-delayed gaps over trains a loaded link into the target slowed") {
  auto path51 = [](const char* verdict, double gaps) {
    MeasureResult m = measured("rst_trains", 55.12e6, 53.88e6, 305.85e6,
                               {{"verdict", verdict},
                                {"capacity_bps", gaps},
                                {"low_bps", 291.69e6},
                                {"high_bps", 305.85e6},
                                {"min_delay_bps", 84.58e6}},
                               {{83.30e6, 1.0}, {44.04e6, 0.62}});
    spread(m, 0, 77.37e6, 85.61e6);
    spread(m, 1, 43.43e6, 300.04e6);
    last_is_target(m, "198.18.2.2");
    m.hops.bottleneck_hop = 2;
    return m;
  };
  MeasureResult m = path51("trains_too_slow", 295.01e6);
  double C = 55.12e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 84.58e6);
  CHECK(m.capacity.capacity_source == "reply_gaps");
  CHECK(m.capacity.low_bps <= 82.95e6);  // the truth
  CHECK(m.capacity.high_bps >= 85.61e6);
  CHECK(m.hops.bottleneck_hop == 1);
  REQUIRE(!m.capacity.warnings.empty());
  CHECK(m.capacity.warnings.back().code == "least_delayed_at_hop");
  // The gaps not refused as squeezed, or squeezed to no faster a link:
  // nothing says a faster link slowed the trains (with gaps at 88, the
  // older hop rule takes hop 1's rate).
  for (const auto& [verdict, gaps] : std::vector<std::pair<const char*, double>>{
           {"agrees", 295.01e6}, {"trains_too_slow", 88.0e6}}) {
    MeasureResult m2 = path51(verdict, gaps);
    double C2 = 55.12e6;
    narrow_capacity_from_hops(m2, &C2);
    CHECK(C2 != 84.58e6);
    for (const auto& w : m2.capacity.warnings) CHECK(w.code != "least_delayed_at_hop");
  }
}

TEST_CASE("hop_far_below_capacity: no capacity over twice a hop's fastest train") {
  // Seed 2027 at fe0c5c6, path 52: 45.2 Mbit/s carrying 84% CBR (hop 2),
  // then 133.8 carrying 88% TCP; gaps adopted at 134.1.
  std::vector<HopRate> h = {{true, 513.5e6, 0.625, 0.0, 380.2e6, 583.6e6},
                            {true, 44.81e6, 1.0, 0.0, 35.65e6, 45.14e6},
                            {true, 81.56e6, 0.5, 0.0, 19.60e6, 132.3e6}};
  CHECK(hop_below_capacity(h, 134.1e6) == -1);  // the trains' rates spread there
  CHECK(hop_far_below_capacity(h, 134.1e6) == 1);
  // Under twice the fastest train: cross traffic at the hop can explain it.
  CHECK(hop_far_below_capacity(h, 90.0e6) == -1);
  CHECK(hop_far_below_capacity(h, 91.0e6) == 1);
  // A hop that slowed few of the trains says nothing; nor one not used.
  h[1].choke_fraction = 0.25;
  CHECK(hop_far_below_capacity(h, 134.1e6) == -1);
  h[1].choke_fraction = 1.0;
  h[1].used = false;
  CHECK(hop_far_below_capacity(h, 134.1e6) == -1);
  h[1].used = true;
  // Two such hops: the slower.
  h.push_back({true, 30.0e6, 1.0, 0.0, 29.0e6, 31.0e6});
  CHECK(hop_far_below_capacity(h, 134.1e6) == 3);
  CHECK(hop_far_below_capacity(h, 0) == -1);
}

TEST_CASE("hop_clearly_below: every train over 10% below a candidate, within 5% of each other") {
  // Seed 2031 at 556f335, path 32: our 9.2 Mbit/s htb (hop 1), hop 2 at 7.7
  // [7.7, 8.0] (the 7.7 Mbit/s narrow link, idle).
  std::vector<HopRate> h = {{true, 9.2e6, 1.0, 0.0, 9.2e6, 9.2e6},
                            {true, 7.7e6, 0.88, 0.0, 7.7e6, 8.0e6},
                            {true, 7.7e6, 0.0, 0.0, 7.7e6, 8.0e6}};
  CHECK(hop_below_capacity(h, 9.2e6) == -1);  // 3.9% apart: over its 2%
  CHECK(hop_clearly_below(h, 9.2e6) == 1);
  // Within 10% of the fastest train: no contradiction.
  CHECK(hop_clearly_below(h, 8.7e6) == -1);
  // Spread by cross traffic (over 5% apart): a loaded faster link can do it.
  h[1].rate_low_bps = 7.0e6;
  CHECK(hop_clearly_below(h, 9.2e6) == -1);
  h[1].rate_low_bps = 7.7e6;
  // A hop that slowed few trains, or none of them used, says nothing.
  h[1].choke_fraction = 0.25;
  CHECK(hop_clearly_below(h, 9.2e6) == -1);
  CHECK(hop_clearly_below(h, 0) == -1);
}

TEST_CASE("measure lowers a capacity over twice a hop's fastest train to that hop's rate") {
  MeasureResult m = measured("reply_gaps", 134.14e6, 132.87e6, 135.43e6, {{"verdict", "adopted"}},
                             {{513.5e6, 0.625}, {44.81e6, 1.0}, {81.56e6, 0.5}, {81.36e6, 0.0}});
  const std::vector<std::pair<double, double>> spread = {
      {380.2e6, 583.6e6}, {35.65e6, 45.14e6}, {19.60e6, 132.3e6}, {19.55e6, 132.0e6}};
  for (std::size_t i = 0; i < spread.size(); ++i) {
    m.hops.hops[i].rate_low_bps = spread[i].first;
    m.hops.hops[i].rate_high_bps = spread[i].second;
  }
  m.hops.bottleneck_hop = 2;
  SECTION("a hop before the target") {
    double C = 134.14e6;
    narrow_capacity_from_hops(m, &C);
    CHECK(C == 44.81e6);
    CHECK(m.capacity.capacity_bps == 44.81e6);
    CHECK(m.capacity.capacity_source == "hop_dispersion");
    // From the hop's slowest train up to twice it: the truth, 44.80, inside.
    CHECK(m.capacity.low_bps == Approx(35.65e6));
    CHECK(m.capacity.high_bps == Approx(71.3e6));
    CHECK(m.hops.bottleneck_hop == 2);
    REQUIRE(m.capacity.warnings.size() == 1);
    CHECK(m.capacity.warnings[0].code == "capacity_from_hop");
  }
  SECTION("the target's own hop is the capacity trains' reading: left out") {
    m.hops.target_reached = true;
    m.hops.target_addr = m.hops.hops.back().addr = "198.18.4.2";
    for (auto& hop : m.hops.hops) hop.choke_fraction = 0.0;
    m.hops.hops.back().choke_fraction = 1.0;
    m.hops.hops.back().rate_high_bps = 45e6;
    double C = 134.14e6;
    narrow_capacity_from_hops(m, &C);
    CHECK(C == 134.14e6);
    CHECK(m.capacity.capacity_source == "reply_gaps");
  }
}

TEST_CASE("a hop whose replies come back closer than its markers were sent takes no part",
          "[hops]") {
  // 20 Mbit/s into the target; a busy 5 Mbit/s way back from it returns its
  // two replies 86 us apart for a train sent over ~1 ms (lab, 2026-11-28).
  Chain c;
  c.rate_bps = {1e9, 20e6};
  c.jitter_ns = 20 * kUs;
  const RecursiveTrain rt = train_for(2, 232);
  std::vector<HopTrainTiming> v = many(rt, c, 8, 5u);
  const HopsEstimate plain = estimate_hops(v, HopsFilter{});
  REQUIRE(plain.bottleneck == 1);
  CHECK(plain.hops[1].compressed_fraction == 0);
  CHECK_FALSE(plain.hops[1].compressed());
  SECTION("the target's replies compressed in every train: no bottleneck from them") {
    for (auto& t : v) t.tail_reply[1] = t.head_reply[1] + 86 * kUs;
    for (const auto& t : v) CHECK(compressed_in_train(t, 1));
    const HopsEstimate e = estimate_hops(v, HopsFilter{});
    CHECK(e.hops[1].compressed());
    CHECK(e.hops[1].compressed_fraction == Approx(1.0));
    CHECK_FALSE(e.hops[1].used);
    CHECK(e.hops[0].used);
    CHECK_FALSE(e.hops[0].compressed());
    CHECK(e.bottleneck != 1);
  }
  SECTION("one train of eight compressed (noise) changes nothing") {
    v[3].tail_reply[1] = v[3].head_reply[1] + 86 * kUs;
    const HopsEstimate e = estimate_hops(v, HopsFilter{});
    CHECK(e.hops[1].compressed_trains == 1);
    CHECK_FALSE(e.hops[1].compressed());
    CHECK(e.bottleneck == 1);
  }
  SECTION("three trains of eight compressed, the others' replies spread by the way back: the "
          "target takes no part (lab: 3 of 7 in 1 run of 6)") {
    for (int i : {1, 4, 6}) v[i].tail_reply[1] = v[i].head_reply[1] + 86 * kUs;
    for (int i : {0, 2, 3}) v[i].tail_reply[1] = v[i].head_reply[1] + 2 * kMs;
    const HopsEstimate e = estimate_hops(v, HopsFilter{});
    CHECK(e.hops[1].compressed_trains == 3);
    CHECK(e.hops[1].compressed());
    CHECK_FALSE(e.hops[1].used);
    CHECK(e.bottleneck != 1);
  }
  SECTION("a router's late ICMP reply at hop 1 does not make the target look compressed") {
    for (auto& t : v) t.tail_reply[0] += 5 * kMs;
    const HopsEstimate e = estimate_hops(v, HopsFilter{});
    CHECK(e.hops[1].compressed_trains == 0);
    CHECK(e.hops[1].used);
  }
}

TEST_CASE("narrow_link_is_last: every hop before the target faster than the gaps") {
  // Benchmark path 49 at 13a7fd3: 82, 55.3, 43.6, 596 and 17.5 Mbit/s (the
  // last the narrow one, 85% on/off); gaps 17.34 up to 17.43, refused.
  const std::vector<HopRate> h = {{true, 80.98e6, 1.0}, {true, 56.86e6, 1.0},
                                  {true, 43.42e6, 1.0}, {true, 43.3e6, 0.0},
                                  {true, 11.79e6, 1.0}};
  CHECK(narrow_link_is_last(h, 17.43e6));
  // A hop before the target at the gaps' rate: the narrow link is there,
  // and a loaded link after it may have squeezed the gaps.
  std::vector<HopRate> mid = h;
  mid[2].rate_bps = 17.9e6;
  CHECK_FALSE(narrow_link_is_last(mid, 17.43e6));
  // A hop before the target that gave no rate: it may hide the narrow link.
  std::vector<HopRate> hidden = h;
  hidden[1].used = false;
  CHECK_FALSE(narrow_link_is_last(hidden, 17.43e6));
  // The target faster than the gaps: they read no link of this path.
  std::vector<HopRate> fast = h;
  fast.back().rate_bps = 30e6;
  CHECK_FALSE(narrow_link_is_last(fast, 17.43e6));
  // One link: the target's is the last.
  CHECK(narrow_link_is_last({{true, 9e6, 1.0}}, 12e6));
  CHECK_FALSE(narrow_link_is_last({}, 12e6));
  CHECK_FALSE(narrow_link_is_last(h, 0));
}

TEST_CASE("narrow_hop_unchanged_after: no link after the narrow hop changed the trains") {
  // The random-path benchmark with seed 2034 at 1f41b93, path 2: 71.3, 100.3,
  // 205.5, 54.2 (Poisson at 39%) and 195.0 Mbit/s; gaps up to 54.48.
  const std::vector<HopRate> h = {{true, 70.66e6, 1.0},
                                  {true, 70.50e6, 0.0},
                                  {true, 70.44e6, 0.0},
                                  {true, 40.28e6, 1.0},
                                  {true, 40.15e6, 0.0}};
  CHECK(narrow_hop_unchanged_after(h, 54.48e6) == 3);
  CHECK_FALSE(narrow_link_is_last(h, 54.48e6));
  // A later hop that slowed the trains further: a loaded link after hop 4.
  std::vector<HopRate> slowed = h;
  slowed[4].rate_bps = 36e6;
  CHECK(narrow_hop_unchanged_after(slowed, 54.48e6) == -1);
  // ... or sped them up (compressed them back towards a faster rate).
  std::vector<HopRate> faster = h;
  faster[4].rate_bps = 44e6;
  CHECK(narrow_hop_unchanged_after(faster, 54.48e6) == -1);
  // A later hop whose replies came back closer than they left in a train.
  std::vector<HopRate> squeezed = h;
  squeezed[4].compressed_fraction = 0.125;
  CHECK(narrow_hop_unchanged_after(squeezed, 54.48e6) == -1);
  // A hop before it that gave no rate may hide the narrow link.
  std::vector<HopRate> hidden = h;
  hidden[1].used = false;
  CHECK(narrow_hop_unchanged_after(hidden, 54.48e6) == -1);
  // The slow hop is the target: that is narrow_link_is_last's shape.
  const std::vector<HopRate> last(h.begin(), h.begin() + 4);
  CHECK(narrow_hop_unchanged_after(last, 54.48e6) == -1);
  CHECK(narrow_link_is_last(last, 54.48e6));
  CHECK(narrow_hop_unchanged_after(h, 0) == -1);
  CHECK(narrow_hop_unchanged_after({}, 54.48e6) == -1);
}

TEST_CASE("measure takes refused gaps when no link after the narrow one changed the trains") {
  // The same path 2: trains 41.38 [37.95, 54.48] under the Poisson load of
  // the narrow link; gaps 53.93 [53.53, 54.48], refused as squeezed after the
  // narrow link for least-delayed spans at 51.78 (0.96 of them); truth 53.75.
  const nlohmann::json gaps = {{"verdict", "squeezed_after_narrow"},
                               {"capacity_bps", 53.93e6},
                               {"low_bps", 53.53e6},
                               {"high_bps", 54.48e6},
                               {"min_delay_bps", 51.78e6}};
  MeasureResult m =
      measured("rst_trains", 41.38e6, 37.95e6, 54.48e6, gaps,
               {{70.66e6, 1.0}, {70.50e6, 0.0}, {70.44e6, 0.0}, {40.28e6, 1.0}, {40.15e6, 0.0}});
  m.hops.target_reached = true;
  m.hops.target_addr = "198.18.5.2";
  m.hops.hops.back().addr = "198.18.5.2";
  m.hops.bottleneck_hop = 5;
  m.hops.hops[3].rate_low_bps = 38.34e6;
  m.hops.hops[3].rate_high_bps = 50.15e6;
  MeasureResult far_delay = m, near_trains = m, slowed_after = m, idle_narrow = m;
  double C = 41.38e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 53.93e6);
  CHECK(m.capacity.capacity_source == "reply_gaps");
  CHECK(m.capacity.low_bps == 53.53e6);
  CHECK(m.capacity.high_bps == 54.48e6);
  REQUIRE(m.capacity.warnings.size() == 1);
  CHECK(m.capacity.warnings[0].code == "gaps_at_narrow_hop");
  CHECK(m.hops.bottleneck_hop == 4);
  // Least-delayed spans over a tenth under the gaps: pairs squeezed after
  // the narrow link read the later link; not taken.
  far_delay.capacity.gap_check["min_delay_bps"] = 45e6;
  C = 41.38e6;
  narrow_capacity_from_hops(far_delay, &C);
  CHECK(far_delay.capacity.capacity_source == "rst_trains");
  // Trains within a tenth of the gaps: not taken either.
  near_trains.capacity.capacity_bps = 49.5e6;
  C = 49.5e6;
  narrow_capacity_from_hops(near_trains, &C);
  CHECK(near_trains.capacity.capacity_source == "rst_trains");
  // Every hop train left hop 4 at the trains' rate: an idle narrow link the
  // trains read, the gaps squeezed after it (the benchmark's path 33 at
  // 13a7fd3: hop 2 at 8.04 [7.56, 8.04], trains 7.98, gaps 11.55).
  idle_narrow.hops.hops[3].rate_high_bps = 42.5e6;
  C = 41.38e6;
  narrow_capacity_from_hops(idle_narrow, &C);
  CHECK(idle_narrow.capacity.capacity_source != "reply_gaps");
  // The target slower than hop 4 by over 5%: a loaded link after it.
  slowed_after.hops.hops.back().rate_bps = 36e6;
  C = 41.38e6;
  narrow_capacity_from_hops(slowed_after, &C);
  CHECK(slowed_after.capacity.capacity_source != "reply_gaps");
}

TEST_CASE("measure takes refused gaps when the narrow link is the last one") {
  // Benchmark path 38 at 13a7fd3: 214, 530, 436, 147 and 123.7 Mbit/s, the
  // last the narrow one (33% on/off), TCP on links 1, 2 and 4; trains 86.7
  // [80.8, 130.9 widened], gaps 125.2 [121.3, 129.9] refused as squeezed
  // after the narrow link (truth 122.6).
  const nlohmann::json gaps = {{"verdict", "squeezed_after_narrow"}, {"capacity_bps", 125.17e6},
                               {"low_bps", 121.27e6}, {"high_bps", 129.92e6}};
  MeasureResult m = measured("rst_trains", 86.66e6, 80.82e6, 130.85e6, gaps,
                             {{210.3e6, 1.0}, {210.0e6, 0.14}, {210.6e6, 0.0},
                              {146.95e6, 0.86}, {95.74e6, 0.57}});
  m.hops.target_reached = true;
  m.hops.target_addr = "198.18.5.2";
  m.hops.hops.back().addr = "198.18.5.2";
  m.hops.bottleneck_hop = 5;
  MeasureResult loaded_after = m;
  MeasureResult not_reached = m;
  double C = 86.66e6;
  narrow_capacity_from_hops(m, &C);
  CHECK(C == 125.17e6);
  CHECK(m.capacity.capacity_bps == 125.17e6);
  CHECK(m.capacity.capacity_source == "reply_gaps");
  CHECK(m.capacity.low_bps == 121.27e6);
  CHECK(m.capacity.high_bps == 129.92e6);
  REQUIRE(m.capacity.warnings.size() == 1);
  CHECK(m.capacity.warnings[0].code == "gaps_at_last_hop");
  CHECK(m.hops.bottleneck_hop == 5);
  // Hop 4 at the gaps' rate: the narrow link may be there, a loaded link
  // after it: the gaps are not taken.
  loaded_after.hops.hops[3].rate_bps = 126e6;
  C = 86.66e6;
  narrow_capacity_from_hops(loaded_after, &C);
  CHECK(loaded_after.capacity.capacity_source != "reply_gaps");
  // The last hop not the target: the path goes on past what we saw.
  not_reached.hops.target_reached = false;
  C = 86.66e6;
  narrow_capacity_from_hops(not_reached, &C);
  CHECK(not_reached.capacity.capacity_source == "rst_trains");
  CHECK(C == 86.66e6);
}
