// The typed run-record notes (app/run_notes.hpp): one writer and one strict
// reader per kind, in the format the captures in tests/data hold.
#include <catch2/catch.hpp>

#include "app/plumbing/run_notes.hpp"
#include "report/writers.hpp"

using namespace lw;
using nlohmann::json;

TEST_CASE("run notes are written in the recorded format", "[run_notes]") {
  CHECK(note_json(ClockNote{123}) == json({{"kind", "clock"}, {"mono", 123}}));
  CHECK(note_json(StopNote{4}) == json({{"kind", "stop"}, {"check", 4}}));
  CHECK(note_json(StoppedNote{StopReason::kMaxBytes}) ==
        json({{"kind", "stopped"}, {"reason", "max_bytes"}}));
  CHECK(note_json(BurstNote{7}) == json({{"kind", "burst"}, {"max", 7}}));
  CHECK(note_json(DropsNote{"hops", 2u}) ==
        json({{"kind", "drops"}, {"phase", "hops"}, {"count", 2u}}));
  CHECK(note_json(ShaperStreamNote{2, 32000000}) ==
        json({{"kind", "shaper_stream"}, {"train", 2}, {"bytes", 32000000}}));
  CHECK(note_json(ReplyLimitNote{3}) == json({{"kind", "reply_limit"}, {"train", 3}}));
  CHECK(note_json(TrainDoneNote{3, 10, 20}) ==
        json({{"kind", "train_done"}, {"train", 3}, {"start_mono", 10}, {"end_mono", 20}}));
  // A train note carries the phase's own fields too.
  const json t = note_json(TrainNote{"capacity", 5, 42}, {{"group", 1}, {"n", 25}});
  CHECK(t == json({{"kind", "train"},
                   {"phase", "capacity"},
                   {"train", 5},
                   {"probes", 42},
                   {"group", 1},
                   {"n", 25}}));
}

TEST_CASE("run notes read back strictly", "[run_notes]") {
  const json t = note_json(TrainNote{"hops", 9, 17}, {{"extra", true}});
  const TrainNote n = read_note<TrainNote>(t);
  CHECK(n.phase == "hops");
  CHECK(n.train == 9);
  CHECK(n.probes == 17);
  CHECK(read_note<StoppedNote>(note_json(StoppedNote{StopReason::kMaxTime})).reason ==
        StopReason::kMaxTime);

  // A renamed or missing field is an error, not a default.
  json bad = t;
  bad.erase("probes");
  CHECK_THROWS_AS(read_note<TrainNote>(bad), json::exception);
  CHECK_THROWS_AS(read_note<ClockNote>(json({{"kind", "clock"}, {"time", 5}})), json::exception);
  CHECK_THROWS_AS(read_note<BurstNote>(json({{"kind", "burst"}, {"max", "many"}})),
                  json::exception);
  // Of the wrong kind.
  CHECK_THROWS_AS(read_note<StopNote>(note_json(ClockNote{1})), json::exception);
  // An unknown stop reason is a damaged record (lw::Error, exit 2).
  CHECK_THROWS(read_note<StoppedNote>(json({{"kind", "stopped"}, {"reason", "tired"}})));
  // train_done: older capacity captures hold the train alone; half a pair is damaged.
  const TrainDoneNote old = read_note<TrainDoneNote>(json({{"kind", "train_done"}, {"train", 0}}));
  CHECK(old.start_mono == 0);
  CHECK(old.end_mono == 0);
  CHECK_THROWS_AS(
      read_note<TrainDoneNote>(json({{"kind", "train_done"}, {"train", 0}, {"start_mono", 5}})),
      json::exception);
}

TEST_CASE("record kinds have their file names", "[run_notes]") {
  CHECK(note_kind(json({{"kind", "train_done"}})) == RecordKind::kTrainDone);
  CHECK(note_kind(json({{"kind", "shaper_stream"}})) == RecordKind::kShaperStream);
  CHECK_FALSE(note_kind(json({{"kind", "from_the_future"}})).has_value());
  CHECK_FALSE(note_kind(json({{"kind", 3}})).has_value());
  CHECK_FALSE(note_kind(json::array()).has_value());
  CHECK(std::string(record_kind_name(RecordKind::kReplyLimit)) == "reply_limit");
}

namespace {

struct FakeResult {
  std::string target = "t.example", target_addr = "198.18.1.2";
  int port = 47391;
  TargetMarker marker_kind = TargetMarker::kOpenSyn;
  std::string source = "198.18.0.1", interface = "dn";
  int source_port = 40000;
  double rtt_s = 0.002;
  json params = {{"packet_size", 1500}};
  struct {
    int reply_ttl = 64, reply_hops = 2;
    std::string check = "ok", box;
  } replier;
  std::vector<Warning> warnings{Warning::recorded("path_mtu", "shrank")};
};

}  // namespace

TEST_CASE("phase run and end notes round-trip and name their phase", "[run_notes]") {
  const RunHead head = run_head(FakeResult{});
  const json run = phase_note_json(CapacityRunNote{Command::kMeasure, head, true, 0.01, 1e9});
  CHECK(run.at("kind") == "run");
  CHECK(run.at("phase") == "capacity");
  CHECK(run.at("command") == "measure");
  CHECK(run.at("head").at("marker_kind") == "open_syn");
  CHECK(run.at("head").at("replier_box").is_null());
  const CapacityRunNote back = read_phase_note<CapacityRunNote>(run);
  CHECK(back.command == Command::kMeasure);
  CHECK(back.two_lengths);
  CHECK(back.max_rate_bps == 1e9);
  FakeResult r;
  r.marker_kind = TargetMarker::kClosedSyn;
  r.warnings.clear();
  apply_head(r, back.head);
  CHECK(r.marker_kind == TargetMarker::kOpenSyn);
  CHECK(r.source_port == 40000);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].code == "path_mtu");

  // Of another phase, or another kind: an error.
  CHECK_THROWS_AS(read_phase_note<HopsRunNote>(run), json::exception);
  CHECK_THROWS_AS(read_phase_note<CapacityEndNote>(run), json::exception);
  // A missing field is an error, not a default.
  json bad = run;
  bad.erase("max_rate_bps");
  CHECK_THROWS_AS(read_phase_note<CapacityRunNote>(bad), json::exception);
  bad = run;
  bad["head"].erase("source");
  CHECK_THROWS_AS(read_phase_note<CapacityRunNote>(bad), json::exception);
  // The one optional head field: records before open-port markers used closed ports.
  json old = run;
  old["head"].erase("marker_kind");
  FakeResult o;
  apply_head(o, read_phase_note<CapacityRunNote>(old).head);
  CHECK(o.marker_kind == TargetMarker::kClosedSyn);
  // An unknown marker kind is a damaged record.
  old["head"]["marker_kind"] = "syn_ack";
  CHECK_THROWS(read_phase_note<CapacityRunNote>(old));
}

TEST_CASE("avail-bw end notes carry the refill result only when there is one", "[run_notes]") {
  const json plain = phase_note_json(AvailbwEndNote{1.5, 1000, 10, json::array(), {}, nullptr});
  CHECK_FALSE(plain.contains("shaper_refill"));
  CHECK_FALSE(read_phase_note<AvailbwEndNote>(plain).shaper_refill.has_value());
  ShaperRefillNote refill;
  refill.valid = true;
  refill.availbw_bps = 5e6;
  refill.rates = {{5e6, "refill", 0.3}};
  refill.warnings = json::array();
  const json with = phase_note_json(AvailbwEndNote{1.5, 1000, 10, json::array(), refill, nullptr});
  const AvailbwEndNote back = read_phase_note<AvailbwEndNote>(with);
  REQUIRE(back.shaper_refill.has_value());
  CHECK(back.shaper_refill->availbw_bps == 5e6);
  REQUIRE(back.shaper_refill->rates.size() == 1);
  CHECK(back.shaper_refill->rates[0].verdict == "refill");
  json bad = with;
  bad["shaper_refill"]["rates"][0].erase("at_s");
  CHECK_THROWS_AS(read_phase_note<AvailbwEndNote>(bad), json::exception);
  // The search's run note says it is not the refill phase; older ones did not say.
  json run = phase_note_json(AvailbwRunNote{50e6, 1500, 123, json::object(), false});
  CHECK(run.at("shaper_refill") == false);
  run.erase("shaper_refill");
  CHECK_FALSE(read_phase_note<AvailbwRunNote>(run).shaper_refill);
}

TEST_CASE("avail-bw end notes carry this host's own traffic when it was read", "[run_notes]") {
  const json plain = phase_note_json(AvailbwEndNote{1.5, 1000, 10, json::array(), {}, nullptr});
  CHECK_FALSE(plain.contains("own_traffic"));
  CHECK(read_phase_note<AvailbwEndNote>(plain).own_traffic.is_null());
  OwnTrafficRecord o;
  o.valid = true;
  o.interface = "eth0";
  o.l2_header = 14;
  o.packet_size = 1500;
  o.window_s = 4.2;
  o.link_bps = 20.2e6;
  o.low_bps = 19e6;
  o.high_bps = 22e6;
  o.bins = 8;
  const json with =
      phase_note_json(AvailbwEndNote{1.5, 1000, 10, json::array(), {}, own_traffic_json(o)});
  const OwnTrafficRecord back =
      own_traffic_from_json(read_phase_note<AvailbwEndNote>(with).own_traffic);
  CHECK(back.valid);
  CHECK(back.interface == "eth0");
  CHECK(back.packet_size == 1500);
  CHECK(back.link_bps == 20.2e6);
  CHECK(back.high_bps == 22e6);
  CHECK(back.bins == 8);
  CHECK_FALSE(back.applied);
  CHECK(back.qdisc_kind.empty());  // none read
  o.qdisc_kind = "tbf";
  o.qdisc_rate_bps = 50e6;
  o.qdisc_overhead = 4;
  const OwnTrafficRecord q = own_traffic_from_json(own_traffic_json(o));
  CHECK(q.qdisc_kind == "tbf");
  CHECK(q.qdisc_rate_bps == 50e6);
  CHECK(q.qdisc_overhead == 4);
  CHECK(q.qdisc_not_used.empty());
  o.qdisc_kind = "htb";
  o.qdisc_rate_bps = 0;
  o.qdisc_not_used = "filters classify the traffic";
  const OwnTrafficRecord f = own_traffic_from_json(own_traffic_json(o));
  CHECK(f.qdisc_rate_bps == 0);
  CHECK(f.qdisc_not_used == "filters classify the traffic");
  CHECK(own_traffic_json(OwnTrafficRecord{}).is_null());
  CHECK_FALSE(own_traffic_from_json(nullptr).valid);
  json bad = with;
  bad["own_traffic"].erase("other_bps");
  CHECK_THROWS_AS(own_traffic_from_json(read_phase_note<AvailbwEndNote>(bad).own_traffic),
                  json::exception);
}
