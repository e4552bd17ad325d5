#pragma once
// Result records: plain data filled by the session, rendered by the writers.
#include <cstdint>
#include <string>
#include <vector>

#include "linkwidth/run_names.hpp"
#include "nlohmann/json.hpp"
#include "report/stop_reason.hpp"
#include "report/warning_codes.hpp"

namespace lw {

constexpr int kSchemaVersion = 1;

// A warning is built from its catalogued code (report/warning_codes.hpp):
//   res.warnings.push_back({WarningCode::kCaptureDrops, "3 packets dropped"});
// recorded() reads one back from a document, as written.
struct Warning {
  Warning(WarningCode c, std::string m) : code(warning_name(c)), message(std::move(m)) {}
  static Warning recorded(std::string code, std::string message) {
    Warning w(WarningCode::kNoEstimate, std::move(message));
    w.code = std::move(code);
    return w;
  }
  std::string code;     // stable name, e.g. "capacity_lower_bound"
  std::string message;  // one sentence for people
};

// Whether `ws` holds a warning of `code`.
inline bool warned_of(const std::vector<Warning>& ws, WarningCode code) {
  const std::string name = warning_name(code);
  for (const Warning& w : ws) {
    if (w.code == name) return true;
  }
  return false;
}

// Who answers in the target's name (estimate/middlebox.hpp): the TTL of the
// discovery reply, the hop count it implies, and the TTL check's verdict.
struct ReplierInfo {
  int reply_ttl = 0;
  int reply_hops = 0;
  std::string check = "not_checked";  // consistent / middlebox / forward_longer / inconclusive
  std::string box;                    // middlebox: the router at whose hop the answers start
};

// The verification of a capacity at our own sending rate: full-size SYN
// trains, which a stateful firewall passes where it drops the RST load.
struct LoadCheckRecord {
  bool ran = false;
  bool dropped = false;
  int trains_sent = 0;
  int trains_used = 0;
  int trains_uncompressed = 0;
  double syn_capacity_bps = 0;  // median of the kept SYN trains (0 = none)
  double ratio = 0;             // that / the RST trains' capacity
  double rst_capacity_bps = 0;  // what the RST trains said
  double send_limit_bps = 0;    // what we could send at most
};

// The shaper probe (estimate/shaper.hpp): run when the capacity trains
// disagreed the way a token bucket makes them (`trigger`), one or more
// rate-constant streams long enough to empty the bucket.
struct ShaperRecord {
  bool probed = false;            // at least one stream was sent
  std::string trigger;            // why: rate_drop, negative_offset, replies_stopped, sizing_faster
  bool found = false;             // a level shift: rate, peak and bucket below are measured
  bool not_emptied = false;       // every stream came back at the offered rate: bucket >= bucket_at_least
  double rate_bps = 0;            // sustained rate
  double rate_low_bps = 0;
  double rate_high_bps = 0;
  double peak_bps = 0;            // received rate before the shift
  bool peak_is_lower_bound = false;  // the burst came at the rate we sent it
  double bucket_bytes = 0;        // IP bytes that passed at the peak beyond the sustained rate
  double bucket_at_least_bytes = 0;
  int streams = 0;
  // The lowest RTT a stream's head marker saw (0: none): the discovery's
  // RTT may have been taken behind a standing queue. Live only, not written.
  double head_rtt_s = 0;
  int stalled_streams = 0;         // of them, the replies (or our sending, early) stood still: sent again
  std::uint64_t stream_bytes = 0;  // bytes of every stream sent
  // The probe's time, its idles, streams and reply waits: with stream_bytes
  // left out of the --max-load average (estimate/load_budget.hpp, LoadLedger).
  double elapsed_s = 0;
  std::string verdict;  // found / none / not_emptied / no_replies / unconfirmed
  // The check before a stream the --max-load ledger does not count
  // (confirm_stream_rate): its full-size SYN trains sent, whole, and the
  // median rate of the whole ones the path compressed (0: none). With
  // verdict "unconfirmed" they did not confirm the rate and no stream went.
  int syn_trains = 0;
  int syn_whole = 0;
  double syn_bps = 0;
  double stream_rate_bps = 0;     // the last stream's received rate when compressed (diagnostic)
  // measure/availbw: the bucket's refill (app/shaper_run.hpp, run_shaper_availbw)
  int refill_pairs = 0;           // emptying stream + refill stream pairs measured
  std::uint64_t refill_bytes = 0;  // bytes of their streams
  double refill_idle_s = 0;       // the idle tau between the two streams (last pair)
  std::vector<double> refill_bps;  // each pair's avail-bw (8 x content / tau)
};

// A capacity train's verdict besides the SampleVerdict names
// (estimate/capacity.hpp, verdict_name): a sizing train, or one that met a
// smaller path MTU.
inline constexpr const char* kVerdictSizing = "sizing";
inline constexpr const char* kVerdictPathMtu = "path_mtu";

struct TrainRecord {
  int train = 0;
  int load_packets = 0;
  std::string verdict;  // verdict_name(SampleVerdict), kVerdictSizing or kVerdictPathMtu
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
  // What the markers to the target were (plan/target_marker.hpp).
  TargetMarker marker_kind = TargetMarker::kClosedSyn;
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
  int lost_load_lifted = 0;  // trains lifted a whole packet time or more (lift_lost_load)
  double dispersion_offset_s = 0;     // fixed part of the dispersion, from the slope fit
  // "rst_trains", or "syn_pairs": a fallback from full-size SYN trains when the
  // RST load was dropped on the way (low confidence), or "reply_gaps": the
  // reply-gap check found every train biased by cross traffic.
  std::string capacity_source = "rst_trains";
  ReplierInfo replier;
  LoadCheckRecord load_check;
  ShaperRecord shaper;
  // The reply-gap check (app/plumbing/path_checks.hpp, check_capacity_gaps):
  // null when it did not run.
  nlohmann::json gap_check;
  // The policer probe (app/runs/shaper_run.hpp, run_policer_probe): null when
  // none was sent; else its verdict, the rate and the bucket it found.
  nlohmann::json policer;
  // The estimate a token bucket's sustained rate replaced (apply_shaper), for
  // when the refill pairs refute the bucket (unapply_shaper): null when none.
  nlohmann::json before_shaper;

  int trains_sent = 0;
  int trains_used = 0;
  // > 0: a queue on the path (or ours) could not hold longer trains, and the
  // trains were shortened (trains_shortened); the longest length measured
  // after the last shortening, in load packets. Later phases' trains stay
  // within it (the hops phase: hop trains that lose load unseen read fast).
  int queue_fit_load_packets = 0;
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
  StopReason stop_reason = StopReason::kNone;
  std::vector<TrainRecord> trains;
  std::vector<Warning> warnings;

  nlohmann::json params;  // every parameter in effect
};

// One paced train of the avail-bw search.
struct PacedTrainRecord {
  int load_packets = 0;
  int packet_size = 0;
  double offered_bps = 0;
  double received_bps = 0;
  double ratio = 0;            // R_m / R_o used for the verdict
  double ratio_head_tail = 0;  // the paper's, head to tail
  double pdt = 0;
  double pacing_error_s = 0;  // spread of our own send lateness over the train
  // What our own interface did to the train (PacedSample::local_ratio: left
  // span / sent span over the ratio's markers; 0 = not captured), and
  // whether it counted as shaped there. ratio / local_ratio is the rest of
  // the path's share.
  double local_ratio = 0;
  double local_queue_s = 0;  // spread of (left - sent) over its packets (0: not captured)
  bool shaped_locally = false;
  // Moved about by our queue at under kOwnLinkFree of our link's avail-bw
  // (that, from its counters, as the train was judged; 0: not known): judged
  // on the lower of its ratios as sent and as it left
  // (PacedSample::own_queue_burst).
  bool own_queue_burst = false;
  double own_link_availbw_bps = 0;
  int markers = 0;
  int replies = 0;
  std::string verdict;  // above / below / unclear / lost / unusable / send_stall
};

// One tested rate: a fleet of trains (one train for --method linkwidth).
struct RateRecord {
  std::string phase;        // "calibration" or "search"
  double rate_bps = 0;      // the rate asked for
  double offered_bps = 0;   // median measured offered rate
  double received_bps = 0;  // median received rate
  double ratio = 0;         // median R_m / R_o
  std::string verdict;      // fleet verdict: above / below / grey (calibration: "calibration")
  double at_s = 0;          // when the fleet started, since the run began
  std::vector<PacedTrainRecord> trains;
};

// This host's own traffic through the interface our probes left by, over
// the avail-bw phase (estimate/own_traffic.hpp); valid = read.
struct OwnTrafficRecord {
  bool valid = false;
  std::string interface;
  int l2_header = 0;       // bytes of link header per packet in its counters
  int packet_size = 0;     // our load packets' IP bytes (what the avail-bw is counted in)
  double window_s = 0;
  double link_bps = 0;     // other traffic, counted with its link header
  double low_bps = 0, high_bps = 0;  // lowest and highest over 0.5 s bins
  int bins = 0;
  bool applied = false;    // the avail-bw is the interface's C less it (measure)
  // The interface's root qdisc (estimate/own_qdisc.hpp): its kind ("" = not
  // read), and its sustained rate when ours and the host's traffic share it.
  std::string qdisc_kind;
  double qdisc_rate_bps = 0;  // bits/s of the bytes it counts (link header included)
  int qdisc_overhead = 0;
  std::string qdisc_not_used;  // why no rate was taken from it
};

struct AvailbwResult {
  bool valid = false;
  std::string method;  // name(Method) of the search; "" when it did not run
  double availbw_bps = 0;
  double low_bps = 0;
  double high_bps = 0;
  double search_capacity_bps = 0;      // upper end of the search (narrow-link capacity)
  double tight_link_capacity_bps = 0;  // from the response curve; 0 = not estimated
  std::string crossing_capacity_source;  // narrow_link / response_slope, "" = no crossing
  std::string basis;             // response_curve / fleet_hinge / bracket / linkwidth ("" = none)
  double crossing_bps = 0;       // mean response crossing (0 = none)
  double crossing_se_bps = 0;    // its standard error
  int locally_shaped_trains = 0;         // trains our own qdisc spread out (issue 11)
  int own_queue_burst_trains = 0;        // ... at a rate our link had room for
  double queue_ceiling_s = 0;            // the tight link's full queue seen (0 = none)
  int queue_capped_trains = 0;           // trains read up to it (ratio_below_ceiling)
  OwnTrafficRecord own_traffic;
  int response_points = 0;
  double resolution_bps = 0;
  double noise_baseline = 0;   // calibration: median ratio
  double noise_threshold = 0;  // calibration: "above" when ratio > baseline + threshold
  double noise_baseline_se = 0;  // calibration: the baseline's standard error
  StopReason stop_reason = StopReason::kNone;
  int trains_sent = 0;
  double elapsed_s = 0;
  std::uint64_t probe_packets = 0;
  std::uint64_t probe_bytes = 0;
  std::vector<RateRecord> rates;
  std::vector<Warning> warnings;
};

struct ErrorInfo {
  std::string code;
  std::string message;
};

}  // namespace lw
