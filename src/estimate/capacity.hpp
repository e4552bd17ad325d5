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
  // Replies closer together than the probes left us: no forward path does
  // that (a FIFO queue only spreads a train), so the way back compressed
  // them (replies held behind a large packet on a slow or busy return
  // link, then sent back to back). Beyond the reply timing noise (20-200
  // us): at most this share of the span the train left with, over at
  // least compressed_min_span.
  double compressed_share = 0.5;
  Nanos compressed_min_span = kMs;
};

enum class SampleVerdict {
  kKept,
  kLostReply,
  kReordered,
  kUnsent,
  kSendStall,
  kNotCompressed,
  kBadDispersion,
  // Our own queue dropped load packets of the train: the capture saw the
  // markers leave, spread by this host's qdisc, but not every load packet
  // between them (a small egress queue: a container's or an uplink's
  // limit). The replies are spaced by fewer bits than the train carried.
  kLostLoad,
  // The replies came back closer together than the train left
  // (CapacityFilter::compressed_share): the return path compressed them,
  // and the dispersion says nothing of the forward path.
  kRepliesCompressed,
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
  // kLostLoad: load packets our own queue dropped, and how many probes after
  // the head left before the first of them (what the queue held). The
  // capacity then counts only the bits that left.
  int lost_load = 0;
  int left_before_loss = 0;
  int load_left = 0;  // with lost_load: load packets that did leave
  bool kept() const { return verdict == SampleVerdict::kKept; }
};


// Whether the replies of a sample came back closer together than the train
// left (its send span, or the span it left our interface with when that is
// shorter), by `share`, over a span of at least `min_span_s`; false when a
// span is unknown. evaluate_capacity_train calls it with the filter's values.
bool replies_closer_than_sent(const CapacitySample& s, double share, double min_span_s);

CapacitySample evaluate_capacity_train(const TrainTiming& t, const CapacityFilter& f);

// Trains (RST or otherwise) whose replies came back closer together than they
// left (replies_closer_than_sent with `share`), among those sent over a span
// of at least `min_span_s` with their replies back.
struct CloserCount {
  int closer = 0;
  int timed = 0;
};
CloserCount count_closer_than_sent(const std::vector<CapacitySample>& samples, double share,
                                   double min_span_s);

// Whether replies that came back closer than sent in `n` make the way back
// the cause: kMinCloserTrains of them or more, and at least kCloserShare of
// the timed trains. Timing noise (20-200 us per reply) halves a short
// train's span now and then: in 4766 timed trains of 234 committed runs, 82
// came back closer, 78 of them in the runs of one saturated 3 Mbit/s link
// whose full byte-limited queue dropped the RST load between the markers
// (the callers tell that case apart: its full-size SYNs lose replies too),
// and at most one in any other run.
constexpr int kMinCloserTrains = 2;
// The shortest span over which a train's replies may count as closer than sent.
constexpr double kCloserMinSpan = 100e-6;
constexpr double kCloserShare = 0.25;
bool closer_than_sent_in_many(const CloserCount& n);

// Load packets the capture never saw leave while every marker did (0 when a
// marker's departure is missing or there are no departure times), and how
// many probes after the head left before the first of them. Whether our own
// queue dropped them, and not the capture, is the caller's to judge from how
// the train was spread (capacity and avail-bw trains are paced differently).
struct MissingDepartures {
  int count = 0;
  int left_before = 0;
};
MissingDepartures missing_departures(const TrainTiming& t);

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
// `q`: the quantile used as each group's location (dispersion_location's
// 0.25 unless the caller knows better).
SlopeEstimate estimate_capacity_slope(const std::vector<double>& short_disp_s, double short_bits,
                                      const std::vector<double>& long_disp_s, double long_bits,
                                      double q = 0.25);
constexpr double kCrossTrafficQuantile = 0.10;

// Cross traffic that reaches the narrow link while a train is arriving there
// queues between its packets: a train of `bits` arriving over a span S meets
// on average X*S bits of it, so its dispersion is, on average,
//   D = a + bits/C + (X/C) S
// (TOPP's and PRC-MT's linear response above the available bandwidth, 003
// §3.5 and 004: per bit, 1/C (1 + X/R) at arrival rate R = bits/S). The
// two-length slope alone reads C / (1 + X/R). Trains of two lengths sent at
// two clearly different rates make bits and S separable: a least-squares fit
// of D on (bits, S) over the trains gives 1/C as the coefficient of bits, the
// value extrapolated to R -> infinity. It is a fit of the *mean* dispersion
// (the mean, unlike a quantile, is linear in the cross traffic a train meets,
// which is why the quartile slope cannot be corrected this way), so gross
// outliers (a host wake-up) are trimmed first with a deliberately loose rule.
// S is the train's measured send span (our send times, head to tail), which
// equals its arrival span at the narrow link only when no link before it
// spreads the train; a spread train arrives at the same rate whatever we
// send, its dispersion does not depend on S, and the fit's X/C shrinks
// towards 0: the correction then does no harm but no good either.
struct TrainDispersion {
  double bits = 0;     // bits after the head marker
  double send_s = 0;   // measured send dispersion, head to tail
  double reply_s = 0;  // reply dispersion, head to tail
  int group = 0;       // train length: 0 short, 1 long
  double left_s = 0;   // head-to-tail spacing as it left our interface (0 = unknown)
};
struct RateFit {
  // The trains were offered at two rates far enough apart (per length group,
  // at least 3 trains at each, median 1/R apart by >= kMinPaceRatio).
  bool possible = false;
  // The dispersion grows with the send span beyond noise (the 95% bootstrap
  // interval of X/C excludes 0): `capacity` is the extrapolation and should
  // be reported; otherwise the caller keeps the pooled slope.
  bool applied = false;
  CapacityEstimate capacity;  // C = 1 / (coefficient of bits), bootstrap 95% interval
  double cross_ratio = 0;     // X/C, the coefficient of S
  double cross_ratio_low = 0, cross_ratio_high = 0;
  double offset_s = 0;
  int trimmed = 0;            // trains left out as outliers
};
constexpr double kMinPaceRatio = 1.4;
// A fit whose X/C exceeds this describes no link (cross traffic that passes
// a link is at most its capacity): estimate_capacity_two_rates() then keeps
// the fast trains' slope and does not extrapolate.
constexpr double kMaxCrossRatio = 1.0;
RateFit fit_rate_dependence(const std::vector<TrainDispersion>& trains);

// The estimate from trains of two lengths, sent at one or two rates: the
// pooled two-length slope (estimate_capacity_slope over all trains of each
// length), unless fit_rate_dependence() finds the dispersion growing with the
// send span beyond noise; then its extrapolation, with the fit's own
// bootstrap interval (wider than the pooled slope's: extrapolating amplifies
// the noise, which is why it is used only when the rate dependence shows).
struct TwoRateEstimate {
  CapacityEstimate capacity;
  SlopeEstimate pooled;
  RateFit rate;
  bool rate_corrected = false;
  // Trains that met no cross traffic were seen (has_clean_cluster, or
  // fast_trains_met_none for both lengths after the fit saw cross traffic):
  // the fast slope at kCrossTrafficQuantile is reported, neither the pooled
  // quartile slope nor the extrapolation.
  bool clean_cluster = false;
  // The fit saw the dispersions grow with the send span (cross traffic on
  // the narrow link), or a group's clean cluster showed it, whether or not
  // the estimate changed: every per-train sample then carries the bias.
  bool cross_traffic_seen() const {
    return clean_cluster || (rate.possible && rate.cross_ratio_low > 0);
  }
};

// Cross traffic that queues between a train's packets lengthens its
// dispersion by whole cross-traffic packet times, and only some trains meet
// it: the dispersions of one length then split into a tight cluster of the
// trains that met none (CapProbe's observation, Kapoor et al. 2004: the pair
// that met no queue has the smallest delay) and the rest, well above it. The
// lower quartile stops finding that cluster when fewer than a quarter of the
// trains are clean (a 50 Mbit/s link at 40% constant-rate load: 4 of 19
// long trains, and the slope read 7% low). True when the lowest
// max(4, 10%) dispersions lie within a spread that is less than a third of
// their distance to the lower quartile (and that distance is above 5 us;
// continuous timing noise, whose lowest samples thin out, does so in about
// 1% of groups of 20: the unit tests count it).
bool has_clean_cluster(const std::vector<double>& dispersions_s);

// One length's fast trains met no cross traffic while its slow ones did:
// the fast trains' dispersions (10th to 90th percentile) spread less than a
// third of the slow trains' (at least 4 of each). Then the fast slope needs
// no extrapolation: the fit's linear model expects the fast trains to meet
// X x S of cross traffic on average, and extrapolates past the truth when
// they met none.
bool fast_trains_met_none(const std::vector<double>& fast_s, const std::vector<double>& slow_s);
TwoRateEstimate estimate_capacity_two_rates(const std::vector<TrainDispersion>& trains);

// Many trains agreeing closely: the most populous group of per-train rates
// within +-tol of its centre, when it holds at least max(min_count, share x
// all) of them (median and range of the group). Where the fit of the slope
// (or of the two rates) is wide, a dense group says more: on a shaped own
// interface the slope over trains that read 66 and 83 said 107 (+60%) where
// 18 of 39 agreed within 1.5% on 66.5 (the truth 66.9; random-path benchmark,
// path 18). The tally uses it only when no reply or load was lost: trains that
// each lost one load packet agree with each other too. A cross-traffic bias
// every train meets moves the group with it: this corrects noise, not bias.
struct DenseMode {
  bool found = false;
  double rate_bps = 0;
  double low_bps = 0, high_bps = 0;
  int count = 0;
};
DenseMode dense_mode(const std::vector<double>& rates_bps, double tol = 0.015, double share = 0.35,
                     int min_count = 4);

// Half the 95% interval's width relative to the estimate (1e9 without one).
double rel_half_width(const CapacityEstimate& e);

// True when the estimate's 95% interval is wider than +-`half_width` of it.
bool wider_than(const CapacityEstimate& e, double half_width);

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

namespace lw {

// Random loss on the way to the narrow link (a lossy wire, a bad port) takes
// load packets unseen: the target drops the rest silently, so nothing tells
// which train lost one. A train that lost k comes back k packet times short
// of a whole one, and the dispersions of one length sit on a ladder: the
// whole trains on top, the rest one or more rungs of `load_bits / C` below.
// The lower quartile the slope uses then picks a rung below the top, and two
// lengths that each met a different rung read the capacity by up to 1/N too
// high per rung (a 50 Mbit/s link with 3% loss before it: +9 to +17% in 5 of
// 30 lab runs, each with an interval that excluded the truth).
//
// Cross traffic of full-size packets makes a ladder too, but upwards from
// the trains that met none: a sharp edge at its foot and a tail above, where
// loss has its sharp edge on top and the tail below. A loss ladder is
// recognised when (a) its top, the highest cluster that holds a fifth of the
// trains, has nothing but timing noise above it (at most a tenth of the
// trains) and no rung below holds more than kLostRungCrowding times as many
// (binomial loss of N p <= 1.4 packets a train on average; Poisson cross
// traffic of any rate fails one or the other), and (b) every sample below it
// lies within `tol` of a rung's height, at most kMaxLostRungs rungs down (or
// a quarter of the train). Trains all on the top rung are a ladder with none
// lifted. At least 5 trains. The caller applies it only where replies were
// lost on the path (the loss is there to see), and to two lengths only when
// both are ladders (lifting one alone skews the slope); the rung's height
// comes from the top rung's own rate. Left unrecognised: cross traffic
// phase-locked to the trains that puts 40% of them one full packet later
// than the rest, on a path that loses replies too.
struct LostLoadLadder {
  bool found = false;  // a ladder (possibly with nothing below its top)
  double top_s = 0;   // the whole trains' dispersion
  double rung_s = 0;  // one load packet's time at the narrow link
  int lifted = 0;     // samples lifted onto the top rung
  int rungs = 0;      // load packets they lost, all told
  std::vector<double> dispersions_s;  // the input, lifted if found
};
constexpr int kMaxLostRungs = 3;
constexpr double kLostRungCrowding = 1.5;
constexpr double kLadderTopShare = 0.2;
LostLoadLadder lift_lost_load(const std::vector<double>& dispersions_s, double bits,
                              double load_bits, double tol = 0.2);

}  // namespace lw

namespace lw {

// The tops of two lengths' loss ladders (lift_lost_load) are whole trains
// only if some whole trains came back: where load is lost often (7% of a
// 26-packet train's load: one train in seven whole), a group's top can be a
// rung or two down, and the slope through the tops reads high. Whole tops
// give the slope's offset a = top_s - bits_s / C of the path's fixed delays
// (tens of microseconds in the lab); a long top m rungs down moves it by
// about +m rungs (bits_s / (bits_l - bits_s) of one), a short top m rungs
// down by about -2m. Where the offset through the tops lies more than half a
// rung from zero, the tops are raised by the fewest whole rungs (up to 3
// each) that bring it within kTopAlignTolerance of a rung of zero:
// an offset that large is read as missing whole trains, not the path's.
struct TopShift {
  int short_rungs = 0;
  int long_rungs = 0;
  double offset_s = 0;  // the offset through the tops after the shift
};
constexpr double kTopAlignTolerance = 0.3;
TopShift align_ladder_tops(double top_short_s, double bits_short, double top_long_s,
                           double bits_long, double rung_s);

}  // namespace lw
