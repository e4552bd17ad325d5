#pragma once
// Result records: plain data filled by the session, rendered by the writers.
#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace lw {

constexpr int kSchemaVersion = 1;

struct Warning {
  std::string code;     // stable name, e.g. "capacity_lower_bound"
  std::string message;  // one sentence for people
};

struct TrainRecord {
  int train = 0;
  int load_packets = 0;
  std::string verdict;
  double capacity_bps = 0;
  double offered_bps = 0;
  double reply_dispersion_s = 0;
  double send_dispersion_s = 0;
  double max_send_lag_s = 0;
  double left_dispersion_s = 0;
};

struct CapacityResult {
  std::string target;  // as given
  std::string target_addr;
  int port = 0;
  std::string source;
  std::string interface;
  int source_port = 0;
  double rtt_s = 0;

  bool valid = false;
  bool lower_bound = false;  // the path carried everything we could offer
  double capacity_bps = 0;
  double low_bps = 0;
  double high_bps = 0;
  double kde_bandwidth_bps = 0;
  double per_train_capacity_bps = 0;  // KDE mode of bits/dispersion per train (diagnostic)
  double dispersion_offset_s = 0;     // fixed part of the dispersion, from the slope fit

  int trains_sent = 0;
  int trains_used = 0;
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
  std::string stop_reason;
  std::vector<TrainRecord> trains;
  std::vector<Warning> warnings;

  nlohmann::json params;  // every parameter in effect
};

struct ErrorInfo {
  std::string code;
  std::string message;
};

}  // namespace lw
