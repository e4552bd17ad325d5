#include "report/plan_text.hpp"

#include <cstdint>
#include <cstdio>
#include <sstream>

namespace lw {

std::string plan_text(const nlohmann::json& plan) {
  std::ostringstream o;
  o << "dry run: linkwidth " << plan["command"].get<std::string>() << " "
    << plan["target"].get<std::string>() << " (" << plan["target_addr"].get<std::string>()
    << ") from " << plan["source"].get<std::string>() << " via "
    << plan["interface"].get<std::string>() << "; nothing is sent\n";
  o << "first train (" << plan["first_train"]["load_packets"].get<int>() << " load packets, "
    << plan["first_train"]["bytes"].get<std::uint64_t>() << " bytes):\n";
  o << "  idx role    flags seq         ip_len ttl offset_us\n";
  char buf[160];
  for (const auto& p : plan["first_train"]["packets"]) {
    std::snprintf(buf, sizeof buf, "  %3d %-7s %-5s %-11u %6d %3d %9.1f\n", p["index"].get<int>(),
                  p["role"].get<std::string>().c_str(), p["flags"].get<std::string>().c_str(),
                  p["seq"].get<unsigned>(), p["ip_len"].get<int>(), p["ttl"].get<int>(),
                  p["offset_s"].get<double>() * 1e6);
    o << buf;
  }
  for (const auto& [k, v] : plan["schedule"].items())
    o << k << ": " << v.get<std::string>() << "\n";
  o << "caps: " << plan["caps"].dump() << "\n";
  for (const auto& w : plan["warnings"])
    o << "warning: " << w["message"].get<std::string>() << "\n";
  return o.str();
}

}  // namespace lw
