#include "app/plumbing/path_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "app/plumbing/session.hpp"
#include "estimate/capacity.hpp"
#include "estimate/capacity_gaps.hpp"
#include "estimate/load_budget.hpp"
#include "estimate/stats.hpp"
#include "linkwidth/error.hpp"
#include "plan/hops_plan.hpp"
#include "plan/syn_train.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

constexpr int kSynMarkers = 5;       // per verification train: 4 gaps of full-size SYNs
constexpr int kMaxSynTrains = 8;
constexpr int kEnoughSynTrains = 5;  // kept trains after which we stop
constexpr int kEnoughUncompressed = 3;
// The stream check (confirm_stream_rate): trains at most, whole ones needed.
constexpr int kConfirmTrains = 4;
constexpr int kConfirmWhole = 2;
// Whole SYN trains under this share of the RST trains' estimate replace it
// when the tally says the RST trains lost load unseen (Suspicion::
// unseen_loss); judge_load's 0.7 otherwise. Two whole SYN trains suffice
// then (this check's usual 3 met half of them losing a SYN in the lab's 10.4
// KB queue kept full by TCP: 2 whole ones of 5 read 5.156 and 5.147 Mbit/s
// for 5.152, the RST trains 17.9 and 6.85).
constexpr double kUnseenLossRatio = 0.9;
constexpr int kUnseenLossMinTrains = 2;
// ... and after the shaper probe's stream check did not confirm the trains'
// rate (RateConfirm's share).
constexpr double kUnconfirmedRatio = 0.5;
// The reply-gap check: SYNs per train (15 gaps), trains at least and at most.
constexpr int kGapMarkers = 16;
constexpr int kMinGapMarkers = 8;
constexpr int kMinGapTrains = 4;
constexpr int kMaxGapTrains = 10;
// A router's ICMP bucket refills one token per second (Linux): wait that long
// before asking a silent hop again.
constexpr Nanos kIcmpRefill = 1050 * kMs;

TtlAnswer answer_of(const ProbeOutcome& o, const IpAddr& target) {
  TtlAnswer a;
  a.from = o.reply_from;
  a.ttl = o.reply_ttl;
  if (o.reply == 0) {
    a.kind = TtlAnswer::kNone;
  } else if (is_tcp_answer(o.kind) && o.reply_from == target) {
    a.kind = TtlAnswer::kTargetReply;
  } else if (o.kind == ReplyKind::kIcmp && o.icmp_kind == IcmpKind::kTimeExceeded) {
    a.kind = TtlAnswer::kTimeExceeded;
  } else {
    a.kind = TtlAnswer::kOther;
  }
  return a;
}

// The interface's link speed from sysfs (bit/s); 0 when it does not say.
double interface_bps(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long mbps = 0;
  if (!(f >> mbps) || mbps <= 0) return 0;
  return static_cast<double>(mbps) * 1e6;
}

}  // namespace

std::string hop_list(const std::vector<int>& hops) {
  std::string out;
  for (int h : hops) out += (out.empty() ? "" : ", ") + std::to_string(h);
  return out;
}

void apply_replier_check(const ReplierCheck& chk, const IpAddr& target, ReplierInfo& info,
                         std::vector<Warning>& warnings) {
  info.check = replier_verdict_name(chk.verdict);
  if (chk.verdict != ReplierVerdict::kMiddlebox) return;
  const std::string h = std::to_string(chk.reply_hops);
  info.box = format_ipv4(chk.box);
  warnings.push_back(
      {WarningCode::kMiddleboxReply,
       "the replies in the name of " + format_ipv4(target) +
           " probably come from a middlebox at hop " + h + " (" + info.box +
           " or a box right behind it), not from the target: they travelled " + h +
           " hop(s) back, but a SYN sent with TTL " + h + " expired at " + info.box + " (itself " +
           h + " hop(s) back) and only a SYN with TTL " + std::to_string(chk.reply_hops + 1) +
           " drew the RST/ACK; the capacity and avail-bw are then those of the path up to "
           "that box (a forward path one hop longer than the return path could look the "
           "same)"});
}

ReplierInfo check_replier(Session& s, const Config& c, std::vector<Warning>& warnings) {
  ReplierInfo info;
  info.reply_ttl = s.disc.reply_ttl;
  info.reply_hops = reply_hops(info.reply_ttl);
  if (info.reply_hops == 0) return info;
  const Nanos wait = reply_wait(s, c);
  const Nanos t_cap = s.t_begin + from_seconds(c.max_time_s);
  const Nanos spacing =
      c.max_rate_bps > 0
          ? std::max<Nanos>(kMs, min_gap_for_rate(c.max_rate_bps, bare_tcp_len(s.dst)))
          : kMs;
  ReplierCheck chk;
  for (int round = 0; round < 2 && !s.prober->stopped(); ++round) {
    if (round > 0) {
      // Only silence at TTL h is worth asking again: the router there may
      // have had no ICMP token left.
      const Nanos again = mono_now() + kIcmpRefill;
      if (again + wait > t_cap) break;
      while (mono_now() < again && !s.prober->stopped()) sleep_until(again);
      if (s.prober->stopped()) break;
    }
    // Two SYNs in the run's 5-tuple, TTL h and h + 1, spaced like discovery.
    const Train t = make_ttl_sweep(s.flow, {info.reply_hops, std::min(255, info.reply_hops + 1)},
                                   spacing, -300 - round, s.seqs);
    if (s.prober->bytes_sent() + t.total_bytes() > c.max_bytes) break;
    // Both may reach the target (or the box): they count against its budget.
    if (!wait_for_reply_budget(s, s.dst, 2, t_cap - wait)) break;
    const TrainRun run = s.prober->run(t, t.markers, wait);
    const ProbeOutcome& at_h = run.outcome.probes[static_cast<std::size_t>(t.markers[0])];
    const ProbeOutcome& at_h1 = run.outcome.probes[static_cast<std::size_t>(t.markers[1])];
    chk = classify_replier(info.reply_ttl, answer_of(at_h, s.dst), answer_of(at_h1, s.dst));
    if (at_h.reply != 0) break;
  }
  apply_replier_check(chk, s.dst, info, warnings);
  return info;
}

void add_reply_stamps(const Train& t, const TrainOutcome& o, std::vector<ReplyStamp>& out) {
  for (int m : t.markers) {
    const ProbeOutcome& p = o.probes[m];
    if (is_tcp_answer(p.kind)) out.push_back({p.reply_ttl, p.reply_ip_id});
  }
}

namespace {

// What the RST trains' estimate looks like after the trains (heavy_loss and
// mixed are read only when it is not at our own sending rate).
struct Suspicion {
  int measured = 0, lost = 0, uncompressed = 0;
  bool at_rate = false;     // the capacity is what we could send
  bool heavy_loss = false;  // many trains lost marker replies
  bool mixed = false;       // trains at our own rate among compressed ones
  // The tally halved its trains or kept the short ones for load lost unseen,
  // and then one length alone gave the estimate (single_length_estimate):
  // nothing compared the lengths after the last change.
  bool unseen_loss = false;
  // Full-size SYN trains did not confirm the rate a shaper stream was to be
  // sized on (capacity_run, confirm_stream_rate): no stream went, and the
  // trains' estimate is in doubt too.
  bool unconfirmed = false;
  // Trains at half our own sending rate or faster (kept or not) among slow
  // ones (estimate/middlebox.hpp, fast_among_slow; of the 7 such trains
  // there, 5 were "not compressed", under mixed's quarter).
  bool fast_among_slow = false;
  int fast = 0;
  // Doubt the SYN trains must lift: an unconfirmed stream check, or fast
  // trains among slow ones.
  bool doubt() const { return unconfirmed || fast_among_slow; }
  double send_limit_bps = 0;
  bool any() const { return at_rate || heavy_loss || mixed || unseen_loss || doubt(); }
};

void warn_mixed_repliers(const std::vector<ReplyStamp>& stamps, CapacityResult& res) {
  const MixedReplies mix = mixed_repliers(stamps);
  if (!mix.mixed) return;
  res.warnings.push_back(
      {WarningCode::kRepliesMixed,
       std::to_string(mix.minority) + " of " + std::to_string(mix.total) +
           " marker replies differ from the rest in hop count (" + hop_list(mix.hops) +
           " hops back) or IP ID behaviour: some probably come from a box on the path "
           "answering in the target's name, or the route changed during the run"});
}

// Heavy loss of marker replies: the path drops our packets (a full queue on a
// saturated link, loss on the way), and lost load packets shorten a train
// unseen, so the RST trains look faster than the path (a saturated 3 Mbit/s
// link with HTTP cross traffic gave 0.6 to 1.1 Gbit/s). Trains the path
// carried at our own sending rate among compressed ones: on a path slower
// than we send every train is compressed, unless our load is lost on the way
// (a byte-limited queue that is full still takes our 40-byte markers, not the
// 1500-byte load: a saturated 3 Mbit/s link gave a capacity of 526 Mbit/s
// this way).
Suspicion suspect(const Config& c, const CapacityResult& res) {
  Suspicion u;
  double sent = 0;  // the fastest train we managed to offer
  for (const auto& t : res.trains) sent = std::max(sent, t.offered_bps);
  u.send_limit_bps = send_limit_bps(sent, c.max_rate_bps, interface_bps(res.interface));
  std::vector<double> rates;
  for (const auto& t : res.trains) {
    if (t.verdict == kVerdictSizing || t.verdict == kVerdictPathMtu) continue;
    ++u.measured;
    rates.push_back(t.capacity_bps);
    u.lost += t.verdict == verdict_name(SampleVerdict::kLostReply) ? 1 : 0;
    u.uncompressed += t.verdict == verdict_name(SampleVerdict::kNotCompressed) ? 1 : 0;
  }
  u.heavy_loss = u.measured >= 5 && u.lost >= 0.3 * u.measured;
  u.mixed = u.measured >= 5 && u.uncompressed >= std::max(2.0, 0.25 * u.measured);
  u.at_rate = res.lower_bound || capacity_at_send_rate(res.capacity_bps, u.send_limit_bps);
  u.unseen_loss = load_lost_unseen(res.warnings);
  u.unconfirmed = res.shaper.verdict == "unconfirmed";
  u.fast = fast_trains(rates, u.send_limit_bps);
  u.fast_among_slow = fast_among_slow(rates, res.capacity_bps, u.send_limit_bps);
  return u;
}

void warn_suspicion(const Suspicion& u, CapacityResult& res) {
  if (u.at_rate) {
    res.warnings.push_back(
        {WarningCode::kCapacityAtSendRate,
         "the capacity " + format_rate(res.capacity_bps) + " is at or above what we could send (" +
             format_rate(u.send_limit_bps) +
             "): the replies only show our own sending rate; the path may be faster than we can "
             "send, or a firewall or NAT on the way drops our RST load"});
  } else if (!u.heavy_loss) {
    // (unseen_loss or an unconfirmed stream check alone: the tally's
    // warnings and the shaper_check say it)
    if (!u.mixed && !u.fast_among_slow) return;
    const bool slow_path = u.fast_among_slow && !u.mixed;
    res.warnings.push_back(
        {WarningCode::kUncompressedTrains,
         std::to_string(slow_path ? u.fast : u.uncompressed) + " of " + std::to_string(u.measured) +
             (slow_path ? " trains came back at half our own sending rate or faster while the "
                          "others put the path under a tenth of it: our load is lost on the "
                          "way (a full queue that takes the small markers), or the replies "
                          "bunch on the way back; checked with trains of full-size SYNs"
                        : " trains came back at our own sending rate while others were "
                          "compressed: the path is about as fast as we send, or our load is "
                          "lost on the way; checked with trains of full-size SYNs")});
  } else {
    res.warnings.push_back(
        {WarningCode::kHeavyLoss,
         std::to_string(u.lost) + " of " + std::to_string(u.measured) +
             " trains lost marker replies: the path drops our packets (a full "
             "queue, or loss on the way), and lost load packets make trains look "
             "faster than the path; checked with trains of full-size SYNs"});
  }
}

// Full-size SYN trains of `markers` packets on the session's flow, under
// --max-rate: the load check's and the reply-gap check's.
SynTrainParams syn_train_params(const Session& s, const Config& c, int markers) {
  SynTrainParams p;
  p.flow = s.flow;
  p.markers = markers;
  p.drain = c.drain_packets;
  p.packet_size = static_cast<std::uint16_t>(s.packet_size);
  p.max_rate_bps = c.max_rate_bps;
  return p;
}

// Waits until train `t` may go: after `next_start` (which it advances to the
// --max-load gate), within --max-bytes, and with its replies' wait inside the
// time cap. False when a cap or a stop says it may not.
bool wait_syn_turn(Session& s, const Config& c, const std::atomic<bool>& stop, const Train& t,
                   Nanos wait, Nanos t_cap, Nanos& next_start) {
  if (s.prober->bytes_sent() + t.total_bytes() > c.max_bytes) return false;
  // The idle and the --max-load gate on the bytes of the phases before.
  next_start = std::max(next_start, load_ready(s, c, t.total_bytes()));
  if (std::max(next_start, mono_now()) + wait > t_cap) return false;
  while (mono_now() < next_start && !stop.load()) sleep_until(next_start);
  return !stop.load() && mono_now() + wait <= t_cap;
}

// One full-size SYN train `t` of a check, after `next_start` (which it
// advances to the --max-load gate): false when a cap or a stop kept it from
// going. `rate_bps`: what the check's trains showed so far, which bounds the
// wait for their replies.
struct SynTrainTurn {
  bool sent = false;
  CapacitySample sample;
  Nanos start_mono = 0;
  std::uint64_t bytes = 0;
  // When the next train of the check may start: the queue drains, and this
  // one's bytes average under --max-load of `shown_bps`.
  Nanos idle_end(double shown_bps, double max_load) const {
    return start_mono +
           from_seconds(std::max(8.0 * static_cast<double>(bytes) / shown_bps / max_load, 0.002));
  }
};
SynTrainTurn syn_train_turn(Session& s, const Config& c, const std::atomic<bool>& stop,
                            const Train& t, Nanos wait, Nanos t_cap, Nanos& next_start,
                            double rate_bps) {
  SynTrainTurn out;
  if (!wait_syn_turn(s, c, stop, t, wait, t_cap, next_start)) return out;
  const double bits = 8.0 * static_cast<double>(t.total_bytes());
  const Nanos busy = std::min<Nanos>(from_seconds(1.5 * bits / rate_bps) + 2 * kMs, 50 * kMs);
  const TrainRun run = run_train(s, c, t, t.markers, wait, t_cap, false, busy).run;
  out.sent = true;
  out.sample = evaluate_capacity_train(timing_of(t, run.outcome), CapacityFilter{});
  out.start_mono = run.start_mono;
  out.bytes = t.total_bytes();
  return out;
}

// The verification: full-size SYN trains (every packet draws a reply),
// through the same prober and caps. Returns the kept trains' rates; counts
// in `lc`.
std::vector<double> run_syn_trains(Session& s, const Config& c, const std::atomic<bool>& stop,
                                   Nanos t_cap, LoadCheckRecord& lc) {
  const SynTrainParams p = syn_train_params(s, c, kSynMarkers);
  const Nanos wait = reply_wait(s, c);
  std::vector<double> kept;
  // The --max-load gate counts the check's own bytes from here: the RST
  // trains' bytes re-priced at the SYN trains' lower rate would keep the
  // check from ever running on the very path it is for (a firewall drops our
  // RST load, the trains read our own sending rate, C_b with them: 21 MB in
  // 1.9 s, 35 s of debt at 50 Mbit/s under --max-time 5, in the lab).
  begin_load_phase(s);
  Nanos next_start = mono_now();
  for (int i = 0; i < kMaxSynTrains && !stop.load(); ++i) {
    const Train t = make_syn_train(p, 1000 + i, s.seqs);
    const SynTrainTurn turn =
        syn_train_turn(s, c, stop, t, wait, t_cap, next_start, kept.empty() ? 1e6 : median(kept));
    if (!turn.sent) break;
    ++lc.trains_sent;
    const CapacitySample& smp = turn.sample;
    if (smp.kept()) kept.push_back(smp.capacity_bps);
    if (smp.verdict == SampleVerdict::kNotCompressed) ++lc.trains_uncompressed;
    if (c.verbose) {
      std::fprintf(stderr, "syn train %d: %s C=%.4g\n", i, verdict_name(smp.verdict),
                   smp.capacity_bps);
    }
    // Idle: under --max-load of the rate these trains show, and the queue
    // drains. A kept SYN train lost nothing (every packet draws a reply), so
    // its rate is not inflated by lost load as the RST trains' may be: it
    // lowers the session's budget rate; never above that rate either.
    double shown = kept.empty() ? std::max(smp.capacity_bps, kUnknownPathBps) : median(kept);
    if (s.load.capacity_bps > 0) {
      shown = std::min(shown, s.load.capacity_bps);
      if (!kept.empty()) s.load.capacity_bps = shown;
    }
    next_start = turn.idle_end(shown, c.max_load);
    if (static_cast<int>(kept.size()) >= kEnoughSynTrains ||
        lc.trains_uncompressed >= kEnoughUncompressed) {
      break;
    }
  }
  return kept;
}

// RST trains whose replies came back closer together than they left
// (estimate/capacity.hpp, closer_than_sent_in_many), and full-size SYN
// trains that lost no reply yet read far below the RST trains: no firewall
// dropping the RST load does that (the markers' replies keep at least the
// spacing they were sent with), nor a full queue on the way (it drops the
// SYNs too: most SYN trains lose replies): the way back compresses the
// replies, and the SYN trains' gaps read it as well (a 54-byte reply back
// to back on a busy 5 Mbit/s way back: 142 Mbit/s from the SYN trains for a
// 20 Mbit/s path, reported with load_dropped before this check, 2 of 4 lab
// runs on 2026-11-27). The capacity phase's own rule (capacity_run.cpp)
// stops most such runs earlier; this one catches what got past it. Throws
// Error "replies_compressed". `j`: the SYN trains' verdict (judge_load).
void refuse_compressed_replies(const CapacityResult& res, const LoadCheck& j,
                               const std::vector<double>& kept, const LoadCheckRecord& lc) {
  // (Most SYN trains whole: a byte-limited queue on the way back that is
  // full now and then drops a 54-byte reply too.)
  const int whole = static_cast<int>(kept.size()) + lc.trains_uncompressed;
  if (!j.dropped || 4 * whole < 3 * lc.trains_sent) return;
  std::vector<CapacitySample> rst;
  for (const auto& t : res.trains) {
    CapacitySample smp;
    smp.reply_dispersion_s = t.reply_dispersion_s;
    smp.send_dispersion_s = t.send_dispersion_s;
    smp.left_dispersion_s = t.left_dispersion_s;
    rst.push_back(smp);
  }
  const CloserCount n = count_closer_than_sent(rst, CapacityFilter{}.compressed_share, kCloserMinSpan);
  if (!closer_than_sent_in_many(n)) return;
  throw Error("capacity",
              "the replies of " + std::to_string(n.closer) + " of " + std::to_string(n.timed) +
                  " trains came back closer together than the trains left, and trains of "
                  "full-size SYNs lost no reply yet read " +
                  format_rate(j.syn_capacity_bps) +
                  ": the return path compresses the replies (a slow or busy link from the target "
                  "back to us), so no dispersion measures the forward path",
              "replies_compressed");
}

// What the SYN trains say about the RST trains' estimate.
void apply_load_check(const Suspicion& u, const LoadCheck& j, bool unseen,
                      const std::vector<double>& kept, CapacityResult& res) {
  LoadCheckRecord& lc = res.load_check;
  lc.trains_used = j.used;
  lc.syn_capacity_bps = j.syn_capacity_bps;
  lc.ratio = j.ratio;
  // (Load lost unseen at a full queue is not load dropped before the narrow
  // link: the avail-bw search's paced trains still meet that queue.)
  lc.dropped = j.dropped && !unseen;
  // In doubt (the stream check's SYN trains did not confirm the RST trains'
  // rate, or trains came back far faster than the rest), where these trains
  // neither confirm it nor show a rate to take instead (one whole train at 3
  // Mbit/s for trains at 527 on a saturated link): no estimate.
  const bool still_unconfirmed =
      u.doubt() && !j.dropped &&
      !confirm_rate(lc.rst_capacity_bps, kept, lc.trains_uncompressed, lc.trains_sent).confirmed;
  if (still_unconfirmed) {
    res.valid = false;
    res.warnings.push_back(
        {WarningCode::kLoadCheckFailed,
         std::string(u.unconfirmed ? "neither before the shaper stream nor after the trains did "
                                     "trains of full-size SYNs confirm"
                                   : "trains of full-size SYNs did not confirm") +
             " the trains' " + format_rate(lc.rst_capacity_bps) + " (" +
             std::to_string(lc.trains_used + lc.trains_uncompressed) + " of " +
             std::to_string(lc.trains_sent) + " came back whole" +
             (lc.trains_used > 0 ? ", reading " + format_rate(j.syn_capacity_bps) : "") +
             "): the path drops much of our full-size load (a saturated link with a full "
             "queue, or heavy loss), which the trains' small markers hide; the capacity is "
             "unknown"});
    return;
  }
  if (lc.trains_sent >= 3 && lc.trains_used == 0 && lc.trains_uncompressed == 0) {
    // Even the SYN trains lost their replies: the path drops much of what we
    // send (a full queue, heavy loss). No number from this run can be trusted.
    res.valid = false;
    res.warnings.push_back(
        {WarningCode::kLoadCheckFailed,
         "the " + std::to_string(lc.trains_sent) +
             " trains of full-size SYNs sent to check the estimate lost their replies too: the "
             "path drops much of what we send (a saturated link with a full queue, or heavy "
             "loss); the capacity is unknown"});
    return;
  }
  if (!j.dropped) return;
  // Reported, but labelled: a handful of short SYN trains, each a few packet
  // pairs, is a weaker measurement than the RST trains were meant to be; the
  // RST trains' number (our own sending rate) would be wrong outright.
  const CapacityEstimate e = aggregate_capacity(kept);
  res.capacity_bps = e.capacity_bps;
  res.low_bps = e.low_bps;
  res.high_bps = e.high_bps;
  res.kde_bandwidth_bps = e.kde_bandwidth_bps;
  res.lower_bound = false;
  res.capacity_source = "syn_pairs";
  // The lower-bound warnings spoke of the RST trains' number, now replaced.
  res.warnings.erase(std::remove_if(res.warnings.begin(), res.warnings.end(),
                                    [](const Warning& w) {
                                      return w.code == warning_name(WarningCode::kCapacityLowerBound) ||
                                             w.code == warning_name(WarningCode::kMaxRateLimited);
                                    }),
                     res.warnings.end());
  if (unseen || !u.at_rate) {
    const std::string why =
        unseen ? ", which lost load unseen even at one length (a short queue kept full by cross "
                 "traffic)"
               : ": most of our RST load was lost on the way";
    res.warnings.push_back({WarningCode::kLoadLost,
                            "trains of full-size SYNs " +
                                std::string(unseen ? "that lost no packet " : "") + "show about " +
                                format_rate(j.syn_capacity_bps) +
                                (unseen ? ", below" : ", far below") + " the RST trains' " +
                                format_rate(lc.rst_capacity_bps) + why +
                                "; the capacity reported is the SYN trains' (low confidence)"});
    return;
  }
  res.warnings.push_back(
      {WarningCode::kLoadDropped,
       "the replies came back at our own sending rate (" + format_rate(lc.rst_capacity_bps) +
           "), but trains of full-size SYNs show about " + format_rate(j.syn_capacity_bps) +
           ": a stateful firewall or NAT on the path probably drops the RST "
           "load; the capacity reported is the SYN trains' (low confidence)"});
}

}  // namespace

RateConfirm confirm_stream_rate(Session& s, const Config& c, const std::atomic<bool>& stop,
                                Nanos t_cap, double rate_bps) {
  const SynTrainParams p = syn_train_params(s, c, kSynMarkers);
  const Nanos wait = reply_wait(s, c);
  std::vector<double> kept;
  int uncompressed = 0, sent = 0;
  // (No new --max-load phase and no lower budget rate: on a path that
  // confirms, the capacity phase goes on as it was.)
  Nanos next_start = mono_now();
  for (int i = 0; i < kConfirmTrains && !stop.load(); ++i) {
    const Train t = make_syn_train(p, 1100 + i, s.seqs);
    const SynTrainTurn turn = syn_train_turn(s, c, stop, t, wait, t_cap, next_start, rate_bps);
    if (!turn.sent) break;
    ++sent;
    const CapacitySample& smp = turn.sample;
    if (smp.kept()) kept.push_back(smp.capacity_bps);
    if (smp.verdict == SampleVerdict::kNotCompressed) ++uncompressed;
    if (c.verbose) {
      std::fprintf(stderr, "stream check syn train %d: %s C=%.4g\n", i, verdict_name(smp.verdict),
                   smp.capacity_bps);
    }
    const int whole = static_cast<int>(kept.size()) + uncompressed;
    if (whole >= kConfirmWhole || sent - whole > kConfirmTrains - kConfirmWhole) break;
    // Idle as the load check's trains: under --max-load of the slower of
    // what they show and the rate being checked.
    next_start =
        turn.idle_end(kept.empty() ? rate_bps : std::min(rate_bps, median(kept)), c.max_load);
  }
  return confirm_rate(rate_bps, kept, uncompressed, sent, kConfirmWhole);
}

bool trains_lost_load(const std::vector<Warning>& capacity_warnings) {
  return warned_of(capacity_warnings, WarningCode::kLoadLossSuspected) ||
         warned_of(capacity_warnings, WarningCode::kTrainsShortened);
}

bool load_lost_unseen(const std::vector<Warning>& warnings) {
  return warned_of(warnings, WarningCode::kSingleLengthEstimate) && trains_lost_load(warnings);
}

LoadCheck judge_unseen_loss(double rst_capacity_bps, const std::vector<double>& syn_kept_bps,
                            int syn_uncompressed) {
  return judge_load(rst_capacity_bps, syn_kept_bps, syn_uncompressed, kUnseenLossMinTrains,
                    kUnseenLossRatio);
}

void check_capacity_plausible(Session& s, const Config& c, const std::atomic<bool>& stop,
                              Nanos t_cap, const std::vector<ReplyStamp>& stamps,
                              CapacityResult& res) {
  warn_mixed_repliers(stamps, res);
  if (!res.valid || stop.load()) return;
  const Suspicion u = suspect(c, res);
  // A token bucket (app/shaper_run) explains trains that passed in its burst
  // and lost their tails behind it; the stream measured the sustained rate.
  if (res.capacity_source == "shaper_stream") return;
  if (!u.any()) return;
  warn_suspicion(u, res);
  LoadCheckRecord& lc = res.load_check;
  lc.ran = true;
  lc.rst_capacity_bps = res.capacity_bps;
  lc.send_limit_bps = u.send_limit_bps;
  const std::vector<double> kept = run_syn_trains(s, c, stop, t_cap, lc);
  const LoadCheck j = judge_load(res.capacity_bps, kept, lc.trains_uncompressed);
  // Where the tally saw load lost unseen and the trains did not read our own
  // sending rate, SYN trains far below them say the same, not a firewall
  // dropping the RST load (with 20- and 40-packet trains at 17.9 Mbit/s in
  // that queue, the SYN trains' ratio of 0.29 made it load_dropped, and the
  // avail-bw search was skipped). A queue that drops our load drops SYNs
  // too, and whole SYN trains read it; replies closer than sent are not the
  // way back's doing then (a full byte-limited queue takes both 40-byte
  // markers of a train and drops its whole load: 74 us apart in the lab).
  // In doubt alone (doubt()): 2 whole SYN trains under half
  // the estimate (the check's own share) replace it.
  const LoadCheck strict = u.at_rate ? LoadCheck{}
                           : u.unseen_loss
                               ? judge_unseen_loss(res.capacity_bps, kept, lc.trains_uncompressed)
                           : u.doubt() ? judge_load(res.capacity_bps, kept, lc.trains_uncompressed,
                                                    kUnseenLossMinTrains, kUnconfirmedRatio)
                                       : LoadCheck{};
  if (!strict.dropped) refuse_compressed_replies(res, j, kept, lc);
  apply_load_check(u, strict.dropped ? strict : j, strict.dropped, kept, res);
}

namespace {

// The rate our own sending offered a train: its bits after the first packet
// over the span of its send times; 0 when a send time is missing.
double offered_rate(const TrainTiming& t) {
  if (t.sent.size() < 2 || t.sent.front() == 0 || t.sent.back() <= t.sent.front()) return 0;
  double bits = 0;
  for (std::size_t i = 1; i < t.bits.size(); ++i) bits += t.bits[i];
  return bits / to_seconds(t.sent.back() - t.sent.front());
}

bool has_warning(const CapacityResult& res, WarningCode code) {
  return warned_of(res.warnings, code);
}

// Gaps refused because a link after the narrow one squeezed them
// (trains_too_slow, squeezed_after_narrow: README, "Known problem: a loaded
// link after the narrow one"): the trains stand, but they read C_t·R/(R +
// X_t), below the narrow link, and the gaps read that later link's C_t,
// above it. The narrow link lies between them, so the interval reaches up to
// the gaps' upper end (the random-path benchmark at 3228f29: on the 5 paths
// with trains_too_slow, 11-43% low, the truth lay between the trains and the
// gaps on every one; the trains' interval held it on one).
void widen_to_gaps(const GapEstimate& g, const std::string& verdict,
                   const CapacityEstimate& trains, CapacityResult& res) {
  if (!gaps_bound_from_above(verdict, g, trains)) return;
  res.warnings.push_back(
      {WarningCode::kGapsAboveTrains,
       "the trains read " + format_rate(res.capacity_bps) + " (95% interval " +
           format_rate(res.low_bps) + " to " + format_rate(res.high_bps) +
           "); the gaps between replies to back-to-back full-size SYNs say " +
           format_rate(g.capacity.capacity_bps) +
           ", a faster link: a loaded link after the narrow one may have slowed every train "
           "(the gaps then read that link), or a scheduler that shares the narrow link between "
           "classes of traffic (htb classes that borrow, fair queueing) gave the trains their "
           "share and a pair the whole link, so the narrow link lies between them; the interval "
           "now reaches " + format_rate(g.capacity.high_bps)});
  res.high_bps = g.capacity.high_bps;
  res.gap_check["widened"] = true;
}

// Refused gaps whose least-delayed spans a group of kept trains agrees with,
// above the trains' estimate (estimate/capacity_gaps.hpp,
// least_delayed_group): the capacity is that group's; the interval keeps its
// upper end (the gaps') and reaches down to the group.
void take_least_delayed(const GapEstimate& g, const std::string& verdict,
                        const std::vector<double>& kept, CapacityResult& res) {
  if (!gaps_squeezed(verdict)) return;
  const DenseMode d = least_delayed_group(kept, g.min_delay_bps, res.capacity_bps);
  if (!d.found) return;
  res.warnings.push_back(
      {WarningCode::kGapsLeastDelayed,
       "the trains read " + format_rate(res.capacity_bps) + "; the gaps between replies " +
           format_rate(g.capacity.capacity_bps) + " were refused (" + verdict +
           "), but their least-delayed spans read " + format_rate(g.min_delay_bps) + " and " +
           std::to_string(d.count) + " of " + std::to_string(kept.size()) +
           " kept trains agree within 1% (" + format_rate(d.low_bps) + " to " +
           format_rate(d.high_bps) +
           "): those trains met no cross traffic, the others were slowed by it; the capacity is "
           "theirs"});
  res.capacity_bps = d.rate_bps;
  res.low_bps = std::min(res.low_bps, d.low_bps * (1 - kLeastDelayedTolerance));
  res.high_bps = std::max(res.high_bps, d.high_bps * (1 + kLeastDelayedTolerance));
  res.kde_bandwidth_bps = 0;
  res.gap_check["least_delayed_trains"] = d.count;
}

}  // namespace

void check_capacity_gaps(Session& s, const Config& c, const std::atomic<bool>& stop, Nanos t_cap,
                         CapacityResult& res) {
  if (!res.valid || res.lower_bound || res.capacity_source != "rst_trains" || stop.load() ||
      has_warning(res, WarningCode::kTimestampsQuantised)) {
    return;
  }
  if (s.flow.marker == TargetMarker::kOpenSyn) {
    // Every SYN to a listening port is a half-open connection until our
    // closer resets it: 16 at once could fill a small SYN queue (SYN
    // cookies, overflows) where the load check's 5 do not.
    res.gap_check = {{"trains_sent", 0}, {"verdict", "open_port"}, {"adopted", false}};
    return;
  }
  // No train asks a host for more replies at once than a fifth of a
  // second's budget (--max-replies; 20 at the default 100/s), nor more than
  // a burst limit the host was found to have: a firewall's `limit ... burst
  // 5` drops the rest (lab test_reply_limit, --max-replies 20). Fewer than
  // 8 SYNs a train (7 gaps) are not worth the replies: no check.
  const int drain = std::max(0, c.drain_packets);
  const int burst = std::min<int>(static_cast<int>(std::floor(s.replies.rate_per_s() / 5)),
                                  s.replies.max_burst());
  const int markers = std::min(kGapMarkers, burst - drain);
  if (markers < kMinGapMarkers) {
    res.gap_check = {{"trains_sent", 0}, {"verdict", "reply_budget"}, {"adopted", false}};
    return;
  }
  const SynTrainParams p = syn_train_params(s, c, markers);
  const Nanos wait = reply_wait(s, c);
  std::vector<TrainTiming> timings;
  std::vector<double> offered;
  GapEstimate g;
  int sent = 0;
  begin_load_phase(s);
  Nanos next_start = mono_now();
  const double rate = res.capacity_bps;
  for (int i = 0; i < kMaxGapTrains && !stop.load(); ++i) {
    const Train t = make_syn_train(p, 2000 + i, s.seqs);
    if (!wait_syn_turn(s, c, stop, t, wait, t_cap, next_start)) break;
    const double bits = 8.0 * static_cast<double>(t.total_bytes());
    const Nanos busy = std::min<Nanos>(from_seconds(1.5 * bits / rate) + 2 * kMs, 50 * kMs);
    const TrainRun run = run_train(s, c, t, t.markers, wait, t_cap, false, busy).run;
    ++sent;
    timings.push_back(timing_of(t, run.outcome));
    if (const double o = offered_rate(timings.back()); o > 0) offered.push_back(o);
    // Under --max-load of the trains' estimate, as every phase.
    next_start = run.start_mono + from_seconds(std::max(bits / rate / c.max_load, 0.002));
    if (static_cast<int>(timings.size()) < kMinGapTrains) continue;
    // No gap is shorter than our own sending made it.
    g = estimate_capacity_from_gaps(timings, 4, 20, offered.empty() ? 0 : median(offered));
    if (c.verbose && g.capacity.valid) {
      std::fprintf(stderr, "gap trains %zu: span %d C=%.4g [%.4g, %.4g]\n", timings.size(),
                   g.span, g.capacity.capacity_bps, g.capacity.low_bps, g.capacity.high_bps);
    }
    // Stop once the gaps agree with the trains, or are precise.
    if (g.capacity.valid &&
        ((g.capacity.low_bps <= res.high_bps && g.capacity.high_bps >= res.low_bps) ||
         (g.capacity.high_bps - g.capacity.low_bps) <= 0.02 * g.capacity.capacity_bps)) {
      break;
    }
  }
  if (!timings.empty() && static_cast<int>(timings.size()) < kMinGapTrains) {
    // The phase's time ran out first (slow paths: a train every 0.3 s at 5
    // Mbit/s under --max-load; the random-path benchmark's 6-8 Mbit/s paths
    // sent 2-3 and reported no estimate). The estimator's own minimum of
    // samples decides whether they are enough.
    g = estimate_capacity_from_gaps(timings, 4, 20, offered.empty() ? 0 : median(offered));
  }
  const double send_bps = offered.empty() ? 0 : median(offered);
  // Whether they replace the trains' estimate: estimate/capacity_gaps.hpp,
  // judge_gaps (the bounds and the lab cases they came from: README, "The
  // reply-gap check").
  CapacityEstimate trains;
  trains.valid = true;
  trains.capacity_bps = res.capacity_bps;
  trains.low_bps = res.low_bps;
  trains.high_bps = res.high_bps;
  // Trains that may read high: load lost unseen, or the two-rate fit's
  // extrapolation, which overshoots where the model is off (benchmark path 8
  // at dce3dca: 50.10 [49.82, 50.47] for 47.32; gaps 47.36, least-delayed
  // 47.28).
  const bool load_loss = trains_lost_load(res.warnings);
  const bool extrapolated = has_warning(res, WarningCode::kCrossTrafficCorrected);
  // The fastest kept train's own reading (a lone one far above the rest
  // left out: fastest_train_bps): an estimate over it by more than a fixed
  // offset explains was extrapolated (judge_gaps).
  std::vector<double> kept;
  for (const TrainRecord& t : res.trains) {
    if (t.verdict == "kept") kept.push_back(t.capacity_bps);
  }
  const double max_train = fastest_train_bps(kept);
  const std::string verdict =
      judge_gaps(g, trains, send_bps, load_loss || extrapolated, max_train);
  const bool adopt = gaps_adopted(verdict);
  res.gap_check = {{"trains_sent", sent},
                   {"trains_used", g.trains},
                   {"span", g.span},
                   {"reordered", g.reordered},
                   {"capacity_bps", nullable(g.capacity.valid, g.capacity.capacity_bps)},
                   {"low_bps", nullable(g.capacity.valid, g.capacity.low_bps)},
                   {"high_bps", nullable(g.capacity.valid, g.capacity.high_bps)},
                   {"min_delay_bps", nullable(g.min_delay_bps > 0, g.min_delay_bps)},
                   {"offered_bps", send_bps},
                   {"trains_capacity_bps", res.capacity_bps},
                   {"verdict", verdict},
                   {"adopted", adopt}};
  if (!adopt) {
    widen_to_gaps(g, verdict, trains, res);
    take_least_delayed(g, verdict, kept, res);
    return;
  }
  if (verdict == "adopted_unsupported") {
    res.warnings.push_back(
        {WarningCode::kExtrapolationGaps,
         "the trains read " + format_rate(res.capacity_bps) + " (95% interval " +
             format_rate(res.low_bps) + " to " + format_rate(res.high_bps) +
             "), above every kept train's own reading (the fastest " + format_rate(max_train) +
             "): the fit extrapolated where no train went; the gaps between replies to "
             "back-to-back full-size SYNs say " +
             format_rate(g.capacity.capacity_bps) + " (95% interval " +
             format_rate(g.capacity.low_bps) + " to " + format_rate(g.capacity.high_bps) +
             "), as the fastest trains did, reported"});
  } else if (verdict == "adopted_burst") {
    // No sign of reading high but the gaps themselves (judge_gaps: sharper,
    // the trains at most kGapBelowReach above): a shaper's burst.
    res.warnings.push_back(
        {WarningCode::kBurstGaps,
         "the trains read " + format_rate(res.capacity_bps) + " (95% interval " +
             format_rate(res.low_bps) + " to " + format_rate(res.high_bps) +
             "); the gaps between replies to back-to-back full-size SYNs say " +
             format_rate(g.capacity.capacity_bps) + " (95% interval " +
             format_rate(g.capacity.low_bps) + " to " + format_rate(g.capacity.high_bps) +
             ", their least-delayed spans " + format_rate(g.min_delay_bps) +
             "): a shaper's burst on the narrow link let the head of each train through "
             "unspread; reported"});
  } else if (verdict == "adopted_below") {
    res.warnings.push_back(
        {load_loss ? WarningCode::kLoadLossGaps : WarningCode::kExtrapolationGaps,
         "the trains read " + format_rate(res.capacity_bps) + " (95% interval " +
             format_rate(res.low_bps) + " to " + format_rate(res.high_bps) + ") " +
             (load_loss      ? std::string("with load lost unseen")
              : extrapolated ? std::string("extrapolated over two offered rates")
                             : "above every kept train's own reading (the fastest " +
                                   format_rate(max_train) + ")") +
             "; the gaps between replies to back-to-back full-size SYNs say " +
             format_rate(g.capacity.capacity_bps) + " (their least-delayed spans " +
             format_rate(g.min_delay_bps) + "), reported"});
  } else {
    // Ways to be adopted (judge_gaps): the gaps' interval lies wholly above
    // the trains' (every train read low: cross traffic lengthened them), or
    // the gaps read higher within it, more precisely (on a quiet path too)
    // or confirmed by the least-delayed spans however wide their interval
    // (benchmark path 15 at a802fe9: 35.41 [34.81, 228.07] over trains of
    // 30.89 [28.73, 47.13], spans 34.83); the message says which.
    const bool wholly_above = g.capacity.low_bps > res.high_bps;
    const bool sharper = rel_half_width(g.capacity) < rel_half_width(trains);
    const std::string why =
        wholly_above ? "), reported"
        : sharper    ? ", more precise), reported"
                     : "; their least-delayed spans, " + format_rate(g.min_delay_bps) +
                        ", agree), reported";
    res.warnings.push_back(
        {WarningCode::kCrossTrafficGaps,
         "the trains read " + format_rate(res.capacity_bps) + " (95% interval " +
             format_rate(res.low_bps) + " to " + format_rate(res.high_bps) + "); " +
             (wholly_above ? std::string("every train read low (cross traffic on the narrow link "
                                         "lengthens a train); ")
                           : std::string("within that interval, ")) +
             "the gaps between replies to back-to-back full-size SYNs say " +
             format_rate(g.capacity.capacity_bps) + " (95% interval " +
             format_rate(g.capacity.low_bps) + " to " + format_rate(g.capacity.high_bps) +
             why});
  }
  res.capacity_bps = g.capacity.capacity_bps;
  res.low_bps = g.capacity.low_bps;
  res.high_bps = g.capacity.high_bps;
  res.kde_bandwidth_bps = 0;
  res.capacity_source = "reply_gaps";
}

}  // namespace lw
