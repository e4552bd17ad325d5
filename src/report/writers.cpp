#include "report/writers.hpp"

#include <cstdio>
#include <sstream>

namespace lw {

std::string format_rate(double bps) {
  char buf[64];
  if (bps >= 1e9) std::snprintf(buf, sizeof buf, "%.3f Gbit/s", bps / 1e9);
  else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.2f Mbit/s", bps / 1e6);
  else if (bps >= 1e3) std::snprintf(buf, sizeof buf, "%.1f kbit/s", bps / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f bit/s", bps);
  return buf;
}

namespace {

nlohmann::json warnings_json(const std::vector<Warning>& ws) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& w : ws) a.push_back({{"code", w.code}, {"message", w.message}});
  return a;
}

nlohmann::json nullable(bool valid, double v) { return valid ? nlohmann::json(v) : nullptr; }

}  // namespace

nlohmann::json to_json(const CapacityResult& r) {
  nlohmann::json trains = nlohmann::json::array();
  for (const auto& t : r.trains) {
    trains.push_back({{"train", t.train},
                      {"load_packets", t.load_packets},
                      {"verdict", t.verdict},
                      {"capacity_bps", t.capacity_bps},
                      {"offered_bps", t.offered_bps},
                      {"reply_dispersion_s", t.reply_dispersion_s},
                      {"send_dispersion_s", t.send_dispersion_s},
                      {"max_send_lag_s", t.max_send_lag_s},
                      {"left_dispersion_s", t.left_dispersion_s}});
  }
  return {{"type", "capacity"},
          {"version", kSchemaVersion},
          {"tool_version", LINKWIDTH_VERSION},
          {"target", r.target},
          {"target_addr", r.target_addr},
          {"port", r.port},
          {"source", r.source},
          {"source_port", r.source_port},
          {"interface", r.interface},
          {"rtt_s", r.rtt_s},
          {"params", r.params},
          {"capacity_bps", nullable(r.valid, r.capacity_bps)},
          {"capacity_low_bps", nullable(r.valid, r.low_bps)},
          {"capacity_high_bps", nullable(r.valid && !r.lower_bound, r.high_bps)},
          {"capacity_is_lower_bound", r.lower_bound},
          {"kde_bandwidth_bps", nullable(r.valid, r.kde_bandwidth_bps)},
          {"per_train_capacity_bps", r.per_train_capacity_bps},
          {"dispersion_offset_s", r.dispersion_offset_s},
          {"layer", "ip"},
          {"trains_sent", r.trains_sent},
          {"trains_used", r.trains_used},
          {"stop_reason", r.stop_reason},
          {"elapsed_s", r.elapsed_s},
          {"probe_packets", r.probe_packets},
          {"probe_bytes", r.probe_bytes},
          {"warnings", warnings_json(r.warnings)},
          {"trains", trains}};
}

nlohmann::json error_json(const std::string& type, const std::string& target,
                          const ErrorInfo& err, const nlohmann::json& partial) {
  nlohmann::json j = partial.is_object() ? partial : nlohmann::json::object();
  j["type"] = type;
  j["version"] = kSchemaVersion;
  j["tool_version"] = LINKWIDTH_VERSION;
  j["target"] = target;
  j["error"] = {{"code", err.code}, {"message", err.message}};
  if (!j.contains("warnings")) j["warnings"] = nlohmann::json::array();
  return j;
}

std::string to_text(const CapacityResult& r) {
  std::ostringstream o;
  char buf[256];
  o << "linkwidth capacity to " << r.target;
  if (r.target != r.target_addr) o << " (" << r.target_addr << ")";
  o << ", closed port " << r.port << ", via " << r.interface << " from " << r.source << "\n";
  if (r.valid) {
    o << "  capacity   " << (r.lower_bound ? ">= " : "") << format_rate(r.capacity_bps)
      << "  (95% interval " << format_rate(r.low_bps) << " .. " << format_rate(r.high_bps)
      << ", IP layer)\n";
  } else {
    o << "  capacity   no estimate\n";
  }
  std::snprintf(buf, sizeof buf, "  trains     %d sent, %d used (%s)\n", r.trains_sent,
                r.trains_used, r.stop_reason.c_str());
  o << buf;
  const double avg = r.elapsed_s > 0 ? 8.0 * static_cast<double>(r.probe_bytes) / r.elapsed_s : 0;
  std::snprintf(buf, sizeof buf,
                "  probing    %llu packets, %.2f MB in %.2f s (average %s); rtt %.3f ms\n",
                static_cast<unsigned long long>(r.probe_packets),
                static_cast<double>(r.probe_bytes) / 1e6, r.elapsed_s, format_rate(avg).c_str(),
                r.rtt_s * 1e3);
  o << buf;
  for (const auto& w : r.warnings) o << "  warning    " << w.code << ": " << w.message << "\n";
  return o.str();
}

}  // namespace lw
