#pragma once
// A validated configuration: everything the session needs, nothing parsed later.
// Its options (flag, range, help, params key) are declared in app/options.cpp.
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "linkwidth/run_names.hpp"

namespace lw {

struct Config {
  Command command = Command::kCapacity;
  std::string target;   // as given: IPv4/IPv6 literal or host name
  // 4 or 6 (-4/-6): resolve a host name to that family only; 0 = the
  // resolver's first answer. A literal's own family always wins (and must
  // agree with -4/-6).
  int family = 0;
  std::string interface;
  std::string source;
  int port = 0;   // destination (closed) port; 0 = discover
  int sport = 0;  // source port; 0 = reserve one from the kernel
  bool json = false;
  bool dry_run = false;
  bool verbose = false;

  // Train shape.
  int packet_size = 1500;  // IP bytes of each load packet (clamped to the interface MTU)
  int load_packets = 0;    // N; 0 = size automatically for target_dispersion
  int markers = 2;
  int drain_packets = 2;
  double target_dispersion_s = 0.003;
  int max_load_packets = 1000;
  // Trains alternate between N and length_ratio·N load packets; the capacity is
  // the slope between the two (1 = one length, per-train estimate).
  double length_ratio = 2.0;

  // How many trains and when to stop.
  int min_trains = 5;
  int max_trains = 40;
  double precision = 0.01;  // stop when the 95% interval half-width is below this fraction
  double max_load = 0.10;   // average probing rate as a fraction of the capacity

  // Hard caps.
  double max_time_s = 20;  // capacity; availbw and measure default to 30
  std::uint64_t max_bytes = 50ull * 1000 * 1000;
  // Bytes of the stream that looks for a token bucket the capacity trains did
  // not show (a bucket drained at a second bucket's peak rate; the routine
  // check, app/runs/capacity_run.cpp); 0: sized by routine_stream_bytes.
  // no_shaper_stream: none.
  double shaper_stream_bytes = 0;
  bool no_shaper_stream = false;
  // Peak probing rate, IP bits/s: no two consecutive probes leave closer than
  // the previous one's bits at this rate (the pacer enforces it, send/pacer.hpp).
  double max_rate_bps = 1e9;
  // Replies (RST/ACK to our SYN markers) we ask of one host per second, at most:
  // FreeBSD and macOS cap their RSTs at 200 and 250/s by default. Lowered at
  // run time when a host turns out to limit its replies further
  // (estimate/reply_rate.hpp).
  double max_replies = 100;
  std::string save_pcap;  // --save-pcap FILE: every probe and reply of the run

  bool measure_hops = true;  // `measure` also locates the bottleneck hop (--no-hops: skip)

  // Available bandwidth (availbw, measure).
  Method method = Method::kFleet;  // fleet (default) or linkwidth (the paper's)
  double capacity_bps = 0;        // --capacity: skip the capacity phase (availbw only)
  double resolution = 0.03;       // ω: stop when [low, high] is narrower, fraction of C
  int fleet_trains = 6;           // K trains per tested rate
  double fleet_fraction = 0.66;   // η: share of agreeing trains that decides a fleet
  double train_time_s = 0.005;    // shortest paced train (noise is absolute)
  int min_train_packets = 10;     // and at least this many load packets
  int avail_markers = 6;          // SYN markers per paced train (2..16)
  int calibration_trains = 8;     // low-rate trains that measure the timing noise
  double calibration_rate = 0.1;  // their rate, fraction of C
  int max_fleets = 30;
  // --method linkwidth (LinkWidth §3.4-3.5, parameters as in the paper's list).
  double epsilon = 0.1;        // ε: "within" when 1-ε <= R_m/R_o <= 1
  double theta = 0.01;         // θ as a fraction of C (--theta takes bit/s)
  double theta_bps = 0;        // θ in bit/s if given
  int pairs = 10;              // packet pairs per train (npackets = 2·pairs)
  double pair_gap_s = 100e-6;  // Δr_t, the fixed inter-pair gap
  double train_delay_s = 0;    // inter-train delay; never below the 10% load rule

  // Closed-port discovery.
  int discovery_tries = 3;
  double reply_timeout_s = 1.0;  // longest wait for replies (discovery and trains)

  // hops: which hop is the bottleneck (recursive trains).
  HopMarkers hop_markers = HopMarkers::kAuto;
  int max_hops = 30;
  double icmp_rate = 1.0;  // ICMP errors per second a router sends us (Linux icmp_ratelimit)
  double icmp_burst = 6;   // and how many it saves up
  // --icmp-rate was given: otherwise an IPv6 path uses IPv6's default
  // (app/hops_run.cpp, icmp_rate_for).
  bool icmp_rate_given = false;
  double min_step = 0.15;  // relative dispersion step that makes a choke point
};

// The configuration as JSON and back (the run records of --save-pcap keep it
// so that `linkwidth analyze` replays a run with the settings it had).
// from: nlohmann exceptions on fields of the wrong type; callers check ranges.
nlohmann::json config_json(const Config& c);
Config config_from_json(const nlohmann::json& j);

}  // namespace lw
