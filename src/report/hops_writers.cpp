#include "report/hops_writers.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "report/writers.hpp"

namespace lw {

namespace {

nlohmann::json positive_or_null(double v) { return v > 0 ? nlohmann::json(v) : nullptr; }

}  // namespace

nlohmann::json hops_json(const HopsResult& r) {
  nlohmann::json hops = nlohmann::json::array();
  for (const auto& h : r.hops) {
    hops.push_back({{"ttl", h.ttl},
                    {"addr", h.addr.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.addr)},
                    {"marker_kind", h.marker_kind},
                    {"answers_tcp", h.answers_tcp},
                    {"replies", h.replies},
                    {"used", h.used},
                    {"dispersion_s", positive_or_null(h.dispersion_s)},
                    {"rate_bps", positive_or_null(h.rate_bps)},
                    {"choke_fraction", h.choke_fraction},
                    {"bottleneck_fraction", h.bottleneck_fraction},
                    {"passed_fraction", h.passed_fraction},
                    {"compressed_fraction", h.compressed_fraction},
                    {"rate_low_bps", positive_or_null(h.rate_low_bps)},
                    {"rate_high_bps", positive_or_null(h.rate_high_bps)}});
  }
  return {{"hops", hops},
          {"bottleneck_hop", r.bottleneck_hop > 0 ? nlohmann::json(r.bottleneck_hop) : nullptr},
          {"bottleneck_earliest_hop",
           r.bottleneck_hop > 0 ? nlohmann::json(r.bottleneck_earliest_hop) : nullptr},
          {"bottleneck_addr",
           r.bottleneck_addr.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.bottleneck_addr)},
          {"bottleneck_confidence", r.bottleneck_confidence},
          {"bottleneck_rate_bps", positive_or_null(r.bottleneck_rate_bps)}};
}

nlohmann::json to_json(const HopsResult& r) {
  nlohmann::json j = document_head("hops", r);
  j.update({{"hop_markers", r.hop_markers},
            {"target_reached", r.target_reached},
            {"no_choke_fraction", r.no_choke_fraction},
            {"layer", "ip"},
            {"load_packets", r.load_packets},
            {"trains_sent", r.trains_sent},
            {"trains_voting", r.trains_voting},
            {"stop_reason", r.stop_reason},
            {"elapsed_s", r.elapsed_s},
            {"probe_packets", r.probe_packets},
            {"probe_bytes", r.probe_bytes}});
  j.update(hops_json(r));
  nlohmann::json w = nlohmann::json::array();
  for (const auto& x : r.warnings) w.push_back({{"code", x.code}, {"message", x.message}});
  j["warnings"] = w;
  return j;
}

std::string to_text(const HopsResult& r) {
  std::ostringstream o;
  char buf[256];
  o << "linkwidth hops to " << r.target;
  if (r.target != r.target_addr) o << " (" << r.target_addr << ")";
  o << ", " << port_phrase(r.marker_kind, r.port) << ", via " << r.interface << " from "
    << r.source << "\n";
  // The address column fits the longest address (IPv6 ones run to 39 characters).
  int aw = 15;
  for (const HopRecord& h : r.hops) aw = std::max(aw, static_cast<int>(h.addr.size()));
  o << "  hop  " << std::string("address") + std::string(static_cast<std::size_t>(aw - 7), ' ')
    << "  markers  replies  dispersion    rate           choke\n";
  for (std::size_t i = 0; i < r.hops.size(); ++i) {
    const HopRecord& h = r.hops[i];
    const bool mark = r.bottleneck_hop == static_cast<int>(i) + 1;
    std::string disp = h.dispersion_s > 0 ? [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%.3f ms", h.dispersion_s * 1e3);
      return std::string(b);
    }()
                                          : std::string("-");
    std::snprintf(buf, sizeof buf, "%s %3d  %-*s  %-7s  %7d  %-12s  %-13s  %3.0f%%%s\n",
                  mark ? ">" : " ", h.ttl, aw, h.addr.empty() ? "unknown" : h.addr.c_str(),
                  name(h.marker_kind), h.replies, disp.c_str(),
                  h.rate_bps > 0 ? format_rate(h.rate_bps).c_str() : "-", 100 * h.choke_fraction,
                  h.used ? "" : h.compressed ? "  (replies compressed)" : "  (too few replies)");
    o << buf;
  }
  if (r.bottleneck_hop > 0) {
    std::snprintf(
        buf, sizeof buf, "  bottleneck: the link into hop %d (%s), %s, in %.0f%% of %d trains\n",
        r.bottleneck_hop, r.bottleneck_addr.empty() ? "unknown" : r.bottleneck_addr.c_str(),
        format_rate(r.bottleneck_rate_bps).c_str(), 100 * r.bottleneck_confidence, r.trains_voting);
    o << buf;
    if (r.bottleneck_earliest_hop > 0 && r.bottleneck_earliest_hop < r.bottleneck_hop) {
      o << "              (hops before it did not answer: it may be any link into hops "
        << r.bottleneck_earliest_hop << ".." << r.bottleneck_hop << ")\n";
    }
  } else {
    o << "  bottleneck: none named\n";
  }
  std::snprintf(buf, sizeof buf,
                "  probing    %d trains of %d load packets, %llu packets, %.2f MB in %.2f s (%s)\n",
                r.trains_sent, r.load_packets, static_cast<unsigned long long>(r.probe_packets),
                static_cast<double>(r.probe_bytes) / 1e6, r.elapsed_s,
                stop_reason_name(r.stop_reason));
  o << buf;
  for (const auto& w : r.warnings) o << "  warning    " << w.code << ": " << w.message << "\n";
  return o.str();
}

}  // namespace lw
