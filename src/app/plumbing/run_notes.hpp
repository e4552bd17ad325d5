#pragma once
// The run records' notes (capture/run_record.hpp carries them as JSON text):
// one kind enum with the names the files hold, and one typed struct per note
// kind that the runner writes and `linkwidth analyze` reads back, with one
// writer (note_json) and one reader (read_note). Reading is strict: a missing
// field or one of the wrong type throws nlohmann::json's exception (analyze:
// "a linkwidth run record is damaged"), never a default.
//
//   prober.note(note_json(ClockNote{t}));                 // {"kind":"clock","mono":t}
//   const ClockNote c = read_note<ClockNote>(j);          // throws if "mono" is missing
//
// The phases' own "run" and "end" notes (configuration, head, counters;
// fields that older captures lack) are still read field by field in
// app/analyze.cpp.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "linkwidth/time.hpp"
#include "nlohmann/json.hpp"
#include "report/stop_reason.hpp"

namespace lw {

// X(enum name, "kind" in the file)
#define LW_RECORD_KINDS(X)      \
  X(kRun, "run")                \
  X(kEnd, "end")                \
  X(kTrain, "train")            \
  X(kTrainDone, "train_done")   \
  X(kReplyLimit, "reply_limit") \
  X(kClock, "clock")            \
  X(kStop, "stop")              \
  X(kStopped, "stopped")        \
  X(kBurst, "burst")            \
  X(kDrops, "drops")            \
  X(kShaperStream, "shaper_stream")

enum class RecordKind {
#define LW_X(e, n) e,
  LW_RECORD_KINDS(LW_X)
#undef LW_X
};

const char* record_kind_name(RecordKind k);
// The note's kind; nullopt for a kind this build does not know (a later
// version's note: skipped, as before) or a note without a string "kind".
std::optional<RecordKind> note_kind(const nlohmann::json& note);

// A train is about to be sent: the phase's own fields (o.note) plus these.
struct TrainNote {
  static constexpr RecordKind kKind = RecordKind::kTrain;
  std::string phase;
  int train = 0;           // Train::id
  std::size_t probes = 0;  // probes planned
};
// The live run stopped waiting for the train's replies (replies after this
// were not used); its monotonic start and end. The one optional pair of
// fields: capacity captures written before the runner (tests/data/*.pcap)
// have "train" alone; both or neither, the replay then reads 0.
struct TrainDoneNote {
  static constexpr RecordKind kKind = RecordKind::kTrainDone;
  int train = 0;
  Nanos start_mono = 0;
  Nanos end_mono = 0;
};
void to_json(nlohmann::json& j, const TrainDoneNote& n);
void from_json(const nlohmann::json& j, TrainDoneNote& n);
// A reply check right after the train found the target limiting its replies.
struct ReplyLimitNote {
  static constexpr RecordKind kKind = RecordKind::kReplyLimit;
  int train = 0;
};
// A clock reading the phase made (ProbeRunner::now).
struct ClockNote {
  static constexpr RecordKind kKind = RecordKind::kClock;
  Nanos mono = 0;
};
// The stop flag was first seen set at this stop check (1-based).
struct StopNote {
  static constexpr RecordKind kKind = RecordKind::kStop;
  int check = 0;
};
// The per-train gate refused a train.
struct StoppedNote {
  static constexpr RecordKind kKind = RecordKind::kStopped;
  StopReason reason = StopReason::kNone;
};
// A reply burst limit the phase read (noted only once one is known).
struct BurstNote {
  static constexpr RecordKind kKind = RecordKind::kBurst;
  int max = 0;
};
// Packets the capture buffer dropped, read at the end of a phase.
struct DropsNote {
  static constexpr RecordKind kKind = RecordKind::kDrops;
  std::string phase;
  unsigned count = 0;
};

// A stream of the shaper probe is about to be sent (not replayed: the
// capacity phase's end note holds what the probe found).
struct ShaperStreamNote {
  static constexpr RecordKind kKind = RecordKind::kShaperStream;
  int train = 0;
  std::uint64_t bytes = 0;
};

// Strict: from_json reads every field with at() (the macro without _WITH_DEFAULT).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrainNote, phase, train, probes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReplyLimitNote, train)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClockNote, mono)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StopNote, check)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StoppedNote, reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BurstNote, max)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DropsNote, phase, count)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShaperStreamNote, train, bytes)

// The note as written: `extra` (a phase's own fields), the struct's fields
// and its "kind".
template <class N>
nlohmann::json note_json(const N& n, nlohmann::json extra = nlohmann::json::object()) {
  extra.update(nlohmann::json(n));
  extra["kind"] = record_kind_name(N::kKind);
  return extra;
}

// The note read back: it must be of N's kind and hold every field.
template <class N>
N read_note(const nlohmann::json& note) {
  if (note_kind(note) != N::kKind) {
    throw nlohmann::json::other_error::create(501, "run note of another kind", &note);
  }
  return note.get<N>();
}

}  // namespace lw
