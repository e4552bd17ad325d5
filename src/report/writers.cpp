#include "report/writers.hpp"

#include "report/hops_writers.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace lw {

std::string format_rate(double bps) {
  char buf[64];
  if (bps >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3f Gbit/s", bps / 1e9);
  else if (bps >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f Mbit/s", bps / 1e6);
  else if (bps >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kbit/s", bps / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f bit/s", bps);
  return buf;
}

std::string port_phrase(TargetMarker marker_kind, int port) {
  const std::string p = std::to_string(port);
  switch (marker_kind) {
    case TargetMarker::kOpenSyn:
      return "open port " + p + " (SYN markers, each reset at once)";
    case TargetMarker::kAck:
      return "port " + p + " (bare ACK markers)";
    case TargetMarker::kClosedSyn:
      break;
  }
  return "closed port " + p;
}

nlohmann::json warnings_json(const std::vector<Warning>& ws) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& w : ws) a.push_back({{"code", w.code}, {"message", w.message}});
  return a;
}

std::vector<Warning> warnings_from_json(const nlohmann::json& a) {
  std::vector<Warning> ws;
  if (!a.is_array()) return ws;
  for (const auto& w : a) {
    ws.push_back(
        Warning::recorded(w.at("code").get<std::string>(), w.at("message").get<std::string>()));
  }
  return ws;
}

nlohmann::json nullable(bool valid, double v) { return valid ? nlohmann::json(v) : nullptr; }

namespace {

// A nullable number of a document read back: null is 0; a missing key throws.
double or_zero(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  return v.is_number() ? v.get<double>() : 0.0;
}

}  // namespace

nlohmann::json load_check_json(const LoadCheckRecord& l) {
  if (!l.ran) return nullptr;
  return {{"load_dropped", l.dropped},
          {"syn_trains_sent", l.trains_sent},
          {"syn_trains_used", l.trains_used},
          {"syn_trains_uncompressed", l.trains_uncompressed},
          {"syn_capacity_bps", nullable(l.trains_used > 0, l.syn_capacity_bps)},
          {"ratio", nullable(l.ratio > 0, l.ratio)},
          {"rst_capacity_bps", l.rst_capacity_bps},
          {"send_limit_bps", nullable(l.send_limit_bps > 0, l.send_limit_bps)}};
}

LoadCheckRecord load_check_from_json(const nlohmann::json& j) {
  LoadCheckRecord l;
  if (!j.is_object()) return l;
  l.ran = true;
  l.dropped = j.at("load_dropped").get<bool>();
  l.trains_sent = j.at("syn_trains_sent").get<int>();
  l.trains_used = j.at("syn_trains_used").get<int>();
  l.trains_uncompressed = j.at("syn_trains_uncompressed").get<int>();
  l.syn_capacity_bps = or_zero(j, "syn_capacity_bps");
  l.ratio = or_zero(j, "ratio");
  l.rst_capacity_bps = or_zero(j, "rst_capacity_bps");
  l.send_limit_bps = or_zero(j, "send_limit_bps");
  return l;
}

nlohmann::json shaper_json(const ShaperRecord& s) {
  if (!s.found && !s.not_emptied) return nullptr;
  return {{"rate_bps", nullable(s.found, s.rate_bps)},
          {"rate_low_bps", nullable(s.found, s.rate_low_bps)},
          {"rate_high_bps", nullable(s.found && std::isfinite(s.rate_high_bps), s.rate_high_bps)},
          {"peak_bps", nullable(s.peak_bps > 0, s.peak_bps)},
          {"peak_is_lower_bound", s.peak_is_lower_bound},
          {"bucket_bytes", nullable(s.found, s.bucket_bytes)},
          {"bucket_bytes_at_least", nullable(s.not_emptied, s.bucket_at_least_bytes)},
          {"layer", "ip"}};
}

nlohmann::json shaper_check_json(const ShaperRecord& s) {
  if (!s.probed) return nullptr;
  nlohmann::json j = {{"trigger", s.trigger},
          {"verdict", s.verdict},
          {"streams", s.streams},
          {"stream_bytes", s.stream_bytes},
          {"elapsed_s", s.elapsed_s},
          {"stream_rate_bps", nullable(s.stream_rate_bps > 0, s.stream_rate_bps)}};
  if (s.stalled_streams > 0) j["stalled_streams"] = s.stalled_streams;
  if (s.syn_trains > 0) {  // the check before a stream outside the --max-load ledger
    j["syn_trains_sent"] = s.syn_trains;
    j["syn_trains_whole"] = s.syn_whole;
    j["syn_bps"] = nullable(s.syn_bps > 0, s.syn_bps);
  }
  if (s.refill_bytes > 0) {
    // measure/availbw: the bucket's refill (app/shaper_run.hpp)
    j["refill_pairs"] = s.refill_pairs;
    j["refill_bytes"] = s.refill_bytes;
    j["refill_idle_s"] = s.refill_idle_s;
    j["refill_bps"] = s.refill_bps;
  }
  return j;
}

ShaperRecord shaper_from_json(const nlohmann::json& shaper, const nlohmann::json& check) {
  ShaperRecord s;
  if (check.is_object()) {
    s.probed = true;
    s.trigger = check.at("trigger").get<std::string>();
    s.verdict = check.at("verdict").get<std::string>();
    s.streams = check.at("streams").get<int>();
    s.stalled_streams = check.value("stalled_streams", 0);  // absent before 2026-11-26
    s.stream_bytes = check.at("stream_bytes").get<std::uint64_t>();
    s.elapsed_s = check.at("elapsed_s").get<double>();
    s.stream_rate_bps = or_zero(check, "stream_rate_bps");
    s.syn_trains = check.value("syn_trains_sent", 0);  // absent before 2026-12-08
    s.syn_whole = check.value("syn_trains_whole", 0);
    if (check.contains("syn_bps")) s.syn_bps = or_zero(check, "syn_bps");
    if (check.contains("refill_bytes")) {  // written with a refill only (measure/availbw)
      s.refill_pairs = check.at("refill_pairs").get<int>();
      s.refill_bytes = check.at("refill_bytes").get<std::uint64_t>();
      s.refill_idle_s = check.at("refill_idle_s").get<double>();
      for (const auto& v : check.at("refill_bps")) {  // a non-finite rate was written as null
        if (v.is_number()) s.refill_bps.push_back(v.get<double>());
      }
    }
  }
  if (shaper.is_object()) {
    s.found = shaper.at("bucket_bytes").is_number();
    s.not_emptied = !s.found;
    s.rate_bps = or_zero(shaper, "rate_bps");
    s.rate_low_bps = or_zero(shaper, "rate_low_bps");
    s.rate_high_bps = shaper.at("rate_high_bps").is_number()
                          ? shaper["rate_high_bps"].get<double>()
                          : (s.found ? std::numeric_limits<double>::infinity() : 0.0);
    s.peak_bps = or_zero(shaper, "peak_bps");
    s.peak_is_lower_bound = shaper.at("peak_is_lower_bound").get<bool>();
    s.bucket_bytes = or_zero(shaper, "bucket_bytes");
    s.bucket_at_least_bytes = or_zero(shaper, "bucket_bytes_at_least");
  }
  return s;
}

namespace {

// Low: a lower bound, or the SYN-train fallback after the load was dropped.
const char* confidence(const CapacityResult& r) {
  return r.lower_bound || r.capacity_source == "syn_pairs" ? "low" : "normal";
}

// The capacity line of the text output.
std::string capacity_line(const CapacityResult& r) {
  std::ostringstream o;
  if (!r.valid) {
    o << "  capacity   no estimate\n";
  } else if (r.capacity_source == "syn_pairs") {
    o << "  capacity   ~" << format_rate(r.capacity_bps) << "  (low confidence: from full-size SYN "
      << "trains, the RST load was dropped on the way; the RST trains said "
      << format_rate(r.load_check.rst_capacity_bps) << ")\n";
  } else {
    o << "  capacity   " << (r.lower_bound ? ">= " : "") << format_rate(r.capacity_bps)
      << "  (95% interval " << format_rate(r.low_bps) << " .. " << format_rate(r.high_bps)
      << ", IP layer)\n";
  }
  if (r.shaper.found) {
    o << "  shaper     token bucket: " << format_rate(r.shaper.rate_bps) << " sustained (the capacity above) after a burst of "
      << static_cast<long long>(r.shaper.bucket_bytes / 1000) << " KB at "
      << (r.shaper.peak_is_lower_bound ? ">= " : "") << format_rate(r.shaper.peak_bps) << "\n";
  } else if (r.shaper.not_emptied) {
    o << "  shaper     a token bucket of at least "
      << static_cast<long long>(r.shaper.bucket_at_least_bytes / 1000)
      << " KB may be on the path: the probe could not empty it within the caps\n";
  }
  if (r.replier.reply_ttl > 0) {
    o << "  replies    TTL " << r.replier.reply_ttl << " (" << r.replier.reply_hops
      << " hops back), TTL check: " << r.replier.check << "\n";
  }
  return o.str();
}

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
  nlohmann::json j = document_head("capacity", r);
  j.update({{"capacity_bps", nullable(r.valid, r.capacity_bps)},
            {"capacity_low_bps", nullable(r.valid, r.low_bps)},
            {"capacity_high_bps", nullable(r.valid && !r.lower_bound, r.high_bps)},
            {"capacity_is_lower_bound", r.lower_bound},
            {"kde_bandwidth_bps", nullable(r.valid, r.kde_bandwidth_bps)},
            {"per_train_capacity_bps", r.per_train_capacity_bps},
            {"trains_lifted_for_lost_load", r.lost_load_lifted},
            {"dispersion_offset_s", r.dispersion_offset_s},
            {"capacity_source", r.capacity_source},
            {"capacity_confidence", confidence(r)},
            {"load_check", load_check_json(r.load_check)},
            {"gap_check", r.gap_check},
            {"shaper", shaper_json(r.shaper)},
            {"peak_capacity_bps", nullable(r.shaper.found || r.shaper.not_emptied, r.shaper.peak_bps)},
            {"shaper_check", shaper_check_json(r.shaper)},
            {"policer", r.policer},
            {"layer", "ip"},
            {"trains_sent", r.trains_sent},
            {"trains_used", r.trains_used},
            {"stop_reason", r.stop_reason},
            {"elapsed_s", r.elapsed_s},
            {"probe_packets", r.probe_packets},
            {"probe_bytes", r.probe_bytes},
            {"warnings", warnings_json(r.warnings)},
            {"trains", trains}});
  return j;
}

namespace {

nlohmann::json own_qdisc_json(const OwnTrafficRecord& o) {
  if (o.qdisc_kind.empty()) return nullptr;
  return {{"kind", o.qdisc_kind},
          {"rate_bps", nullable(o.qdisc_rate_bps > 0, o.qdisc_rate_bps)},
          {"overhead", o.qdisc_overhead},
          {"not_used", o.qdisc_not_used.empty() ? nlohmann::json(nullptr)
                                                : nlohmann::json(o.qdisc_not_used)}};
}

}  // namespace

nlohmann::json own_traffic_json(const OwnTrafficRecord& o) {
  if (!o.valid) return nullptr;
  return {{"interface", o.interface}, {"l2_header", o.l2_header},
          {"packet_size", o.packet_size}, {"window_s", o.window_s},
          {"other_bps", o.link_bps},  {"other_low_bps", o.low_bps}, {"other_high_bps", o.high_bps},
          {"bins", o.bins},           {"applied", o.applied},
          {"qdisc", own_qdisc_json(o)}};
}

OwnTrafficRecord own_traffic_from_json(const nlohmann::json& j) {
  OwnTrafficRecord o;
  if (!j.is_object()) return o;
  j.at("interface").get_to(o.interface);
  j.at("l2_header").get_to(o.l2_header);
  j.at("packet_size").get_to(o.packet_size);
  j.at("window_s").get_to(o.window_s);
  j.at("other_bps").get_to(o.link_bps);
  j.at("other_low_bps").get_to(o.low_bps);
  j.at("other_high_bps").get_to(o.high_bps);
  j.at("bins").get_to(o.bins);
  j.at("applied").get_to(o.applied);
  // (Recordings before the qdisc was read have none.)
  const auto q = j.find("qdisc");
  if (q != j.end() && q->is_object()) {
    q->at("kind").get_to(o.qdisc_kind);
    if (!q->at("rate_bps").is_null()) q->at("rate_bps").get_to(o.qdisc_rate_bps);
    q->at("overhead").get_to(o.qdisc_overhead);
    if (!q->at("not_used").is_null()) q->at("not_used").get_to(o.qdisc_not_used);
  }
  o.valid = true;
  return o;
}

nlohmann::json to_json(const MeasureResult& m) {
  nlohmann::json j = to_json(m.capacity);
  const AvailbwResult& a = m.availbw;
  j["type"] = m.command;
  if (m.capacity_given) j["capacity_source"] = "given";
  j["capacity_stop_reason"] = j["stop_reason"];
  j["capacity_trains"] = j["trains"];
  j.erase("trains");
  j["capacity_elapsed_s"] = j["elapsed_s"];
  j["method"] = a.method;
  j["availbw_bps"] = nullable(a.valid, a.availbw_bps);
  j["availbw_low_bps"] = nullable(a.valid, a.low_bps);
  j["availbw_high_bps"] = nullable(a.valid, a.high_bps);
  j["tight_link_capacity_bps"] = nullable(a.tight_link_capacity_bps > 0, a.tight_link_capacity_bps);
  j["narrow_link_capacity_bps"] = nullable(a.search_capacity_bps > 0, a.search_capacity_bps);
  j["response_points"] = a.response_points;
  j["availbw_basis"] = a.basis.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.basis);
  j["crossing_bps"] = nullable(a.crossing_bps != 0, a.crossing_bps);
  j["crossing_se_bps"] = nullable(a.crossing_bps != 0, a.crossing_se_bps);
  j["crossing_capacity_source"] = a.crossing_capacity_source.empty()
                                      ? nlohmann::json(nullptr)
                                      : nlohmann::json(a.crossing_capacity_source);
  j["locally_shaped_trains"] = a.locally_shaped_trains;
  j["own_queue_burst_trains"] = a.own_queue_burst_trains;
  j["queue_ceiling_s"] = nullable(a.queue_ceiling_s > 0, a.queue_ceiling_s);
  j["queue_capped_trains"] = a.queue_capped_trains;
  j["own_traffic"] = own_traffic_json(a.own_traffic);
  j["resolution_bps"] = a.resolution_bps;
  j["noise"] = {{"baseline", a.noise_baseline},
                {"baseline_se", a.noise_baseline_se},
                {"threshold", a.noise_threshold}};
  j["stop_reason"] = a.stop_reason;
  j["availbw_trains_sent"] = a.trains_sent;
  j["availbw_elapsed_s"] = a.elapsed_s;
  const double total_s = m.elapsed_s;
  const std::uint64_t bytes = m.probe_bytes;
  j["elapsed_s"] = total_s;
  j["probe_bytes"] = bytes;
  j["probe_packets"] = m.probe_packets;
  j["availbw_probe_bytes"] = a.probe_bytes;
  j["average_probe_rate_bps"] = total_s > 0 ? 8.0 * static_cast<double>(bytes) / total_s : 0.0;
  nlohmann::json rates = nlohmann::json::array();
  for (const auto& r : a.rates) {
    nlohmann::json trains = nlohmann::json::array();
    for (const auto& t : r.trains) {
      trains.push_back({{"load_packets", t.load_packets},
                        {"packet_size", t.packet_size},
                        {"offered_bps", t.offered_bps},
                        {"received_bps", t.received_bps},
                        {"ratio", t.ratio},
                        {"ratio_head_tail", t.ratio_head_tail},
                        {"pdt", t.pdt},
                        {"pacing_error_s", t.pacing_error_s},
                        {"local_ratio", nullable(t.local_ratio > 0, t.local_ratio)},
                        {"local_queue_s", nullable(t.local_ratio > 0, t.local_queue_s)},
                        {"shaped_locally", t.shaped_locally},
                        {"own_queue_burst", t.own_queue_burst},
                        {"own_link_availbw_bps",
                         nullable(t.own_link_availbw_bps > 0, t.own_link_availbw_bps)},
                        {"markers", t.markers},
                        {"replies", t.replies},
                        {"verdict", t.verdict}});
    }
    rates.push_back({{"phase", r.phase},
                     {"rate_bps", r.rate_bps},
                     {"offered_bps", r.offered_bps},
                     {"received_bps", r.received_bps},
                     {"ratio", r.ratio},
                     {"verdict", r.verdict},
                     {"at_s", r.at_s},
                     {"trains", trains}});
  }
  j["rates"] = rates;
  nlohmann::json w = j["warnings"];
  if (m.has_hops) {
    j.update(hops_json(m.hops));
    j["hop_markers"] = m.hops.hop_markers;
    j["hops_stop_reason"] = m.hops.stop_reason;
    j["hops_trains_sent"] = m.hops.trains_sent;
    for (const auto& x : m.hops.warnings) w.push_back({{"code", x.code}, {"message", x.message}});
  }
  for (const auto& x : a.warnings) w.push_back({{"code", x.code}, {"message", x.message}});
  j["warnings"] = w;
  return j;
}

std::string to_text(const MeasureResult& m) {
  const CapacityResult& r = m.capacity;
  const AvailbwResult& a = m.availbw;
  std::ostringstream o;
  char buf[256];
  o << "linkwidth " << name(m.command) << " to " << r.target;
  if (r.target != r.target_addr) o << " (" << r.target_addr << ")";
  o << ", " << port_phrase(r.marker_kind, r.port) << ", via " << r.interface << " from "
    << r.source << "\n";
  if (m.capacity_given) {
    o << "  capacity   " << format_rate(r.capacity_bps) << " (given with --capacity)\n";
  } else {
    o << capacity_line(r);
  }
  if (a.valid) {
    o << "  avail-bw   " << format_rate(a.availbw_bps) << "  (range " << format_rate(a.low_bps)
      << " .. " << format_rate(a.high_bps) << "; method " << a.method
      << ", stopped: " << stop_reason_name(a.stop_reason) << ")\n";
  } else {
    o << "  avail-bw   no estimate (" << stop_reason_name(a.stop_reason) << ")\n";
  }
  if (a.tight_link_capacity_bps > 0) {
    o << "  tight link " << format_rate(a.tight_link_capacity_bps)
      << " (slope of the response curve over " << a.response_points << " response trains)\n";
  }
  if (!a.rates.empty()) {
    o << "  rates      offered        ratio    verdict  trains\n";
    for (const auto& x : a.rates) {
      std::string tv;
      for (const auto& t : x.trains) tv += t.verdict.empty() ? '?' : t.verdict[0];
      std::snprintf(buf, sizeof buf, "    %-11s %-14s %8.4f %-8s %s\n", x.phase.c_str(),
                    format_rate(x.offered_bps > 0 ? x.offered_bps : x.rate_bps).c_str(), x.ratio,
                    x.verdict.c_str(), tv.c_str());
      o << buf;
    }
  }
  if (m.has_hops) {
    // The hops table without its header line.
    std::string h = to_text(m.hops);
    h = h.substr(h.find('\n') + 1);
    const std::string probing = "  probing    ";
    for (std::size_t at = h.find(probing); at != std::string::npos; at = h.find(probing, at)) {
      h.replace(at, probing.size(), "  hops       ");
    }
    o << h;
  }
  const double total_s = m.elapsed_s;
  const std::uint64_t bytes = m.probe_bytes;
  const double avg = total_s > 0 ? 8.0 * static_cast<double>(bytes) / total_s : 0;
  std::snprintf(buf, sizeof buf, "  probing    %llu packets, %.2f MB in %.2f s (average %s)\n",
                static_cast<unsigned long long>(m.probe_packets), static_cast<double>(bytes) / 1e6,
                total_s, format_rate(avg).c_str());
  o << buf;
  for (const auto& w : r.warnings) o << "  warning    " << w.code << ": " << w.message << "\n";
  for (const auto& w : a.warnings) o << "  warning    " << w.code << ": " << w.message << "\n";
  return o.str();
}

nlohmann::json error_json(const std::string& type, const std::string& target, const ErrorInfo& err,
                          const nlohmann::json& partial) {
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
  o << ", " << port_phrase(r.marker_kind, r.port) << ", via " << r.interface << " from "
    << r.source << "\n";
  o << capacity_line(r);
  std::snprintf(buf, sizeof buf, "  trains     %d sent, %d used (%s)\n", r.trains_sent,
                r.trains_used, stop_reason_name(r.stop_reason));
  o << buf;
  const double avg = r.elapsed_s > 0 ? 8.0 * static_cast<double>(r.probe_bytes) / r.elapsed_s : 0;
  std::snprintf(
      buf, sizeof buf, "  probing    %llu packets, %.2f MB in %.2f s (average %s); rtt %.3f ms\n",
      static_cast<unsigned long long>(r.probe_packets), static_cast<double>(r.probe_bytes) / 1e6,
      r.elapsed_s, format_rate(avg).c_str(), r.rtt_s * 1e3);
  o << buf;
  for (const auto& w : r.warnings) o << "  warning    " << w.code << ": " << w.message << "\n";
  return o.str();
}

}  // namespace lw
