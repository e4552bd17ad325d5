#include "report/stop_reason.hpp"

#include "linkwidth/error.hpp"

namespace lw {

const char* stop_reason_name(StopReason r) {
  switch (r) {
#define LW_X(e, name) \
  case StopReason::e: \
    return name;
    LW_STOP_REASONS(LW_X)
#undef LW_X
  }
  return "";
}

StopReason stop_reason_from_name(const std::string& name) {
#define LW_X(e, n) \
  if (name == n) return StopReason::e;
  LW_STOP_REASONS(LW_X)
#undef LW_X
  throw Error("analyze", "a run record names an unknown stop reason '" + name + "'", "bad_capture",
              ExitCode::kUsage);
}

void to_json(nlohmann::json& j, StopReason r) { j = stop_reason_name(r); }
void from_json(const nlohmann::json& j, StopReason& r) {
  r = stop_reason_from_name(j.get<std::string>());
}

}  // namespace lw
