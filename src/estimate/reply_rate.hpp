#pragma once
// How many replies per second we may ask of one host, and how to find out
// that a host limits its RST replies.
//
// FreeBSD and macOS cap the RSTs (and ICMP errors) they send per second
// (net.inet.icmp.icmplim: 200 and 250 by default); stricter settings and
// firewalls exist. A capped target thins out our marker replies towards the
// end of trains whatever the packet size, which looks like loss above the
// avail-bw and rejects capacity trains. The governor keeps the replies we ask
// of each host under a token bucket (default 100/s, below both defaults) and,
// when marker replies go missing, tells the caller to check: a few trains of
// bare SYNs (no load, so no congestion of ours) at the current reply rate.
// Lossy checks (>= 20% missing) halve the rate; two clean checks (at most one
// reply missing) after a lossy one mean the host limits its replies (the rate
// stays at the clean one); a clean first check means the losses came from our
// load (the rate stays); anything else (losses down to the floor, or some loss
// that does not go away) means loss on the path, not a limit (the rate is
// restored).
//
//   ReplyGovernor g(100);
//   Nanos t = g.ready_at(host, 3, now);         // wait until then, send, then
//   g.spend(host, 3, t);
//   if (g.record_train(asked, answered)) {      // a check is due
//     do { /* send check trains, count */ } while (g.on_check(asked, answered) ==
//                                                 ReplyGovernor::Step::kCheckAgain);
//   }
// Pure: the caller passes the times; no clocks, no sockets.
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "linkwidth/ip_addr.hpp"
#include "linkwidth/time.hpp"

namespace lw {

class ReplyGovernor {
 public:
  enum class Step {
    kCheckAgain,      // the check was lossy: rate halved, check again
    kLimited,         // lossy at a higher rate, clean at this one: the host limits replies
    kLoadLoss,        // the first check was clean: the losses were our load's
    kPathLoss,        // lossy down to the floor: loss on the path, rate restored
  };

  // Trains of bare markers per check and markers per check train.
  static constexpr int kCheckTrains = 8;
  static constexpr int kCheckMarkers = 3;

  explicit ReplyGovernor(double max_per_s, double floor_per_s = 5.0);

  double rate_per_s() const { return rate_; }
  double max_per_s() const { return max_; }

  // Earliest time >= now at which `asked` replies of `host` fit the bucket.
  Nanos ready_at(const IpAddr& host, int asked, Nanos now) const;
  // Takes `asked` tokens of `host`'s bucket at time t (after ready_at).
  void spend(const IpAddr& host, int asked, Nanos t);

  // After a measurement train: true when a check is due (lost marker replies
  // in at least 2 of the last 8 trains, at most one check round per 8 trains
  // and 4 rounds per run).
  bool record_train(int asked, int answered);

  // After one check round (kCheckTrains trains at rate_per_s()): the next step.
  Step on_check(int asked, int answered);

  // Bursts: a host that limits with a small token bucket (a firewall's
  // `limit ... burst 5`) loses the last replies of every train that asks for
  // more at once, at any rate. After a rate check found the rate fine, a
  // train that lost replies while asking for more than kCheckMarkers calls
  // for a burst check: burst_check_size() bare SYNs at once after an idle.
  int burst_check_size() const { return lossy_asked_ > kCheckMarkers ? lossy_asked_ : 0; }
  // One burst check: replies asked, answered, and the first SYN (in send
  // order) whose reply went missing (-1: none).
  struct BurstCheck {
    int asked = 0;
    int answered = 0;
    int first_lost = -1;
  };
  // After the burst checks: true if the host answers fewer at once than
  // known so far; max_burst() is then what it did (at least kCheckMarkers: a
  // train needs that many). A limit takes the last replies of a burst (all
  // of them, or all but the few its tokens refilled meanwhile), and as many
  // in each check; so every check must have lost its last reply alone, or
  // two or more and at least half of those from its first loss on. Random
  // loss scatters its losses. (One lost reply anywhere was enough at first:
  // with 3% random loss on the path, 18 SYNs lose one in 42% of checks, and
  // one run in three claimed a burst limit of 17. Two lost anywhere, or the
  // last, still took 12% of checks, and a fresh-clone CI run at 1a456c3
  // claimed a limit under 3% loss; now about 3%.)
  bool on_burst_check(const std::vector<BurstCheck>& checks);
  // Replies a train may ask of one host at once (kNoBurstLimit if unknown).
  int max_burst() const { return max_burst_; }
  static constexpr int kNoBurstLimit = 1 << 16;

  // The highest rate at which a check lost replies (0 if none): the host's
  // limit lies between rate_per_s() and this after kLimited.
  double lossy_rate_per_s() const { return lossy_rate_; }
  int check_rounds() const { return rounds_; }

  // A check is lossy when at least 3 replies and 20% of them are missing (a
  // limit at half our rate loses half; 10% random loss on the path rarely
  // reaches 20% of 24 replies).
  static bool lossy(int asked, int answered);
  // A check is clean when at most one reply is missing.
  static bool clean(int asked, int answered);

 private:
  struct Bucket {
    double tokens = 0;
    Nanos t = 0;
  };
  double level(const Bucket& b, Nanos t, double burst) const;

  double max_;
  double floor_;
  double rate_;
  double round_start_rate_ = 0;
  double lossy_rate_ = 0;
  bool round_lossy_ = false;
  bool confirming_ = false;  // a clean check followed a lossy one: check once more
  int rounds_ = 0;
  int lossy_asked_ = 0;       // most replies a lossy train of this round asked
  int max_burst_ = kNoBurstLimit;
  int since_round_ = 1 << 20;  // trains since the last check round
  std::deque<bool> recent_;    // lossy flags of the last trains
  std::deque<int> lossy_since_;  // replies asked by the last trains if they lost some, else 0
  std::map<IpAddr, Bucket> buckets_;
};

const char* step_name(ReplyGovernor::Step s);

}  // namespace lw
