#pragma once
// Who answers, and did our load arrive? Pure checks over reply records (issue 6).
//
// 1. Replier distance. A reply's TTL gives the hops it travelled: the sender
//    set the smallest common initial TTL (32, 64, 128, 255) not below what we
//    received. A real host whose replies took h hops back is reached, on a
//    symmetric path, by a SYN sent with TTL h. A router-middlebox h hops away
//    that answers in the target's name only answers SYNs that pass its own
//    forwarding TTL check: the SYN with TTL h expires there (ICMP time exceeded
//    from that very router, which comes back over the same h hops), the SYN
//    with TTL h + 1 draws the RST. A forward path longer than the return path
//    (asymmetric routing) also makes the TTL-h SYN expire; then the router
//    that reports it is usually nearer on the way back than the target. Where
//    the evidence fits both, the verdict stays "forward_longer" or
//    "inconclusive", never "middlebox".
// 2. Mixed repliers: replies of one run that come back over different hop
//    counts or with a different IP ID behaviour (Linux sends RSTs with ID 0,
//    others count) came from more than one box, or the route changed.
// 3. Load dropped (LinkWidth §3.3 assumes the RST load reaches the narrow
//    link): trains whose replies come back at our own sending rate, while
//    full-size SYNs, which a stateful firewall lets pass, are spread much
//    more: the load was dropped before the narrow link.
#include <cstdint>
#include <string>
#include <vector>

#include "linkwidth/ip_addr.hpp"

namespace lw {

// The smallest of 32, 64, 128, 255 not below `ttl` (1..255); 0 for ttl 0.
int initial_ttl_guess(int ttl);
// The TTL a SYN needs to reach the sender of a reply received with `ttl` on a
// symmetric path: routers passed on the way back + 1. 0 for ttl 0.
int reply_hops(int ttl);

// What one TTL-limited SYN drew.
struct TtlAnswer {
  enum Kind { kNone, kTargetReply, kTimeExceeded, kOther } kind = kNone;
  IpAddr from;  // who answered (time exceeded: the router)
  int ttl = 0;             // TTL of the answer as received
};

enum class ReplierVerdict {
  kNotChecked,
  kConsistent,     // the SYN with TTL = reply hops drew the target's reply
  kMiddlebox,      // it expired at a router as far as the replies say; TTL + 1 drew the RST
  kForwardLonger,  // it expired, but at a router nearer on the way back: asymmetric route
  kInconclusive,   // silence, or neither SYN drew the target's reply
};
const char* replier_verdict_name(ReplierVerdict v);

struct ReplierCheck {
  ReplierVerdict verdict = ReplierVerdict::kNotChecked;
  int reply_ttl = 0;    // TTL of the target's reply to the discovery SYN
  int reply_hops = 0;   // reply_hops(reply_ttl)
  IpAddr box;  // kMiddlebox: the router whose hop answers in the target's name
  int box_hops = 0;       // hops back from the router that reported the TTL expiry
};

// `at_hops`: the SYN sent with TTL = reply_hops(reply_ttl); `beyond`: TTL + 1.
ReplierCheck classify_replier(int reply_ttl, const TtlAnswer& at_hops, const TtlAnswer& beyond);

// One reply of a run: its TTL and IP ID as received.
struct ReplyStamp {
  int ttl = 0;
  std::uint16_t ip_id = 0;
};

struct MixedReplies {
  bool mixed = false;
  int groups = 0;             // distinct (hops, ID zero or not) groups with enough replies
  std::vector<int> hops;      // the hop counts seen, most frequent first
  int minority = 0;           // replies outside the largest group
  int total = 0;
};

// Mixed when at least two groups of (reply hops, IP ID zero/nonzero) hold
// max(2, 5%) of the replies each: one stray reply (an ID that counted through
// zero) is not enough.
MixedReplies mixed_repliers(const std::vector<ReplyStamp>& replies);

// What we could have sent at most: the smallest known positive limit
// (measured send rate, --max-rate, interface speed); 0 if none is known.
double send_limit_bps(double measured_send_bps, double max_rate_bps, double interface_bps);

// The capacity (or lower bound) is implausible when it is at or above what we
// could send: the trains only show our own rate. `margin` absorbs timing noise.
bool capacity_at_send_rate(double capacity_bps, double send_limit_bps, double margin = 0.9);

struct LoadCheck {
  bool checked = false;
  bool dropped = false;
  double syn_capacity_bps = 0;  // median rate of the kept full-size SYN trains (0 = none)
  double ratio = 0;             // syn_capacity_bps / trains' capacity
  int used = 0;                 // SYN trains kept
  int uncompressed = 0;         // SYN trains the path did not compress either
};

// Judges the full-size SYN trains against the RST trains' estimate. Dropped
// when at least `min_used` SYN trains were compressed and their median rate is
// below `threshold` × the RST trains' capacity; uncompressed SYN trains (the
// path carried them at our rate too) speak against a drop.
LoadCheck judge_load(double rst_capacity_bps, const std::vector<double>& syn_kept_bps,
                     int syn_uncompressed, int min_used = 3, double threshold = 0.7);

// Trains at half our own sending rate or faster among others that put the
// estimate under a tenth of it (at least 5 trains, the fast ones at least 2
// and a quarter): only lost load, or replies bunched on the way back, makes
// a train that fast on so slow a path. `train_bps`: each measured train's
// rate (sizing trains left out). Under TCP that kept a 3 Mbit/s link full, 7
// of 23 trains read 0.8 to 1.6 Gbit/s and the rest 3 to 46 Mbit/s, with
// reply spans of 1 to 11 link-packet times whatever their length; the
// estimate, 7.87 Mbit/s, came out with exit 0.
bool fast_among_slow(const std::vector<double>& train_bps, double estimate_bps,
                     double send_limit_bps);
// Of `train_bps`, the trains at half `send_limit_bps` or faster (0 when it is unknown).
int fast_trains(const std::vector<double>& train_bps, double send_limit_bps);

// Before a shaper stream that the --max-load ledger does not count (up to
// 32 MB back to back, sized on the capacity trains' rate `rate_bps`):
// whether trains of full-size SYNs, every packet of which draws a reply,
// confirm that the path carries our full-size packets at about that rate.
// The capacity trains cannot: their markers are 40-byte SYNs, which a full
// byte-limited queue still takes while it drops the 1500-byte load between
// them, and such trains read our own sending rate, or any rate, on a
// saturated 3 Mbit/s link (733 Mbit/s once, and two streams of 15 MB
// followed). Confirmed when at least `min_whole` of the `sent` trains came
// back whole (every SYN answered) and the median of the whole ones reads at
// least `share` x rate_bps (an uncompressed train, carried at our own rate,
// counts as faster than any rate). Half: under TCP that kept the same link
// full, trains at 11.7 Mbit/s met whole SYN trains at 2.97, a quarter, and
// a capacity of 4 times the link's came out with exit 0.
struct RateConfirm {
  bool confirmed = false;
  int sent = 0;
  int whole = 0;       // trains with every SYN answered
  double syn_bps = 0;  // median rate of the whole trains the path compressed (0 = none)
};
RateConfirm confirm_rate(double rate_bps, const std::vector<double>& syn_kept_bps,
                         int syn_uncompressed, int sent, int min_whole = 2, double share = 0.5);

}  // namespace lw
