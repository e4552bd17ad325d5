// `linkwidth hops`: command lines to config or rejection; the JSON and text
// renderings of a hops result.
#include <catch2/catch.hpp>

#include "app/frontends/cli.hpp"
#include "usage_rejection.hpp"
#include "linkwidth/error.hpp"
#include "report/hops_writers.hpp"

using namespace lw;

namespace {
std::string hops_rejection(std::vector<std::string> args) {
  args.insert(args.begin(), {"hops", "198.18.4.2"});
  return test::rejection(args);
}
}  // namespace

TEST_CASE("hops command lines", "[cli][hops]") {
  const auto d = parse_cli({"hops", "198.18.4.2"}).config;
  CHECK(d.command == Command::kHops);
  CHECK(d.hop_markers == HopMarkers::kAuto);
  CHECK(d.max_trains == 8);  // hops default, not capacity's 40
  CHECK(d.min_trains == 3);
  CHECK(d.max_hops == 30);
  CHECK(parse_cli({"capacity", "198.18.4.2"}).config.max_trains == 40);
  // measure and availbw: a capacity phase of 24 trains unless told otherwise.
  CHECK(parse_cli({"measure", "198.18.4.2"}).config.max_trains == 24);
  CHECK(parse_cli({"availbw", "198.18.4.2"}).config.max_trains == 24);
  CHECK(parse_cli({"measure", "198.18.4.2", "--trains", "40"}).config.max_trains == 40);
  CHECK(parse_cli({"measure", "198.18.4.2", "--trains", "6"}).config.max_trains == 6);
  // A --min-trains above 24 raises the cap with it, not an error.
  CHECK(parse_cli({"measure", "198.18.4.2", "--min-trains", "30"}).config.max_trains == 30);
  const auto c =
      parse_cli({"hops", "198.18.4.2", "--hop-markers", "ttl", "--trains", "2", "--max-hops", "12",
                 "--icmp-rate", "10", "--icmp-burst", "50", "--min-step", "0.3"})
          .config;
  CHECK(c.hop_markers == HopMarkers::kTtl);
  CHECK(c.max_trains == 2);
  CHECK(c.min_trains == 2);
  CHECK(c.max_hops == 12);
  CHECK(c.icmp_rate == 10);
  CHECK(c.icmp_burst == 50);
  CHECK(c.min_step == 0.3);
}

TEST_CASE("bad hops command lines are rejected", "[cli][hops]") {
  CHECK(hops_rejection({"--hop-markers", "icmp"}).find("auto, ttl or addr") != std::string::npos);
  CHECK(hops_rejection({"--max-hops", "0"}).find("--max-hops") != std::string::npos);
  CHECK(hops_rejection({"--max-hops", "65"}).find("--max-hops") != std::string::npos);
  CHECK(hops_rejection({"--icmp-rate", "0"}).find("--icmp-rate") != std::string::npos);
  CHECK(hops_rejection({"--icmp-burst", "1"}).find("two replies") != std::string::npos);
  CHECK(hops_rejection({"--min-step", "-1"}).find("--min-step") != std::string::npos);
  CHECK(hops_rejection({"--trains", "2", "--min-trains", "3"}).find("--min-trains") !=
        std::string::npos);
  CHECK(hops_rejection({}).empty());
}

TEST_CASE("hops result: JSON fields and the text table", "[hops]") {
  HopsResult r;
  r.target = r.target_addr = "198.18.3.2";
  r.stop_reason = StopReason::kMaxTrains;
  HopRecord a;
  a.ttl = 1;  // silent: unknown address, no numbers
  a.marker_kind = MarkerKind::kTtl;
  HopRecord b;
  b.ttl = 2;
  b.addr = "198.18.2.2";
  b.marker_kind = MarkerKind::kAddr;
  b.replies = 8;
  b.used = true;
  b.dispersion_s = 0.004;
  b.rate_bps = 49.5e6;
  b.choke_fraction = 1;
  HopRecord t = b;
  t.ttl = 3;
  t.addr = "198.18.3.2";
  t.marker_kind = MarkerKind::kTarget;
  t.choke_fraction = 0;
  r.hops = {a, b, t};
  r.bottleneck_hop = 2;
  r.bottleneck_earliest_hop = 1;  // hop 1 was silent
  r.bottleneck_addr = "198.18.2.2";
  r.bottleneck_confidence = 0.875;
  r.bottleneck_rate_bps = 49.5e6;
  const auto j = to_json(r);
  CHECK(j["type"] == "hops");
  REQUIRE(j["hops"].size() == 3);
  CHECK(j["hops"][0]["addr"].is_null());
  CHECK(j["hops"][0]["rate_bps"].is_null());
  CHECK(j["hops"][0]["dispersion_s"].is_null());
  CHECK(j["hops"][1]["ttl"] == 2);
  CHECK(j["hops"][1]["rate_bps"] == 49.5e6);
  CHECK(j["hops"][1]["replies"] == 8);
  CHECK(j["hops"][1]["choke_fraction"] == 1.0);
  CHECK(j["bottleneck_hop"] == 2);
  CHECK(j["bottleneck_addr"] == "198.18.2.2");
  CHECK(j["bottleneck_earliest_hop"] == 1);
  CHECK(to_text(r).find("any link into hops 1..2") != std::string::npos);
  CHECK(j["bottleneck_confidence"] == 0.875);
  const std::string text = to_text(r);
  CHECK(text.find(">   2  198.18.2.2") != std::string::npos);
  CHECK(text.find("unknown") != std::string::npos);
  r.bottleneck_hop = 0;
  r.bottleneck_addr.clear();
  const auto none = to_json(r);
  CHECK(none["bottleneck_hop"].is_null());
  CHECK(none["bottleneck_addr"].is_null());
  CHECK(none["bottleneck_earliest_hop"].is_null());
  CHECK(to_text(r).find("none named") != std::string::npos);
}

#include "app/plumbing/prober.hpp"
#include "match/match.hpp"
#include "plan/hops_plan.hpp"

TEST_CASE("recursive train replies: ICMP from routers, RST/ACK from addressed routers",
          "[hops][match]") {
  constexpr std::uint32_t self = 0xC6120101, r1 = 0xC6120102, r2 = 0xC6120202, target = 0xC6120302;
  RecursiveTrainParams p;
  p.flow = {self, target, 40000, 47391};
  p.hops = {{1, r1, MarkerKind::kTtl}, {2, r2, MarkerKind::kAddr}, {3, 0, MarkerKind::kTarget}};
  p.load_packets = 3;
  SeqAllocator seqs(900);
  const RecursiveTrain rt = make_recursive_train(p, 0, seqs);
  std::vector<SendRecord> sent(rt.train.probes.size());
  for (auto& s : sent) s.sent = true;

  auto icmp_from = [&](std::uint32_t router, const Probe& q, Nanos ts) {
    Decoded d;  // time exceeded quoting our probe
    d.ts = ts;
    d.src = router;
    d.dst = self;
    d.proto = 1;
    d.icmp_type = 11;
    d.quote.present = true;
    d.quote.src = q.src;
    d.quote.dst = q.dst;
    d.quote.proto = 6;
    d.quote.sport = q.sport;
    d.quote.dport = q.dport;
    d.quote.seq = q.seq;
    return d;
  };
  auto rst_from = [&](const Probe& q, Nanos ts) {
    Decoded d;
    d.ts = ts;
    d.src = q.dst;
    d.dst = self;
    d.proto = 6;
    d.sport = q.dport;
    d.dport = q.sport;
    d.ack = q.expected_ack();
    d.tcp_flags = kRst | kAck;
    return d;
  };
  const auto& pr = rt.train.probes;
  std::vector<Decoded> cap = {
      icmp_from(r1, pr[rt.head[0]], 100), rst_from(pr[rt.head[1]], 110),
      rst_from(pr[rt.head[2]], 120),      rst_from(pr[rt.tail[2]], 500),
      rst_from(pr[rt.tail[1]], 510),      icmp_from(r1, pr[rt.tail[0]], 520)};
  // A reply from the wrong host for hop 2's marker is not taken.
  Decoded stray = rst_from(pr[rt.tail[1]], 505);
  stray.src = target;
  cap.insert(cap.begin() + 4, stray);
  const TrainOutcome o = match_train(rt.train, sent, cap, self);
  CHECK(o.probes[rt.head[0]].kind == ReplyKind::kIcmp);
  CHECK(o.probes[rt.head[0]].reply_from == r1);
  CHECK(o.probes[rt.tail[0]].reply == 520);
  CHECK(o.probes[rt.head[1]].kind == ReplyKind::kRstAck);
  CHECK(o.probes[rt.head[1]].reply_from == r2);
  CHECK(o.probes[rt.tail[1]].reply == 510);
  CHECK(o.probes[rt.tail[1]].replies == 1);
  CHECK(o.probes[rt.head[2]].reply_from == target);
  CHECK(o.markers_lost == 0);
}

TEST_CASE("capture filter: every peer's TCP on our port for addressed markers", "[hops]") {
  const std::string narrow = capture_filter(0xC6120101, 0xC6120302, 40000);
  const std::string wide = capture_filter(0xC6120101, 0xC6120302, 40000, true);
  CHECK(narrow.find("host 198.18.3.2") != std::string::npos);
  CHECK(wide.find("198.18.3.2") == std::string::npos);
  CHECK(wide.find("tcp and host 198.18.1.1 and port 40000") != std::string::npos);
  CHECK(wide.find("icmp and dst host 198.18.1.1") != std::string::npos);
}
