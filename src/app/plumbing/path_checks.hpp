#pragma once
// Checks that the numbers are of the path to the target (issue 6), sent
// through the session's Prober (same pacer, --max-rate, --max-bytes) and
// judged by the pure functions of estimate/middlebox.hpp:
//
// - check_replier: right after closed-port discovery, two SYNs with TTL h and
//   h + 1 (h = the hop count of the discovery reply). A real host h hops away
//   answers the first; a router-middlebox answering in its name does not.
// - check_capacity_plausible: after the capacity trains, flags an estimate at
//   or above what we could send and then sends a few full-size SYN trains: if
//   those say the path is much slower, the RST load was dropped on the way
//   (or, where the tally says load was lost unseen, lost at a full queue).
#include <atomic>
#include <vector>

#include "app/plumbing/config.hpp"
#include "estimate/middlebox.hpp"
#include "match/match.hpp"
#include "report/result.hpp"

namespace lw {

struct Session;

// Runs the TTL check (at most 2 rounds; the second only after silence at TTL
// h) and returns its result; adds a middlebox_reply warning to `warnings`.
ReplierInfo check_replier(Session& s, const Config& c, std::vector<Warning>& warnings);

// Records a check's verdict in `info`; a middlebox adds its warning.
void apply_replier_check(const ReplierCheck& chk, const IpAddr& target, ReplierInfo& info,
                         std::vector<Warning>& warnings);

// The TTL and IP ID of every RST/ACK that answered one of a train's markers.
// "1, 3, 4": hop numbers as warnings list them.
std::string hop_list(const std::vector<int>& hops);

void add_reply_stamps(const Train& t, const TrainOutcome& o, std::vector<ReplyStamp>& out);

// After the capacity phase: replies_mixed (TTL/IP ID changed within the run),
// capacity_at_send_rate, and the SYN-train verification with load_dropped.
// When the load was dropped, the result's capacity becomes the SYN trains'
// (capacity_source "syn_pairs").
void check_capacity_plausible(Session& s, const Config& c, const std::atomic<bool>& stop,
                              Nanos t_cap, const std::vector<ReplyStamp>& stamps,
                              CapacityResult& res);

// Before a shaper stream that the --max-load ledger does not count: up to 4
// trains of full-size SYNs (2 whole ones suffice) that check the path
// carries our full-size packets at about `rate_bps`, the rate the stream is
// sized on (estimate/middlebox.hpp, confirm_rate). They run in the capacity
// phase's ledger and leave its budget rate as it was.
RateConfirm confirm_stream_rate(Session& s, const Config& c, const std::atomic<bool>& stop,
                                Nanos t_cap, double rate_bps);
// Whether the capacity tally says its trains lost load unseen with nothing
// to check it by: it halved its trains (trains_shortened) or kept the short
// ones (load_loss_suspected), and then one length alone gave the estimate
// (single_length_estimate). A queue of a few packets that cross traffic
// keeps full (TCP on the lab's 5.2 Mbit/s tbf of 10.4 KB) drops the load of
// every train longer than what is left of it: the halving went on to 4 load
// packets and the estimate read +32%, +66% and +99% in 3 of 5 runs, while
// whole trains of full-size SYNs read 5.152 for 5.152. The load check runs
// then too.
bool load_lost_unseen(const std::vector<Warning>& warnings);

// The load check's verdict in that case: whole SYN trains (2 suffice) under
// 0.9 of the RST trains' estimate replace it (judge_load's 3 and 0.7
// otherwise: the SYN trains read 0.755 of the trains above, and half of
// them lost a SYN in that queue). Not load dropped by a firewall: the
// avail-bw search still runs.
LoadCheck judge_unseen_loss(double rst_capacity_bps, const std::vector<double>& syn_kept_bps,
                            int syn_uncompressed);

// Whether the capacity trains may read above the path for load they lost
// unseen (judge_gaps' trains_may_read_high): the tally kept the short
// trains (load_loss_suspected) or shortened its trains (trains_shortened:
// long ones read far faster than short ones, marker replies lost, or our
// own queue dropped their load). Lost load shortens a train's reply span,
// never lengthens it, so gaps below such trains that CapProbe's
// least-delayed spans agree with read the link (the random-path benchmark
// with seed 2039, path 5: our own 17.8 Mbit/s htb before a 5.3 Mbit/s tbf
// under TCP at 62%; 4-packet trains read 20.5 after the halving, gaps
// 5.260 [5.253, 5.266], least-delayed 5.260, the truth 5.26; refused as
// below the trains, the capacity read +235%).
bool trains_lost_load(const std::vector<Warning>& capacity_warnings);

// After the capacity phase (and the load check): trains of full-size SYNs,
// every packet drawing a reply, whose reply gaps give the capacity where cross
// traffic on the narrow link biased every train (estimate/capacity_gaps.hpp).
// Runs on every ordinary estimate (not a lower bound, a shaper's stream, the
// SYN-pair fallback, or quantised timestamps); replaces the estimate, with
// capacity_source "reply_gaps" and a cross_traffic_gaps warning, only when
// the gaps read above the trains (beyond their interval, or more precisely),
// below our own sending rate, the trains at least 0.6 of them, and CapProbe's
// least-delayed spans agree (README, "The reply-gap check"). Its record goes
// into res.gap_check.
void check_capacity_gaps(Session& s, const Config& c, const std::atomic<bool>& stop, Nanos t_cap,
                         CapacityResult& res);

}  // namespace lw
