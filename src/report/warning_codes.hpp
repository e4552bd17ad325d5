#pragma once
// The catalogue of warning codes: every warning a result document can carry,
// declared once (code, JSON name, meaning). Results hold Warning{code, message}
// built from a WarningCode; the README's "Warnings" table is checked against
// this list by tests/unit/test_warning_codes.cpp.
#include <string>
#include <vector>

namespace lw {

// X(enum name, JSON name, meaning)
#define LW_WARNING_CODES(X)                                                                       \
  X(kAvailbwNotRun, "availbw_not_run",                                                            \
    "the avail-bw search (and the hops phase) did not run: the RST load is dropped before the "   \
    "narrow link")                                                                                \
  X(kBottleneckAfterSilentHop, "bottleneck_after_silent_hop",                                     \
    "hops right before the bottleneck gave no usable replies: the narrow link may be any link "   \
    "into them")                                                                                  \
  X(kBurstyCrossTraffic, "bursty_cross_traffic",                                                 \
    "cross traffic came in bursts as long as the trains: the avail-bw is the mean crossing of "   \
    "the trains at C, its range that crossing's, not the fleets' bracket")                       \
  X(kCalibrationFailed, "calibration_failed",                                                     \
    "two rounds of low-rate calibration trains had too few usable markers: no avail-bw estimate") \
  X(kCalibrationDisturbed, "calibration_disturbed",                                               \
    "even the low-rate calibration trains came back spread out: the path may be saturated")       \
  X(kCalibrationRebased, "calibration_rebased",                                                   \
    "the search's low fleets contradicted the calibration's baseline: searched again from theirs") \
  X(kCapacityAtSendRate, "capacity_at_send_rate",                                                 \
    "the capacity is at or above what we could send: the replies may only show our own rate")     \
  X(kCapacityLowerBound, "capacity_lower_bound",                                                  \
    "the capacity is only a lower bound, so is the avail-bw search's upper end")                  \
  X(kCaptureDrops, "capture_drops", "the capture buffer dropped packets")                         \
  X(kCaptureIncomplete, "capture_incomplete",                                                     \
    "analyze: the capture ends before the run did; the result covers what it holds")              \
  X(kCaptureTruncated, "capture_truncated", "analyze: the capture file ends inside a packet")     \
  X(kCrossTrafficCorrected, "cross_traffic_corrected",                                            \
    "dispersions grew with the send span: capacity extrapolated over two offered rates")          \
  X(kDuplicateReplies, "duplicate_replies",                                                       \
    "replies arrived more than once; the first copy of each was used")                            \
  X(kFewReplies, "few_replies",                                                                   \
    "hops answered fewer trains than were sent (ICMP rate limit or loss)")                        \
  X(kHeavyLoss, "heavy_loss",                                                                     \
    "many trains lost marker replies: the path drops our packets; checked with SYN trains")       \
  X(kLoadCheckFailed, "load_check_failed",                                                        \
    "the full-size SYN trains that check the estimate lost their replies too, or, where the "     \
    "shaper probe's check or trains far faster than the rest put it in doubt, neither "           \
    "confirmed it nor read a rate to take instead: no estimate")                                  \
  X(kCrossTrafficGaps, "cross_traffic_gaps",                                                     \
    "the gaps between the replies to back-to-back full-size SYNs read higher than the trains "     \
    "(cross traffic lengthened every train) or as high and more precisely; they give the "        \
    "capacity (capacity_source reply_gaps)")                                                      \
  X(kGapsAboveTrains, "gaps_above_trains",                                                       \
    "the gaps between the replies to back-to-back full-size SYNs read a faster link than every "  \
    "train; a loaded link after the narrow one may have slowed the trains (or a class-sharing "   \
    "scheduler, htb classes that borrow or fair queueing, gave them their share), and the "       \
    "capacity's interval reaches up to the gaps' rate")                                           \
  X(kGapsLeastDelayed, "gaps_least_delayed",                                                     \
    "the gaps were refused as read after the narrow link, but their least-delayed spans and a "   \
    "group of kept trains agree on a rate above the trains' estimate: trains that met no cross "  \
    "traffic; the capacity is that group's")                                                      \
  X(kGapsAtLastHop, "gaps_at_last_hop",                                                           \
    "measure: the hops phase found the narrow link is the last one, into the target: no link "    \
    "after it squeezed the reply gaps, which give the capacity (capacity_source reply_gaps)")     \
  X(kGapsAtNarrowHop, "gaps_at_narrow_hop",                                                       \
    "measure: the hops phase found no link after the narrow one changed the trains, and the "     \
    "least-delayed spans agree with the reply gaps: nothing squeezed them, they give the "       \
    "capacity (capacity_source reply_gaps)")                                                      \
  X(kLeastDelayedAtHop, "least_delayed_at_hop",                                                 \
    "measure: the capacity read over a tenth above (or, the gaps squeezed, below) a hop's rate "  \
    "that CapProbe's least-delayed reply-gap spans agree with: a loaded link after that hop "     \
    "squeezed the trains and gaps (or slowed the trains); the least-delayed spans give the "     \
    "capacity (capacity_source reply_gaps)")                                                      \
  X(kCapacityFromOwnShaper, "capacity_from_own_shaper",                                         \
    "this host's own interface's root shaper (its rate at the IP layer) is the narrow link: the " \
    "capacity phase read above its rate, or (measure) trains our queue spread read below it for " \
    "this host's traffic while the reply gaps read it or more; that rate is the capacity "        \
    "(capacity_source own_shaper)")                                                               \
  X(kCapacityFromHop, "capacity_from_hop",                                                       \
    "measure: the capacity trains (or reply gaps) were slowed by a loaded link after the narrow "  \
    "one, or read faster than a hop they left (a loaded link after it compressed them); the "     \
    "hops phase's rate at the hop the narrow link ends at gives the capacity (capacity_source "   \
    "hop_dispersion) and the bottleneck hop")                                                     \
  X(kHopTrainPassed, "hop_train_passed",                                                         \
    "measure: the hops phase's trains slowed after a hop that read above the capacity, and one "   \
    "of them (too few to give the capacity) reached the target at that hop's rate: a loaded link " \
    "may have slowed the rest; the capacity's interval reaches that hop's rate")                 \
  X(kBottleneckAtCapacity, "bottleneck_at_capacity",                                             \
    "measure: the hop where most hop trains last slowed reads far from the capacity (a loaded "    \
    "link, the tight one, made that step); the bottleneck hop is the one whose rate is the "      \
    "capacity")                                                                                   \
  X(kBottleneckOwnLink, "bottleneck_own_link",                                                   \
    "measure: no hop trains named the narrow link, but the capacity trains were already spread "  \
    "to the capacity when they left this host (local_bottleneck): the bottleneck is hop 1")       \
  X(kLoadLossGaps, "load_loss_gaps",                                                             \
    "trains lost load unseen and read high; the gaps between the replies to back-to-back "        \
    "full-size SYNs, whose losses show, give the capacity (capacity_source reply_gaps)")          \
  X(kExtrapolationGaps, "extrapolation_gaps",                                                   \
    "the capacity trains' estimate, extrapolated over two offered rates, read above the gaps "     \
    "between the replies to back-to-back full-size SYNs, whose least-delayed spans agree with "   \
    "them; or it lay above every kept train's own reading, and the sharper gaps read what the "   \
    "fastest trains did; the gaps give the capacity (capacity_source reply_gaps)")                \
  X(kBurstGaps, "burst_gaps",                                                                     \
    "the capacity trains read up to 15% above the gaps between the replies to back-to-back "       \
    "full-size SYNs, which were much sharper and whose least-delayed spans agree with them: a "    \
    "shaper's burst on the narrow link lets the head of each train through unspread; the gaps "    \
    "give the capacity (capacity_source reply_gaps)")                                             \
  X(kLoadDropped, "load_dropped",                                                                 \
    "our RST load is dropped before the narrow link; the capacity is the SYN trains'")            \
  X(kLongTrainsDisturbed, "long_trains_disturbed",                                               \
    "every short train was far faster than the fit over both train lengths; bursts of cross "     \
    "traffic lengthened the long trains, and the estimate uses the short trains only")            \
  X(kShortTrainsDisturbed, "short_trains_disturbed",                                              \
    "long trains came back in under half the time short ones took, which lost load cannot do; "   \
    "bursts of cross traffic lengthened the short trains, and the estimate uses the long trains "  \
    "only")                                                                                        \
  X(kLoadLossSuspected, "load_loss_suspected",                                                    \
    "long trains looked much faster than short ones; the estimate uses the short trains only")    \
  X(kLoadLost, "load_lost",                                                                       \
    "most of the RST load was lost on the way (or, where the capacity phase halved its trains for " \
    "load lost unseen and one length was left, whole full-size SYN trains read under 0.9 of it); " \
    "the capacity is the SYN trains' (low confidence)")                                          \
  X(kLocalBottleneck, "local_bottleneck",                                                         \
    "the trains left this host already spread to the measured rate: the narrow link is local")    \
  X(kLocalShaping, "local_shaping",                                                               \
    "this host's own queue spread avail-bw trains out before they left: our interface may be "    \
    "the tight link")                                                                             \
  X(kLostLoadCorrected, "lost_load_corrected",                                                  \
    "replies were lost on the path and trains came back whole packets short (load lost unseen): " \
    "they were counted as whole trains")                                                          \
  X(kOwnQueueDrops, "own_queue_drops",                                                            \
    "a share of our packets never left this host: its own queue dropped them (full)")             \
  X(kOwnQueueBursts, "own_queue_bursts",                                                         \
    "bursts of this host's traffic in its own queue moved avail-bw trains about, at rates that "   \
    "link had room for: each was judged on the lower of its ratios as sent and as it left")       \
  X(kLowConfidence, "low_confidence",                                                             \
    "the bottleneck hop was the last choke point in fewer than half of the trains")               \
  X(kMarkerKindSwitched, "marker_kind_switched",                                                  \
    "a hop did not answer one kind of marker and was switched to the other")                      \
  X(kMaxRateLimited, "max_rate_limited",                                                          \
    "--max-rate held the trains below the path's rate: the result is a lower bound")              \
  X(kMiddleboxReply, "middlebox_reply",                                                           \
    "the replies come from a middlebox before the target, not from the target")                   \
  X(kNoBottleneck, "no_bottleneck", "no hop could be named as the narrow link")                   \
  X(kNoCapacity, "no_capacity", "no capacity estimate, so no upper end for the avail-bw search")  \
  X(kNoEstimate, "no_estimate", "no train gave a usable sample")                                  \
  X(kNoRoute, "no_route", "--dry-run: no route to the target")                                    \
  X(kNoisyPath, "noisy_path",                                                                     \
    "high timing noise and no time to calibrate with longer trains: a wide threshold")            \
  X(kOpenPortsSkipped, "open_ports_skipped",                                                      \
    "candidate ports answered SYN/ACK (open) and were skipped")                                   \
  X(kOwnTraffic, "own_traffic",                                                                   \
    "the narrow link is this host's own interface, or its root qdisc's rate is known: that "      \
    "link's avail-bw from its counters (C less the host's other traffic) is the estimate: below " \
    "the trains' reading, or (narrow link ours) within their range")                             \
  X(kPacketSizeClamped, "packet_size_clamped", "the packet size was lowered to the MTU")          \
  X(kPathChanged, "path_changed",                                                                 \
    "TTL-limited markers were answered by another router than in path discovery")                 \
  X(kPathMtu, "path_mtu", "a router reported a smaller path MTU; the packets shrank to it")       \
  X(kRateUnreachable, "rate_unreachable",                                                         \
    "linkwidth method: the fixed inter-pair gap is too long to offer the rate")                   \
  X(kRepeatedLoss, "repeated_loss",                                                               \
    "whole fleets lost marker replies several times in a row, even shortened: search stopped")    \
  X(kRepliesCompressed, "replies_compressed",                                                     \
    "replies came back closer together than sent, or search trains faster than 4 x the "         \
    "capacity: the return path compresses them (avail-bw: no estimate; hops: those hops unused)") \
  X(kRepliesLate, "replies_late",                                                                 \
    "replies came back after the wait for them (queues that fill under load); the waits grew")    \
  X(kRepliesMixed, "replies_mixed",                                                               \
    "the replies came from hosts at different distances (a middlebox answers some)")              \
  X(kRepliesStopped, "replies_stopped", "no hop answered 3 trains in a row")                      \
  X(kReplyBurstLimited, "reply_burst_limited",                                                    \
    "the target limits its replies in bursts; trains ask fewer replies at once")                  \
  X(kReplyLoss, "reply_loss",                                                                     \
    "replies went missing even without load: loss on the path or at the target")                  \
  X(kReplyRateLimited, "reply_rate_limited",                                                      \
    "the target limits its reply rate; probing slowed to a rate it answers fully")                \
  X(kResponseLoss, "response_loss",                                                               \
    "trains well above the avail-bw lost replies; the estimate rests on the search's bracket")    \
  X(kSearchCutShort, "search_cut_short",                                                          \
    "a cap ended the avail-bw search before its bracket narrowed to the resolution: the "         \
    "estimate is the bracket's middle, the range wide")                                           \
  X(kSearchResolutionWidened, "search_resolution_widened",                                       \
    "timing noise wider than --resolution: the fleet search stopped at the rate step its "        \
    "verdicts can tell apart")                                                                    \
  X(kSendStalls, "send_stalls",                                                                   \
    "trains left this host off their schedule (busy CPU) and were not used")                      \
  X(kSilentHops, "silent_hops", "hops never answered and are kept as unknown")                    \
  X(kSingleLengthEstimate, "single_length_estimate",                                              \
    "too few trains of one of the two lengths: the estimate includes the head/tail offset")       \
  X(kShaperNotEmptied, "shaper_not_emptied",                                                      \
    "trains disagreed as a token bucket makes them, but the caps did not allow emptying it")      \
  X(kPolicer, "policer",                                                                          \
    "a policer: full-size packets past a bucket were dropped, not delayed; the capacity is its "  \
    "rate, and no avail-bw is measured")                                                          \
  X(kShaperRefuted, "shaper_refuted",                                                              \
    "the shaper streams showed a level shift, but no refill pair saw a token bucket refill: no "  \
    "shaper; the capacity is the trains' and the avail-bw the search's")                          \
  X(kSlopeTooNoisy, "slope_too_noisy",                                                            \
    "the two-length slope was too wide; the rate most trains agree on within 1.5%, or the "       \
    "per-train estimate, is used")                                                                \
  X(kTighterLinkAfterOurs, "tighter_link_after_ours",                                             \
    "trains that left our own interface as sent, at rates its counters gave room for, reached "   \
    "the target spread: a link after ours is tighter, and our link's counters are not the "        \
    "estimate")                                                                                    \
  X(kTimestampsQuantised, "timestamps_quantised",                                                 \
    "reply times are quantised: the capacity is reported as a lower bound")                       \
  X(kTokenBucket, "token_bucket",                                                                 \
    "a token-bucket shaper: the capacity is its sustained rate, after a burst at the peak")       \
  X(kTrainsLengthened, "trains_lengthened",                                                       \
    "high timing noise: trains doubled in length and calibrated again")                           \
  X(kTrainsNotCompressed, "trains_not_compressed",                                                \
    "trains were not sent faster than the path and were not used")                                \
  X(kTrainsRejected, "trains_rejected", "trains were rejected, with the reasons counted")         \
  X(kTrainsShortened, "trains_shortened",                                                         \
    "trains lost marker replies, this host's own queue dropped their load, or long trains read "  \
    "far faster than short ones (a small queue on the path dropped their load); they were "       \
    "shortened (after the last, the avail-bw trains keep within what that queue held)")           \
  X(kUncompressedTrains, "uncompressed_trains",                                                   \
    "some trains came back at our own sending rate while others were compressed, or at half of "  \
    "it or faster while the others put the path under a tenth of it")

enum class WarningCode {
#define LW_X(e, name, meaning) e,
  LW_WARNING_CODES(LW_X)
#undef LW_X
};

struct WarningInfo {
  WarningCode code;
  const char* name;     // in the JSON documents
  const char* meaning;  // one line for the README's table
};

// Every code, in the order above.
const std::vector<WarningInfo>& warning_catalogue();
const char* warning_name(WarningCode code);

}  // namespace lw
