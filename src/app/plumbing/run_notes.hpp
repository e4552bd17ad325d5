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
// The phases' own "run" and "end" notes (configuration, endpoints, counters)
// are typed the same way, one struct per phase and kind, with the phase's
// name checked on reading (read_phase_note). The few fields that records
// written before them lack are std::optional, each saying so; every other
// field is required.
//
//   prober.note(note_json(HopsEndNote{warnings_json(reply)}));
//   const auto end = read_phase_note<HopsEndNote>(j);   // throws unless phase "hops"
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "linkwidth/run_names.hpp"
#include "linkwidth/time.hpp"
#include "nlohmann/json.hpp"
#include "report/stop_reason.hpp"
#include "report/writers.hpp"

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
  X(kOwnLink, "own_link")       \
  X(kDrops, "drops")            \
  X(kShaperStream, "shaper_stream")   \
  X(kShaperRefill, "shaper_refill")

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
// Our own link's avail-bw from its counters, as the avail-bw phase read it
// after a train (noted only when it changed since the last note).
struct OwnLinkNote {
  static constexpr RecordKind kKind = RecordKind::kOwnLink;
  double availbw_bps = 0;
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

// A stream of a token bucket's refill pair (the avail-bw phase's sustained
// regime) is about to be sent; not replayed either (the end note holds the
// result).
struct ShaperRefillStreamNote {
  static constexpr RecordKind kKind = RecordKind::kShaperRefill;
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
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OwnLinkNote, availbw_bps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DropsNote, phase, count)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShaperStreamNote, train, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShaperRefillStreamNote, train, bytes)

// ---- The phases' "run" and "end" notes ----

// The endpoints every document starts with (report/writers.hpp,
// document_head), as a run note carries them ("head").
struct RunHead {
  std::string target;
  std::string target_addr;
  int port = 0;
  // Older records (before open-port markers) have none: they used closed ports.
  std::optional<TargetMarker> marker_kind;
  std::string source;
  std::string interface;
  int source_port = 0;
  double rtt_s = 0;
  nlohmann::json params;
  int reply_ttl = 0;
  int reply_hops = 0;
  std::string replier_check;
  std::string replier_box;  // null in the file when empty
  nlohmann::json warnings;  // warnings_json
};
void to_json(nlohmann::json& j, const RunHead& h);
void from_json(const nlohmann::json& j, RunHead& h);

// The head of a result (CapacityResult, HopsResult), and back.
template <class R>
RunHead run_head(const R& r) {
  RunHead h;
  h.target = r.target;
  h.target_addr = r.target_addr;
  h.port = r.port;
  h.marker_kind = r.marker_kind;
  h.source = r.source;
  h.interface = r.interface;
  h.source_port = r.source_port;
  h.rtt_s = r.rtt_s;
  h.params = r.params;
  h.reply_ttl = r.replier.reply_ttl;
  h.reply_hops = r.replier.reply_hops;
  h.replier_check = r.replier.check;
  h.replier_box = r.replier.box;
  h.warnings = warnings_json(r.warnings);
  return h;
}
template <class R>
void apply_head(R& r, const RunHead& h) {
  r.target = h.target;
  r.target_addr = h.target_addr;
  r.port = h.port;
  r.marker_kind = h.marker_kind.value_or(TargetMarker::kClosedSyn);
  r.source = h.source;
  r.interface = h.interface;
  r.source_port = h.source_port;
  r.rtt_s = h.rtt_s;
  r.params = h.params;
  r.replier.reply_ttl = h.reply_ttl;
  r.replier.reply_hops = h.reply_hops;
  r.replier.check = h.replier_check;
  r.replier.box = h.replier_box;
  r.warnings = warnings_from_json(h.warnings);
}

// The capacity phase (app/runs/capacity_run.cpp).
struct CapacityRunNote {
  static constexpr RecordKind kKind = RecordKind::kRun;
  static constexpr const char* kPhase = "capacity";
  Command command = Command::kCapacity;
  RunHead head;
  bool two_lengths = false;
  double precision = 0;
  double max_rate_bps = 0;
};
struct CapacityEndNote {
  static constexpr RecordKind kKind = RecordKind::kEnd;
  static constexpr const char* kPhase = "capacity";
  StopReason stop_reason = StopReason::kNone;
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
  unsigned capture_drops = 0;
  // What the checks after the trains changed (capacity_checks_note).
  // Older records (before the plausibility checks were noted) have none.
  std::optional<nlohmann::json> checks;
};

// The hops phase (app/runs/hops_run.cpp): its caps are counted from these
// counters and this clock, so the replay's gate answers as the live one.
struct HopsRunNote {
  static constexpr RecordKind kKind = RecordKind::kRun;
  static constexpr const char* kPhase = "hops";
  Command command = Command::kHops;
  RunHead head;
  nlohmann::json config;  // config_json
  Nanos t_begin = 0;
  std::uint64_t bytes0 = 0;
  std::uint64_t packets0 = 0;
  int packet_size = 0;
  double rtt_s = 0;
  Nanos reply_wait = 0;
  // Older records (before --max-load budgets crossed phases) have none: 0,
  // the hops phase then budgets from its own trains.
  std::optional<double> load_capacity_bps;
};
struct HopsEndNote {
  static constexpr RecordKind kKind = RecordKind::kEnd;
  static constexpr const char* kPhase = "hops";
  nlohmann::json reply_warnings;  // warnings_json: the reply checks' findings
};

// The avail-bw phase (app/runs/availbw_run.cpp), or the sustained regime of a
// token bucket (shaper_refill: app/runs/shaper_run.cpp, not replayed).
struct AvailbwRunNote {
  static constexpr RecordKind kKind = RecordKind::kRun;
  static constexpr const char* kPhase = "availbw";
  double capacity_bps = 0;
  int packet_size = 0;
  Nanos t_cap = 0;
  nlohmann::json config;  // config_json
  bool shaper_refill = false;
};
// One refill pair's rate and verdict.
struct RefillRateNote {
  double rate_bps = 0;
  std::string verdict;
  double at_s = 0;
};
// What the refill pairs found, as the live run reported it.
struct ShaperRefillNote {
  bool valid = false;
  Method method = Method::kFleet;
  double availbw_bps = 0;
  double low_bps = 0;
  double high_bps = 0;
  double capacity_bps = 0;
  int trains_sent = 0;
  StopReason stop_reason = StopReason::kShaper;
  nlohmann::json warnings;      // warnings_json
  std::vector<RefillRateNote> rates;
  nlohmann::json shaper_check;  // shaper_check_json
};
struct AvailbwEndNote {
  static constexpr RecordKind kKind = RecordKind::kEnd;
  static constexpr const char* kPhase = "availbw";
  double elapsed_s = 0;
  std::uint64_t probe_bytes = 0;
  std::uint64_t probe_packets = 0;
  nlohmann::json reply_warnings;  // warnings_json
  std::optional<ShaperRefillNote> shaper_refill;  // with AvailbwRunNote::shaper_refill only
  // This host's own traffic over the phase (report/writers own_traffic_json);
  // null in older records and when the counters could not be read.
  nlohmann::json own_traffic;
};

// `measure` and `availbw` around their phases (app/runs/availbw_run.cpp).
struct MeasureRunNote {
  static constexpr RecordKind kKind = RecordKind::kRun;
  static constexpr const char* kPhase = "measure";
  Command command = Command::kMeasure;
  bool hops = false;
  RunHead head;
  nlohmann::json config;  // config_json
};
struct MeasureEndNote {
  static constexpr RecordKind kKind = RecordKind::kEnd;
  static constexpr const char* kPhase = "measure";
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
};

void to_json(nlohmann::json& j, const HopsRunNote& n);
void from_json(const nlohmann::json& j, HopsRunNote& n);
void to_json(nlohmann::json& j, const CapacityEndNote& n);
void from_json(const nlohmann::json& j, CapacityEndNote& n);
void to_json(nlohmann::json& j, const AvailbwRunNote& n);
void from_json(const nlohmann::json& j, AvailbwRunNote& n);
void to_json(nlohmann::json& j, const AvailbwEndNote& n);
void from_json(const nlohmann::json& j, AvailbwEndNote& n);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CapacityRunNote, command, head, two_lengths, precision,
                                   max_rate_bps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HopsEndNote, reply_warnings)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RefillRateNote, rate_bps, verdict, at_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShaperRefillNote, valid, method, availbw_bps, low_bps, high_bps,
                                   capacity_bps, trains_sent, stop_reason, warnings, rates,
                                   shaper_check)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MeasureRunNote, command, hops, head, config)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MeasureEndNote, elapsed_s, probe_packets, probe_bytes)

// The note as written: `extra` (a phase's own fields), the struct's fields
// and its "kind".
template <class N>
nlohmann::json note_json(const N& n, nlohmann::json extra = nlohmann::json::object()) {
  extra.update(nlohmann::json(n));
  extra["kind"] = record_kind_name(N::kKind);
  return extra;
}

// A phase's run or end note as written: also its "phase".
template <class N>
nlohmann::json phase_note_json(const N& n) {
  nlohmann::json j = note_json(n);
  j["phase"] = N::kPhase;
  return j;
}

// The note read back: it must be of N's kind and hold every field.
template <class N>
N read_note(const nlohmann::json& note) {
  if (note_kind(note) != N::kKind) {
    throw nlohmann::json::other_error::create(501, "run note of another kind", &note);
  }
  return note.get<N>();
}

// A phase's run or end note read back: of N's kind and phase, every field.
template <class N>
N read_phase_note(const nlohmann::json& note) {
  const auto phase = note.is_object() ? note.find("phase") : note.end();
  if (phase == note.end() || !phase->is_string() || phase->get_ref<const std::string&>() != N::kPhase) {
    throw nlohmann::json::other_error::create(501, "run note of another phase", &note);
  }
  return read_note<N>(note);
}

}  // namespace lw
