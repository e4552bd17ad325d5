#pragma once
// Values with a fixed set of names: the command a run measures, the avail-bw
// method, the hop-marker mode and the marker kinds. Each is an enum with the names the command
// line, the JSON documents and the run records carry (issue 12: "an enum with
// a JSON name, not a string literal repeated at each site").
//
//   Command c;
//   if (!from_name("measure", &c)) ...   // false for a name not in the list
//   name(Command::kMeasure)              // "measure"
//   nlohmann::json j = Command::kHops;   // "hops"; from_json throws on other names
#include <cstdint>
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

#define LW_TARGET_MARKERS(X)   \
  X(kClosedSyn, "closed_syn") \
  X(kOpenSyn, "open_syn")     \
  X(kAck, "ack")

#define LW_MARKER_KINDS(X) \
  X(kTtl, "ttl")           \
  X(kAddr, "addr")         \
  X(kTarget, "target")

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

// What the markers addressed to the target are (plan/target_marker.hpp): SYNs
// to a closed port, SYNs to a listening port (each followed by a closer RST),
// or bare ACKs. JSON `marker_kind`.
enum class TargetMarker : std::uint8_t {
#define LW_X(e, n) e,
  LW_TARGET_MARKERS(LW_X)
#undef LW_X
};

// How a hops marker draws its reply from hop k (plan/hops_plan.hpp):
//   kTtl     IP TTL = k in the flow's 5-tuple: hop k answers ICMP time exceeded
//   kAddr    SYN to hop k's own address (full TTL): a router running TCP
//            answers RST/ACK from a closed port (the paper's variant, §3.3)
//   kTarget  the last hop: a marker to the target, full TTL
// JSON: a hop's `marker_kind`.
enum class MarkerKind : std::uint8_t {
#define LW_X(e, n) e,
  LW_MARKER_KINDS(LW_X)
#undef LW_X
};

const char* name(Command v);
const char* name(Method v);
const char* name(HopMarkers v);
const char* name(TargetMarker v);
const char* name(MarkerKind v);

// True and *out set when `text` is one of the names; false otherwise.
bool from_name(const std::string& text, Command* out);
bool from_name(const std::string& text, Method* out);
bool from_name(const std::string& text, HopMarkers* out);
bool from_name(const std::string& text, TargetMarker* out);
bool from_name(const std::string& text, MarkerKind* out);

// JSON: the name. Reading another name throws lw::Error (bad_capture, exit 2):
// a record naming an unknown value is damaged, never a default.
void to_json(nlohmann::json& j, Command v);
void from_json(const nlohmann::json& j, Command& v);
void to_json(nlohmann::json& j, Method v);
void from_json(const nlohmann::json& j, Method& v);
void to_json(nlohmann::json& j, HopMarkers v);
void from_json(const nlohmann::json& j, HopMarkers& v);
void to_json(nlohmann::json& j, TargetMarker v);
void from_json(const nlohmann::json& j, TargetMarker& v);
void to_json(nlohmann::json& j, MarkerKind v);
void from_json(const nlohmann::json& j, MarkerKind& v);

}  // namespace lw
