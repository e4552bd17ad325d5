#include "linkwidth/run_names.hpp"

#include <nlohmann/json.hpp>
#include <type_traits>

#include "linkwidth/error.hpp"

namespace lw {

namespace {

template <class E>
E read_name(const nlohmann::json& j, const char* what) {
  E v{};
  const std::string text = j.get<std::string>();
  if (!from_name(text, &v)) {
    throw Error("analyze", std::string("a run record names an unknown ") + what + " '" + text + "'",
                "bad_capture", ExitCode::kUsage);
  }
  return v;
}

}  // namespace

#define LW_NAME_FUNCTIONS(Enum, LIST)                  \
  const char* name(Enum v) {                           \
    switch (v) { LIST(LW_CASE) }                       \
    return "";                                         \
  }                                                    \
  bool from_name(const std::string& text, Enum* out) { \
    LIST(LW_MATCH)                                     \
    return false;                                      \
  }

#define LW_CASE(e, n)  \
  case decltype(v)::e: \
    return n;
#define LW_MATCH(e, n)                              \
  if (text == n) {                                  \
    *out = std::remove_pointer_t<decltype(out)>::e; \
    return true;                                    \
  }

LW_NAME_FUNCTIONS(Command, LW_COMMANDS)
LW_NAME_FUNCTIONS(Method, LW_METHODS)
LW_NAME_FUNCTIONS(HopMarkers, LW_HOP_MARKERS)
LW_NAME_FUNCTIONS(TargetMarker, LW_TARGET_MARKERS)
LW_NAME_FUNCTIONS(MarkerKind, LW_MARKER_KINDS)

#undef LW_NAME_FUNCTIONS
#undef LW_CASE
#undef LW_MATCH

void to_json(nlohmann::json& j, Command v) { j = name(v); }
void from_json(const nlohmann::json& j, Command& v) { v = read_name<Command>(j, "command"); }
void to_json(nlohmann::json& j, Method v) { j = name(v); }
void from_json(const nlohmann::json& j, Method& v) { v = read_name<Method>(j, "method"); }
void to_json(nlohmann::json& j, HopMarkers v) { j = name(v); }
void from_json(const nlohmann::json& j, HopMarkers& v) {
  v = read_name<HopMarkers>(j, "hop-marker mode");
}
void to_json(nlohmann::json& j, TargetMarker v) { j = name(v); }
void from_json(const nlohmann::json& j, TargetMarker& v) {
  v = read_name<TargetMarker>(j, "marker_kind");
}
void to_json(nlohmann::json& j, MarkerKind v) { j = name(v); }
void from_json(const nlohmann::json& j, MarkerKind& v) {
  v = read_name<MarkerKind>(j, "hop marker kind");
}

}  // namespace lw
