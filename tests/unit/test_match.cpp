// Matching with lost, duplicated and reordered replies.
#include <catch2/catch.hpp>

#include "match/match.hpp"
#include "plan/capacity_plan.hpp"

using namespace lw;

namespace {

constexpr std::uint32_t kSelf = 0xC6120101, kTarget = 0xC6120202;

Train train() {
  CapacityTrainParams p;
  p.flow = {kSelf, kTarget, 40000, 47391};
  p.load_packets = 4;
  SeqAllocator seqs(5000);
  return make_capacity_train(p, 0, seqs);
}

std::vector<SendRecord> sent_all(const Train& t) {
  std::vector<SendRecord> r(t.probes.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    r[i].sent = true;
    r[i].actual_real = 1000 + static_cast<Nanos>(i) * 10;
  }
  return r;
}

Decoded reply_to(const Probe& p, Nanos ts, std::uint8_t flags = kRst | kAck) {
  Decoded d;
  d.ts = ts;
  d.src = p.dst;
  d.dst = p.src;
  d.proto = 6;
  d.sport = p.dport;
  d.dport = p.sport;
  d.ack = p.expected_ack();
  d.tcp_flags = flags;
  return d;
}

Decoded outgoing(const Probe& p, Nanos ts) {
  Decoded d;
  d.ts = ts;
  d.src = p.src;
  d.dst = p.dst;
  d.proto = 6;
  d.sport = p.sport;
  d.dport = p.dport;
  d.seq = p.seq;
  d.tcp_flags = p.flags;
  return d;
}

}  // namespace

TEST_CASE("all replies present, in order", "[match]") {
  const Train t = train();
  const Probe& head = t.probes[t.markers[0]];
  const Probe& tail = t.probes[t.markers[1]];
  std::vector<Decoded> cap = {outgoing(head, 1500), reply_to(head, 9000), reply_to(tail, 19000)};
  const TrainOutcome o = match_train(t, sent_all(t), cap, kSelf);
  CHECK(o.markers_lost == 0);
  CHECK_FALSE(o.reordered);
  CHECK(o.duplicate_replies == 0);
  CHECK(o.probes[t.markers[0]].reply == 9000);
  CHECK(o.probes[t.markers[0]].left == 1500);
  CHECK(o.probes[t.markers[0]].kind == ReplyKind::kRstAck);
  CHECK(o.probes[t.markers[1]].reply == 19000);
}

TEST_CASE("lost, duplicated and reordered replies are reported", "[match]") {
  const Train t = train();
  const Probe& head = t.probes[t.markers[0]];
  const Probe& tail = t.probes[t.markers[1]];
  SECTION("lost tail") {
    const auto o = match_train(t, sent_all(t), {reply_to(head, 9000)}, kSelf);
    CHECK(o.markers_lost == 1);
    CHECK(o.probes[t.markers[1]].reply == 0);
  }
  SECTION("duplicate head keeps the first arrival") {
    const auto o = match_train(
        t, sent_all(t), {reply_to(head, 9000), reply_to(head, 9500), reply_to(tail, 19000)},
        kSelf);
    CHECK(o.duplicate_replies == 1);
    CHECK(o.probes[t.markers[0]].reply == 9000);
    CHECK(o.probes[t.markers[0]].replies == 2);
  }
  SECTION("tail reply before head reply") {
    const auto o =
        match_train(t, sent_all(t), {reply_to(tail, 8000), reply_to(head, 9000)}, kSelf);
    CHECK(o.reordered);
  }
  SECTION("replies of other flows and wrong ack numbers are ignored") {
    Decoded other = reply_to(head, 9000);
    other.sport = 80;
    Decoded wrong_ack = reply_to(tail, 9100);
    wrong_ack.ack += 7;
    Decoded third_party = reply_to(tail, 9200);
    third_party.src = 0xC6120303;
    const auto o = match_train(t, sent_all(t), {other, wrong_ack, third_party}, kSelf);
    CHECK(o.markers_lost == 2);
  }
  SECTION("SYN/ACK means the port is open") {
    const auto o = match_train(t, sent_all(t), {reply_to(head, 9000, kSyn | kAck)}, kSelf);
    CHECK(o.probes[t.markers[0]].kind == ReplyKind::kSynAck);
  }
}

TEST_CASE("ICMP errors are matched by the quoted sequence number", "[match]") {
  const Train t = train();
  const Probe& head = t.probes[t.markers[0]];
  Decoded icmp;
  icmp.ts = 7000;
  icmp.src = 0xC6120102;
  icmp.dst = kSelf;
  icmp.proto = 1;
  icmp.icmp_type = 11;
  icmp.quote.present = true;
  icmp.quote.src = kSelf;
  icmp.quote.dst = kTarget;
  icmp.quote.proto = 6;
  icmp.quote.sport = head.sport;
  icmp.quote.dport = head.dport;
  icmp.quote.seq = head.seq;
  const auto o = match_train(t, sent_all(t), {icmp}, kSelf);
  CHECK(o.probes[t.markers[0]].kind == ReplyKind::kIcmp);
  CHECK(o.probes[t.markers[0]].reply_from == 0xC6120102);
  CHECK(o.probes[t.markers[0]].icmp_type == 11);
}

TEST_CASE("unsent probes are flagged", "[match]") {
  const Train t = train();
  auto s = sent_all(t);
  s[5].sent = false;
  CHECK(match_train(t, s, {}, kSelf).unsent);
}
