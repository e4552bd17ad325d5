#include "plan/probe.hpp"


namespace lw {

const char* role_name(Role r) {
  switch (r) {
    case Role::kWarmup:
      return "warmup";
    case Role::kDrain:
      return "drain";
    case Role::kMarker:
      return "marker";
    case Role::kLoad:
      return "load";
    case Role::kCloser:
      return "closer";
  }
  return "?";
}

std::uint32_t Probe::expected_ack() const {
  // SYN occupies one sequence number; payload bytes follow it.
  return seq + 1u + payload_len();
}

std::uint64_t Train::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& p : probes) n += p.ip_len;
  return n;
}

}  // namespace lw
