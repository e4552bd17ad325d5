#pragma once
// Values with a fixed set of names: the command a run measures, the avail-bw
// method and the hop-marker mode. Each is an enum with the names the command
// line, the JSON documents and the run records carry (issue 12: "an enum with
// a JSON name, not a string literal repeated at each site").
//
//   Command c;
//   if (!from_name("measure", &c)) ...   // false for a name not in the list
//   name(Command::kMeasure)              // "measure"
//   nlohmann::json j = Command::kHops;   // "hops"; from_json throws on other names
#include <string>

#include "nlohmann/json_fwd.hpp"

namespace lw {

// X(enum name, name on the command line and in JSON)
#define LW_COMMANDS(X)     \
  X(kCapacity, "capacity") \
  X(kAvailbw, "availbw")   \
  X(kMeasure, "measure")   \
  X(kHops, "hops")

#define LW_METHODS(X) \
  X(kFleet, "fleet")  \
  X(kLinkwidth, "linkwidth")

#define LW_HOP_MARKERS(X) \
  X(kAuto, "auto")        \
  X(kTtl, "ttl")          \
  X(kAddr, "addr")

// A measurement command (the ones `parse_cli` turns into a Config; sweep,
// analyze, help and version are front-ends, see app/cli.hpp).
enum class Command {
#define LW_X(e, n) e,
  LW_COMMANDS(LW_X)
#undef LW_X
};

// --method: fleet (default) or the paper's binary search.
enum class Method {
#define LW_X(e, n) e,
  LW_METHODS(LW_X)
#undef LW_X
};

// --hop-markers: per hop the router's own address if it answers TCP (auto),
// always TTL-limited probes (ttl), or the router's address (addr).
enum class HopMarkers {
#define LW_X(e, n) e,
  LW_HOP_MARKERS(LW_X)
#undef LW_X
};

const char* name(Command v);
const char* name(Method v);
const char* name(HopMarkers v);

// True and *out set when `text` is one of the names; false otherwise.
bool from_name(const std::string& text, Command* out);
bool from_name(const std::string& text, Method* out);
bool from_name(const std::string& text, HopMarkers* out);

// JSON: the name. Reading another name throws lw::Error (bad_capture, exit 2):
// a record naming an unknown value is damaged, never a default.
void to_json(nlohmann::json& j, Command v);
void from_json(const nlohmann::json& j, Command& v);
void to_json(nlohmann::json& j, Method v);
void from_json(const nlohmann::json& j, Method& v);
void to_json(nlohmann::json& j, HopMarkers v);
void from_json(const nlohmann::json& j, HopMarkers& v);

}  // namespace lw
