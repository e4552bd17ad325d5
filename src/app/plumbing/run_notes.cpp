#include "app/plumbing/run_notes.hpp"

namespace lw {

const char* record_kind_name(RecordKind k) {
  switch (k) {
#define LW_X(e, n)    \
  case RecordKind::e: \
    return n;
    LW_RECORD_KINDS(LW_X)
#undef LW_X
  }
  return "";
}

std::optional<RecordKind> note_kind(const nlohmann::json& note) {
  if (!note.is_object()) return std::nullopt;
  const auto it = note.find("kind");
  if (it == note.end() || !it->is_string()) return std::nullopt;
  const std::string& k = it->get_ref<const std::string&>();
#define LW_X(e, n) \
  if (k == n) return RecordKind::e;
  LW_RECORD_KINDS(LW_X)
#undef LW_X
  return std::nullopt;
}

void to_json(nlohmann::json& j, const TrainDoneNote& n) {
  j = {{"train", n.train}, {"start_mono", n.start_mono}, {"end_mono", n.end_mono}};
}

void from_json(const nlohmann::json& j, TrainDoneNote& n) {
  n.train = j.at("train").get<int>();
  if (j.contains("start_mono") || j.contains("end_mono")) {
    n.start_mono = j.at("start_mono").get<Nanos>();
    n.end_mono = j.at("end_mono").get<Nanos>();
  } else {
    n.start_mono = n.end_mono = 0;  // an older capacity record
  }
}

namespace {

// An optional field: absent (older records) or of the field's type.
template <class T>
void read_optional(const nlohmann::json& j, const char* key, std::optional<T>& out) {
  const auto it = j.find(key);
  if (it == j.end()) {
    out.reset();
  } else {
    out = it->get<T>();
  }
}

}  // namespace

void to_json(nlohmann::json& j, const RunHead& h) {
  j = {{"target", h.target},
       {"target_addr", h.target_addr},
       {"port", h.port},
       {"source", h.source},
       {"interface", h.interface},
       {"source_port", h.source_port},
       {"rtt_s", h.rtt_s},
       {"params", h.params},
       {"reply_ttl", h.reply_ttl},
       {"reply_hops", h.reply_hops},
       {"replier_check", h.replier_check},
       {"replier_box", h.replier_box.empty() ? nlohmann::json() : nlohmann::json(h.replier_box)},
       {"warnings", h.warnings}};
  if (h.marker_kind) j["marker_kind"] = *h.marker_kind;
}

void from_json(const nlohmann::json& j, RunHead& h) {
  j.at("target").get_to(h.target);
  j.at("target_addr").get_to(h.target_addr);
  j.at("port").get_to(h.port);
  read_optional(j, "marker_kind", h.marker_kind);
  j.at("source").get_to(h.source);
  j.at("interface").get_to(h.interface);
  j.at("source_port").get_to(h.source_port);
  j.at("rtt_s").get_to(h.rtt_s);
  h.params = j.at("params");
  j.at("reply_ttl").get_to(h.reply_ttl);
  j.at("reply_hops").get_to(h.reply_hops);
  j.at("replier_check").get_to(h.replier_check);
  const nlohmann::json& box = j.at("replier_box");
  h.replier_box = box.is_null() ? std::string() : box.get<std::string>();
  h.warnings = j.at("warnings");
}

void to_json(nlohmann::json& j, const HopsRunNote& n) {
  j = {{"command", n.command},         {"head", n.head},
       {"config", n.config},           {"t_begin", n.t_begin},
       {"bytes0", n.bytes0},           {"packets0", n.packets0},
       {"packet_size", n.packet_size}, {"rtt_s", n.rtt_s},
       {"reply_wait", n.reply_wait}};
  if (n.load_capacity_bps) j["load_capacity_bps"] = *n.load_capacity_bps;
}

void from_json(const nlohmann::json& j, HopsRunNote& n) {
  j.at("command").get_to(n.command);
  j.at("head").get_to(n.head);
  n.config = j.at("config");
  j.at("t_begin").get_to(n.t_begin);
  j.at("bytes0").get_to(n.bytes0);
  j.at("packets0").get_to(n.packets0);
  j.at("packet_size").get_to(n.packet_size);
  j.at("rtt_s").get_to(n.rtt_s);
  j.at("reply_wait").get_to(n.reply_wait);
  read_optional(j, "load_capacity_bps", n.load_capacity_bps);
}

void to_json(nlohmann::json& j, const CapacityEndNote& n) {
  j = {{"stop_reason", n.stop_reason},     {"elapsed_s", n.elapsed_s},
       {"probe_packets", n.probe_packets}, {"probe_bytes", n.probe_bytes},
       {"capture_drops", n.capture_drops}};
  if (n.checks) j["checks"] = *n.checks;
}

void from_json(const nlohmann::json& j, CapacityEndNote& n) {
  j.at("stop_reason").get_to(n.stop_reason);
  j.at("elapsed_s").get_to(n.elapsed_s);
  j.at("probe_packets").get_to(n.probe_packets);
  j.at("probe_bytes").get_to(n.probe_bytes);
  j.at("capture_drops").get_to(n.capture_drops);
  read_optional(j, "checks", n.checks);
}

void to_json(nlohmann::json& j, const AvailbwRunNote& n) {
  j = {{"capacity_bps", n.capacity_bps},
       {"packet_size", n.packet_size},
       {"t_cap", n.t_cap},
       {"config", n.config},
       {"shaper_refill", n.shaper_refill}};
}

void from_json(const nlohmann::json& j, AvailbwRunNote& n) {
  j.at("capacity_bps").get_to(n.capacity_bps);
  j.at("packet_size").get_to(n.packet_size);
  j.at("t_cap").get_to(n.t_cap);
  n.config = j.at("config");
  // Older records wrote it only for the refill pairs' phase.
  std::optional<bool> refill;
  read_optional(j, "shaper_refill", refill);
  n.shaper_refill = refill.value_or(false);
}

void to_json(nlohmann::json& j, const AvailbwEndNote& n) {
  j = {{"elapsed_s", n.elapsed_s},
       {"probe_bytes", n.probe_bytes},
       {"probe_packets", n.probe_packets},
       {"reply_warnings", n.reply_warnings}};
  if (n.shaper_refill) j["shaper_refill"] = *n.shaper_refill;
  if (!n.own_traffic.is_null()) j["own_traffic"] = n.own_traffic;
}

void from_json(const nlohmann::json& j, AvailbwEndNote& n) {
  j.at("elapsed_s").get_to(n.elapsed_s);
  j.at("probe_bytes").get_to(n.probe_bytes);
  j.at("probe_packets").get_to(n.probe_packets);
  n.reply_warnings = j.at("reply_warnings");
  read_optional(j, "shaper_refill", n.shaper_refill);
  if (j.contains("own_traffic")) n.own_traffic = j.at("own_traffic");
}

}  // namespace lw
