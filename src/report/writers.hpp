#pragma once
// Renderers only: JSON first, text second. No computation beyond formatting.
#include <string>

#include "nlohmann/json.hpp"
#include "report/measure_result.hpp"
#include "report/result.hpp"

namespace lw {

// The fields every result document starts with: its type, the schema and tool
// versions, and the endpoints (any result with target .. rtt_s fields).
template <class R>
nlohmann::json document_head(const char* type, const R& r) {
  return {{"type", type},
          {"version", kSchemaVersion},
          {"tool_version", LINKWIDTH_VERSION},
          {"target", r.target},
          {"target_addr", r.target_addr},
          {"port", r.port},
          {"marker_kind", r.marker_kind},
          {"source", r.source},
          {"source_port", r.source_port},
          {"interface", r.interface},
          {"rtt_s", r.rtt_s},
          {"reply_ttl", r.replier.reply_ttl},
          {"reply_hops", r.replier.reply_hops},
          {"replier_check", r.replier.check},
          {"replier_box", r.replier.box.empty() ? nlohmann::json() : nlohmann::json(r.replier.box)},
          {"params", r.params}};
}

nlohmann::json to_json(const CapacityResult& r);
// A complete error document; `partial` (may be null) is merged in.
nlohmann::json error_json(const std::string& type, const std::string& target, const ErrorInfo& err,
                          const nlohmann::json& partial);
std::string to_text(const CapacityResult& r);

// `availbw` / `measure`: the capacity document with the avail-bw fields at
// the top level (stop_reason is the search's; the capacity phase's moves to
// capacity_stop_reason, its trains to capacity_trains).
nlohmann::json to_json(const MeasureResult& r);
std::string to_text(const MeasureResult& r);

// 49520000 -> "49.52 Mbit/s"
std::string format_rate(double bps);
// v, or null where !valid (a number the document may not have).
nlohmann::json nullable(bool valid, double v);

// The port and how it was probed, for the text header: "closed port 47391",
// "open port 443 (SYN markers, each reset at once)", "port 80 (bare ACK markers)".
std::string port_phrase(TargetMarker marker_kind, int port);

// Pieces of the documents, and their inverses for run records read back by
// `linkwidth analyze` (a null number reads as 0; a missing field throws, except the
// ones a document writes only sometimes, e.g. shaper_check's refill_*).
nlohmann::json warnings_json(const std::vector<Warning>& ws);
std::vector<Warning> warnings_from_json(const nlohmann::json& a);
nlohmann::json load_check_json(const LoadCheckRecord& l);  // null unless it ran
nlohmann::json own_traffic_json(const OwnTrafficRecord& o);  // null unless valid
OwnTrafficRecord own_traffic_from_json(const nlohmann::json& j);
LoadCheckRecord load_check_from_json(const nlohmann::json& j);
// The shaper probe's record: `shaper` (null unless a bucket was found or
// could not be emptied) and `shaper_check` (null unless a stream was sent).
nlohmann::json shaper_json(const ShaperRecord& s);
nlohmann::json shaper_check_json(const ShaperRecord& s);
ShaperRecord shaper_from_json(const nlohmann::json& shaper, const nlohmann::json& check);

}  // namespace lw
