// Issue 6: who answers in the target's name, and did the RST load arrive?
// The pure checks of estimate/middlebox.hpp and the full-size SYN train.
#include <catch2/catch.hpp>
#include "app/plumbing/path_checks.hpp"
#include "estimate/capacity_gaps.hpp"

#include "estimate/capacity.hpp"
#include "estimate/middlebox.hpp"
#include "match/match.hpp"
#include "plan/syn_train.hpp"
#include "report/writers.hpp"

using namespace lw;

namespace {

TtlAnswer target_reply(int ttl) { return {TtlAnswer::kTargetReply, 0xC6120302u, ttl}; }
TtlAnswer time_exceeded(std::uint32_t from, int ttl) {
  return {TtlAnswer::kTimeExceeded, from, ttl};
}
TtlAnswer silence() { return {}; }

}  // namespace

TEST_CASE("initial TTL guess and reply hop count", "[middlebox]") {
  CHECK(initial_ttl_guess(0) == 0);
  CHECK(initial_ttl_guess(1) == 32);
  CHECK(initial_ttl_guess(32) == 32);
  CHECK(initial_ttl_guess(33) == 64);
  CHECK(initial_ttl_guess(64) == 64);
  CHECK(initial_ttl_guess(113) == 128);
  CHECK(initial_ttl_guess(129) == 255);
  CHECK(initial_ttl_guess(255) == 255);
  // A SYN needs (routers on the way back) + 1 of TTL to reach the replier.
  CHECK(reply_hops(64) == 1);    // directly attached
  CHECK(reply_hops(62) == 3);    // the lab's prober - r1 - r2 - target
  CHECK(reply_hops(113) == 16);  // Windows, 15 routers
  CHECK(reply_hops(243) == 13);  // a router's 255
  CHECK(reply_hops(0) == 0);
}

TEST_CASE("TTL check: a host answers a SYN with just enough TTL", "[middlebox]") {
  const ReplierCheck r = classify_replier(62, target_reply(62), target_reply(62));
  CHECK(r.verdict == ReplierVerdict::kConsistent);
  CHECK(r.reply_hops == 3);
  CHECK(r.box == 0);
  CHECK(std::string(replier_verdict_name(r.verdict)) == "consistent");
  // The SYN with TTL + 1 need not even be answered.
  CHECK(classify_replier(62, target_reply(62), silence()).verdict == ReplierVerdict::kConsistent);
}

TEST_CASE("TTL check: a router answering in the target's name", "[middlebox]") {
  // The lab: r1 (198.18.1.2) rejects SYNs with a reset, TTL 64 on arrival.
  const std::uint32_t r1 = 0xC6120102u;
  ReplierCheck r = classify_replier(64, time_exceeded(r1, 64), target_reply(64));
  CHECK(r.verdict == ReplierVerdict::kMiddlebox);
  CHECK(r.reply_hops == 1);
  CHECK(r.box == r1);
  CHECK(r.box_hops == 1);
  // A firewall 5 hops out whose ICMP starts at 255 and its resets at 64:
  // both come back over 5 hops.
  r = classify_replier(60, time_exceeded(r1, 251), target_reply(60));
  CHECK(r.verdict == ReplierVerdict::kMiddlebox);
  CHECK(r.reply_hops == 5);
}

TEST_CASE("TTL check: asymmetric routes and silence are not a middlebox", "[middlebox]") {
  const std::uint32_t x = 0x0A000001u;
  // Forward path one hop longer: the router before the target is nearer on
  // the way back than the target.
  ReplierCheck r = classify_replier(56, time_exceeded(x, 248), target_reply(56));
  CHECK(r.reply_hops == 9);
  CHECK(r.box_hops == 8);
  CHECK(r.verdict == ReplierVerdict::kForwardLonger);
  CHECK(r.box == 0);
  // Two or more hops longer: TTL + 1 expires as well.
  r = classify_replier(56, time_exceeded(x, 247), time_exceeded(x, 248));
  CHECK(r.verdict == ReplierVerdict::kForwardLonger);
  // A host with initial TTL 64 forty hops away looks like 32 - 24 + 1 = 9
  // hops; TTL 9 and 10 both expire on the way: never a middlebox.
  r = classify_replier(24, time_exceeded(x, 247), time_exceeded(x, 246));
  CHECK(r.reply_hops == 9);
  CHECK(r.verdict == ReplierVerdict::kForwardLonger);
  // A silent hop proves nothing.
  CHECK(classify_replier(62, silence(), target_reply(62)).verdict ==
        ReplierVerdict::kInconclusive);
  CHECK(classify_replier(62, silence(), silence()).verdict == ReplierVerdict::kInconclusive);
  // The expiring router is farther back than the replier: no simple picture.
  CHECK(classify_replier(62, time_exceeded(x, 250), target_reply(62)).verdict ==
        ReplierVerdict::kInconclusive);
  // Unreachable or anything else at TTL h.
  CHECK(classify_replier(62, {TtlAnswer::kOther, x, 60}, target_reply(62)).verdict ==
        ReplierVerdict::kInconclusive);
  CHECK(classify_replier(0, silence(), silence()).verdict == ReplierVerdict::kNotChecked);
}

TEST_CASE("replies of one run from more than one box", "[middlebox]") {
  std::vector<ReplyStamp> same(40, ReplyStamp{62, 0});
  CHECK_FALSE(mixed_repliers(same).mixed);
  CHECK(mixed_repliers(same).total == 40);
  // One stray reply is not enough (an IP ID that counted through zero).
  std::vector<ReplyStamp> counting;
  for (int i = 0; i < 40; ++i) counting.push_back({117, static_cast<std::uint16_t>(i)});
  CHECK_FALSE(mixed_repliers(counting).mixed);
  // Half from the host 3 hops away, half from a box 1 hop away.
  std::vector<ReplyStamp> two = same;
  for (int i = 0; i < 20; ++i) two[static_cast<std::size_t>(i)] = {64, 0};
  MixedReplies m = mixed_repliers(two);
  CHECK(m.mixed);
  CHECK(m.minority == 20);
  CHECK(m.hops.size() == 2);
  // Same hop count, but IP IDs from a counter and from a stack that sends 0.
  std::vector<ReplyStamp> ids = same;
  for (int i = 0; i < 10; ++i) ids[static_cast<std::size_t>(i)] = {62, static_cast<std::uint16_t>(100 + i)};
  m = mixed_repliers(ids);
  CHECK(m.mixed);
  CHECK(m.hops == std::vector<int>{3});
  // Replies without a TTL (none recorded) are ignored.
  CHECK(mixed_repliers({{0, 0}, {0, 5}}).total == 0);
}

TEST_CASE("capacity at or above what we could send", "[middlebox]") {
  CHECK(send_limit_bps(0, 0, 0) == 0);
  CHECK(send_limit_bps(950e6, 1e9, 10e9) == Approx(950e6));
  CHECK(send_limit_bps(0, 20e6, 0) == Approx(20e6));
  CHECK(send_limit_bps(3e9, 0, 1e9) == Approx(1e9));
  CHECK(capacity_at_send_rate(949e6, 1e9));
  CHECK(capacity_at_send_rate(1.2e9, 1e9));
  CHECK_FALSE(capacity_at_send_rate(49.5e6, 1e9));
  CHECK_FALSE(capacity_at_send_rate(800e6, 1e9));
  CHECK_FALSE(capacity_at_send_rate(49.5e6, 0));  // nothing known: no claim
}

TEST_CASE("judging the load by full-size SYN trains", "[middlebox]") {
  // RST trains at our own 1 Gbit/s, SYN trains at the 50 Mbit/s link: dropped.
  LoadCheck j = judge_load(997e6, {49.6e6, 49.7e6, 49.5e6, 50.1e6, 49.4e6}, 0);
  CHECK(j.checked);
  CHECK(j.dropped);
  CHECK(j.syn_capacity_bps == Approx(49.6e6));
  CHECK(j.ratio == Approx(49.6e6 / 997e6));
  // The path is as fast as we send: the SYN trains were not compressed either.
  j = judge_load(950e6, {}, 3);
  CHECK_FALSE(j.dropped);
  CHECK(j.syn_capacity_bps == 0);
  // A couple compressed by cross traffic among uncompressed ones: no drop.
  CHECK_FALSE(judge_load(950e6, {400e6, 420e6, 390e6}, 5).dropped);
  // Slower, but not by enough.
  CHECK_FALSE(judge_load(950e6, {800e6, 790e6, 810e6}, 0).dropped);
  // Too few trains to say.
  CHECK_FALSE(judge_load(950e6, {50e6, 50e6}, 0).dropped);
}

TEST_CASE("trains far faster than a slow estimate cast doubt on it", "[middlebox]") {
  // The saturated 3 Mbit/s link: 7 of 23 trains at 0.8-1.6 Gbit/s, the
  // rest 3-46 Mbit/s, an estimate of 7.87 against our 1 Gbit/s.
  std::vector<double> r = {11.7e6, 6.8e6,  985e6, 1375e6, 868e6, 1495e6, 7.9e6,  9.5e6,
                           23e6,   1574e6, 7.9e6, 46e6,   776e6, 1320e6, 11.7e6, 15.7e6,
                           4.0e6,  7.9e6,  3.0e6, 4.3e6,  3.0e6, 6.8e6,  4.7e6};
  CHECK(fast_among_slow(r, 7.87e6, 1e9));
  CHECK(fast_trains(r, 1e9) == 7);
  CHECK(fast_trains(r, 0) == 0);
  // Not when the estimate is a tenth of our rate or more (a path near our
  // rate, or a bucket's burst, has its own checks).
  CHECK_FALSE(fast_among_slow(r, 150e6, 1e9));
  // Nor for one or two such trains among many: a reply bunched now and then.
  std::vector<double> few(20, 5e6);
  few[3] = 900e6;
  few[9] = 950e6;
  CHECK_FALSE(fast_among_slow(few, 5e6, 1e9));
  // Nor for too few trains, nor with nothing known of our rate.
  CHECK_FALSE(fast_among_slow({900e6, 950e6, 5e6}, 5e6, 1e9));
  CHECK_FALSE(fast_among_slow(r, 7.87e6, 0));
}

TEST_CASE("a shaper stream's rate is confirmed by whole full-size SYN trains", "[middlebox]") {
  // The trains' 733 Mbit/s on a saturated 3 Mbit/s link: whole SYN trains
  // read the link, far below: not confirmed.
  RateConfirm r = confirm_rate(733e6, {2.9e6, 3.1e6}, 0, 2);
  CHECK_FALSE(r.confirmed);
  CHECK(r.whole == 2);
  CHECK(r.syn_bps == Approx(3.0e6));
  // Every SYN train lost a reply: nothing confirms, whatever the rate.
  r = confirm_rate(1e6, {}, 0, 4);
  CHECK_FALSE(r.confirmed);
  CHECK(r.whole == 0);
  CHECK(r.syn_bps == 0);
  // One whole train is not enough, however fast.
  CHECK_FALSE(confirm_rate(50e6, {49e6}, 0, 4).confirmed);
  // A loaded 100 Mbit/s path: short SYN trains read below the estimate, but
  // not by half.
  r = confirm_rate(95e6, {40e6, 70e6}, 0, 2);
  CHECK(r.confirmed);
  CHECK(r.syn_bps == Approx(55e6));
  // Trains at 11.7 Mbit/s on a 3 Mbit/s link kept full by TCP: whole SYN
  // trains at a quarter of it do not confirm it.
  CHECK_FALSE(confirm_rate(11.7e6, {2.96e6, 2.97e6}, 0, 2).confirmed);
  // A bucket that let the trains through at our own rate lets the SYN
  // trains through at it too: uncompressed trains confirm any rate.
  CHECK(confirm_rate(990e6, {}, 2, 2).confirmed);
  CHECK(confirm_rate(990e6, {100e6}, 2, 3).confirmed);
  // ... but not where the compressed ones are the majority and far below.
  CHECK_FALSE(confirm_rate(990e6, {10e6, 12e6}, 1, 3).confirmed);
  // Nothing sent (a cap): not confirmed.
  CHECK_FALSE(confirm_rate(10e6, {}, 0, 0).confirmed);
}

namespace {

// Capacity warnings of `codes`, as the checks read them.
std::vector<Warning> warned(std::initializer_list<WarningCode> codes) {
  std::vector<Warning> w;
  for (WarningCode c : codes) w.push_back({c, "x"});
  return w;
}

}  // namespace

TEST_CASE("load lost unseen at a full queue: the SYN trains judged by a tighter bound",
          "[middlebox]") {
  // The tally halved (or kept the short trains) and one length was left.
  CHECK(load_lost_unseen(
      warned({WarningCode::kTrainsShortened, WarningCode::kSingleLengthEstimate})));
  CHECK(load_lost_unseen(
      warned({WarningCode::kSingleLengthEstimate, WarningCode::kLoadLossSuspected})));
  // Either alone: the lengths were compared after it, or nothing was lost.
  CHECK_FALSE(load_lost_unseen(warned({WarningCode::kTrainsShortened})));
  CHECK_FALSE(load_lost_unseen(warned({WarningCode::kLoadLossSuspected})));
  CHECK_FALSE(load_lost_unseen(warned({WarningCode::kSingleLengthEstimate})));
  CHECK_FALSE(load_lost_unseen({}));
  // The lab's 10.4 KB queue kept full by TCP: 2 whole SYN trains at 5.156
  // and 5.147 against RST trains at 6.85 (0.75, not dropped by judge_load).
  const std::vector<double> syn = {5.156e6, 5.147e6};
  CHECK_FALSE(judge_load(6.85e6, syn, 0).dropped);
  const LoadCheck j = judge_unseen_loss(6.85e6, syn, 0);
  CHECK(j.dropped);
  CHECK(j.syn_capacity_bps == Approx(5.1515e6));
  // Within 10% of the trains: they stand.
  CHECK_FALSE(judge_unseen_loss(5.5e6, syn, 0).dropped);
  // One whole train is not enough; uncompressed ones outnumbering them speak
  // against it.
  CHECK_FALSE(judge_unseen_loss(6.85e6, {5.15e6}, 0).dropped);
  CHECK_FALSE(judge_unseen_loss(6.85e6, syn, 3).dropped);
}

TEST_CASE("trains that lost load may read high: gaps below them that the spans agree with stand",
          "[middlebox]") {
  CHECK(trains_lost_load(warned({WarningCode::kTrainsShortened})));
  CHECK(trains_lost_load(warned({WarningCode::kLoadLossSuspected})));
  CHECK_FALSE(trains_lost_load(warned({WarningCode::kSingleLengthEstimate})));
  CHECK_FALSE(trains_lost_load({}));
  // The random-path benchmark's seed 2039, path 5: trains 20.47 after a
  // halving, gaps 5.260 [5.253, 5.266], least-delayed 5.260.
  GapEstimate g;
  g.capacity.valid = true;
  g.capacity.capacity_bps = 5.260e6;
  g.capacity.low_bps = 5.253e6;
  g.capacity.high_bps = 5.266e6;
  g.min_delay_bps = 5.260e6;
  CapacityEstimate trains;
  trains.valid = true;
  trains.capacity_bps = 20.47e6;
  trains.low_bps = 7.0e6;
  trains.high_bps = 21.0e6;
  const bool shortened = trains_lost_load(warned({WarningCode::kTrainsShortened}));
  CHECK(judge_gaps(g, trains, 1e9, shortened, 20.74e6) == "adopted_below");
  CHECK(judge_gaps(g, trains, 1e9, false, 20.74e6) == "below_trains");
}

TEST_CASE("full-size SYN train: drains, markers, acks and the rate cap", "[plan][middlebox]") {
  SeqAllocator seqs(1000);
  SynTrainParams p;
  p.flow = {0xC6120101u, 0xC6120302u, 40000, 47391};
  p.markers = 5;
  p.drain = 2;
  p.packet_size = 1500;
  const Train t = make_syn_train(p, 7, seqs);
  REQUIRE(t.probes.size() == 7);
  REQUIRE(t.markers == std::vector<int>{2, 3, 4, 5, 6});
  for (const auto& q : t.probes) {
    CHECK(q.flags == kSyn);
    CHECK(q.ip_len == 1500);
    CHECK(q.dport == 47391);
    CHECK(q.offset == 0);  // back to back without a cap
    // A SYN with 1460 payload bytes is acknowledged past its data.
    CHECK(q.expected_ack() == q.seq + 1 + 1460);
  }
  CHECK(t.probes[0].role == Role::kDrain);
  CHECK(t.probes[2].role == Role::kMarker);
  CHECK(t.bits_from_head == std::vector<double>{0, 12000, 24000, 36000, 48000});

  // Under --max-rate the schedule fits the bucket the pacer enforces.
  p.max_rate_bps = 20e6;
  const Train capped = make_syn_train(p, 8, seqs);
  CHECK(first_over_rate(capped, 20e6) == -1);
  CHECK(capped.probes.back().offset > 0);

  // Through a 50 Mbit/s FIFO the replies are spread at the link's rate.
  TrainOutcome o;
  o.probes.resize(t.probes.size());
  const Nanos t0 = 1'000'000'000;
  double link_free = 0;
  for (std::size_t i = 0; i < t.probes.size(); ++i) {
    o.probes[i].sent = t0 + static_cast<Nanos>(i) * 2 * kUs;
    link_free = std::max(link_free, 2e-6 * static_cast<double>(i)) + 12000 / 50e6;
    o.probes[i].reply = t0 + 300 * kUs + from_seconds(link_free);
    o.probes[i].kind = ReplyKind::kRstAck;
  }
  const CapacitySample s = evaluate_capacity_train(timing_of(t, o), CapacityFilter{});
  CHECK(s.kept());
  CHECK(s.capacity_bps == Approx(50e6).epsilon(0.01));
}

TEST_CASE("capacity document: replier fields and the labelled SYN-train fallback", "[middlebox]") {
  CapacityResult r;
  r.target = r.target_addr = "198.18.3.2";
  r.valid = true;
  r.capacity_bps = 1e9;
  r.low_bps = r.high_bps = 1e9;
  r.replier = {64, 1, "middlebox", "198.18.1.2"};
  nlohmann::json j = to_json(r);
  CHECK(j["reply_ttl"] == 64);
  CHECK(j["reply_hops"] == 1);
  CHECK(j["replier_check"] == "middlebox");
  CHECK(j["replier_box"] == "198.18.1.2");
  CHECK(j["capacity_source"] == "rst_trains");
  CHECK(j["capacity_confidence"] == "normal");
  CHECK(j["load_check"].is_null());

  r.capacity_source = "syn_pairs";
  r.capacity_bps = 49.6e6;
  r.load_check.ran = r.load_check.dropped = true;
  r.load_check.trains_used = 5;
  r.load_check.syn_capacity_bps = 49.6e6;
  r.load_check.rst_capacity_bps = 998e6;
  r.load_check.ratio = 49.6e6 / 998e6;
  r.replier = {62, 3, "consistent", ""};
  j = to_json(r);
  CHECK(j["replier_box"].is_null());
  CHECK(j["capacity_confidence"] == "low");
  CHECK(j["load_check"]["load_dropped"] == true);
  CHECK(j["load_check"]["rst_capacity_bps"] == Approx(998e6));
  const std::string text = to_text(r);
  CHECK(text.find("~49.60 Mbit/s") != std::string::npos);
  CHECK(text.find("low confidence") != std::string::npos);
  CHECK(text.find("TTL 62 (3 hops back), TTL check: consistent") != std::string::npos);
}
