// The typed run-record notes (app/run_notes.hpp): one writer and one strict
// reader per kind, in the format the captures in tests/data hold.
#include <catch2/catch.hpp>

#include "app/plumbing/run_notes.hpp"

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
