#pragma once
// Why a measurement (or one phase of it) stopped: an enum with the names the
// JSON documents carry ("stop_reason"). kNone ("") is a phase still running.
#include <string>

#include "nlohmann/json.hpp"

namespace lw {

// X(enum name, JSON name)
#define LW_STOP_REASONS(X)        \
  X(kNone, "")                    \
  X(kMaxTrains, "max_trains")     \
  X(kPrecision, "precision")      \
  X(kInterrupted, "interrupted")  \
  X(kMaxBytes, "max_bytes")       \
  X(kMaxTime, "max_time")         \
  X(kIncomplete, "incomplete")    \
  X(kResolution, "resolution")    \
  X(kMaxFleets, "max_fleets")     \
  X(kLoss, "loss")                \
  X(kNoCapacity, "no_capacity")   \
  X(kLoadDropped, "load_dropped") \
  X(kGiven, "given")              \
  X(kNoReplies, "no_replies")     \
  X(kShaper, "shaper")            \
  X(kCalibrationFailed, "calibration_failed") \
  X(kRepliesCompressed, "replies_compressed")

enum class StopReason {
#define LW_X(e, name) e,
  LW_STOP_REASONS(LW_X)
#undef LW_X
};

const char* stop_reason_name(StopReason r);
// The reason of that name; throws lw::Error (bad_capture, exit 2) for any
// other name: a record that names no known reason is damaged.
StopReason stop_reason_from_name(const std::string& name);

void to_json(nlohmann::json& j, StopReason r);
void from_json(const nlohmann::json& j, StopReason& r);

}  // namespace lw
