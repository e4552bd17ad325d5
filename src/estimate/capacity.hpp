#pragma once
// Capacity from the dispersion of SYN-marker replies around a train of RST load
// (LinkWidth §3.3; packet-train form of §2: C = bits / Δ_R). Pure functions over
// timestamp vectors: no sockets, clocks or globals.
#include <string>
#include <vector>

#include "linkwidth/time.hpp"

namespace lw {

struct Train;
struct TrainOutcome;

// One train, from its head marker to its last marker inclusive.
struct TrainTiming {
  std::vector<double> bits;      // IP bits of each packet
  std::vector<Nanos> sent;       // user-space send time (offered schedule); 0 = not sent
  std::vector<bool> marker;      // draws a reply we time
  std::vector<Nanos> reply;      // reply arrival for markers; 0 = lost
  // When the capture saw each packet leave our interface, after our own qdisc;
  // 0 = not seen. Already shaped if our own uplink is the bottleneck, so it is
  // a diagnostic, never the offered schedule.
  std::vector<Nanos> left;
  // Planned departure of each packet (Probe::offset, relative to the train's t0).
  std::vector<Nanos> planned;
  // Bits sent back to back right before the head (drain packets): on a FIFO
  // link they keep the bottleneck busy while the head is handed to the kernel.
  double lead_bits = 0;
  int duplicates = 0;
};

TrainTiming timing_of(const Train& train, const TrainOutcome& outcome);

struct CapacityFilter {
  // The train must have been offered at least this much faster than the path
  // carried it (send dispersion × ratio <= reply dispersion); otherwise it only
  // shows our own sending rate.
  double min_compression = 1.10;
  // A send-side stall: a packet was handed to the kernel so late that the
  // bottleneck could have run dry before it, by more than this tolerance plus
  // the time the lead (drain) packets keep it busy.
  Nanos stall_tolerance = 15 * kUs;
};

enum class SampleVerdict {
  kKept,
  kLostReply,
  kReordered,
  kUnsent,
  kSendStall,
  kNotCompressed,
  kBadDispersion,
};
const char* verdict_name(SampleVerdict v);

struct CapacitySample {
  SampleVerdict verdict = SampleVerdict::kKept;
  double capacity_bps = 0;        // bits after head / reply dispersion (0 if not computable)
  double offered_bps = 0;         // bits after head / send dispersion
  double reply_dispersion_s = 0;
  double send_dispersion_s = 0;
  double max_send_lag_s = 0;      // worst lateness against a busy bottleneck
  double left_dispersion_s = 0;   // head-to-tail spacing as they left our interface (0 = unknown)
  bool kept() const { return verdict == SampleVerdict::kKept; }
};

CapacitySample evaluate_capacity_train(const TrainTiming& t, const CapacityFilter& f);

struct CapacityEstimate {
  bool valid = false;
  double capacity_bps = 0;
  double low_bps = 0;
  double high_bps = 0;
  double kde_bandwidth_bps = 0;
  int samples = 0;
};

// Robust aggregate of kept per-train samples: KDE mode (Lai & Baker §IV-C) with
// a percentile-bootstrap 95% interval.
CapacityEstimate aggregate_capacity(const std::vector<double>& kept_bps);

// Capacity from two train lengths: the dispersion of a train is a + bits/C,
// where the offset a gathers everything that hits head and tail replies
// differently (a host waking from idle for the tail reply, interrupt
// moderation, a shaper's timer latency, a token-bucket burst). The slope
// between the two lengths removes it: C = (bits_long - bits_short) /
// (D_long - D_short), each D the dispersion_location() of its group.
// Interval: percentile bootstrap, resampling each group.
// Location of a group of dispersions: the lower quartile. Cross traffic on
// the forward path, host wake-ups and timer latency only ever lengthen a
// train's dispersion, so the least disturbed trains are the short ones (the
// idea behind CapProbe's minimum); the quartile rather than the minimum keeps
// the rare compressed train (a delayed head reply) from deciding alone. On lab
// recordings it beat the KDE mode and the median at 50 and 300 Mbit/s.
double dispersion_location(const std::vector<double>& dispersions_s);

struct SlopeEstimate {
  CapacityEstimate capacity;
  double offset_s = 0;  // a: dispersion not explained by the bits
};
SlopeEstimate estimate_capacity_slope(const std::vector<double>& short_disp_s, double short_bits,
                                      const std::vector<double>& long_disp_s, double long_bits);

// The slope removes the fixed offset but is a difference of two dispersions:
// with bursty cross traffic and few trains its interval can be very wide (a
// 3 Mbit/s link with HTTP cross traffic gave 9.5 [3.4, 23.8]) while the
// per-train estimate (the KDE mode of bits/dispersion) stays tight and its
// offset bias |a|/D is small on long dispersions. True when the per-train
// estimate should be reported instead: the slope's 95% interval is wider than
// +-max(10%, 2 x precision) and wider than the per-train interval.
bool prefer_per_train(const CapacityEstimate& slope, const CapacityEstimate& per_train,
                      double precision);

}  // namespace lw
