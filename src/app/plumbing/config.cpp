#include "app/plumbing/config.hpp"

#include <nlohmann/json.hpp>

namespace lw {

// Every field but save_pcap under its own name; fields missing from a record keep their
// defaults (records written before a field existed still read).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Config, command, target, family, interface, source, port, sport, json, dry_run, verbose, packet_size, load_packets, markers, drain_packets, target_dispersion_s, max_load_packets, length_ratio, min_trains, max_trains, precision, max_load, max_time_s, max_bytes, max_rate_bps, max_replies, measure_hops, method, capacity_bps, resolution, fleet_trains, fleet_fraction, train_time_s, min_train_packets, avail_markers, calibration_trains, calibration_rate, max_fleets, epsilon, theta, theta_bps, pairs, pair_gap_s, train_delay_s, discovery_tries, reply_timeout_s, hop_markers, max_hops, icmp_rate, icmp_burst, icmp_rate_given, min_step)

nlohmann::json config_json(const Config& c) { return c; }

Config config_from_json(const nlohmann::json& j) { return j.get<Config>(); }

}  // namespace lw
