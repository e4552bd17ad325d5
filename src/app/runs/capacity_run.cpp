#include "app/runs/capacity_run.hpp"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <map>

#include "app/runs/capacity_tally.hpp"
#include "app/plumbing/own_qdisc.hpp"
#include "app/plumbing/path_checks.hpp"
#include "app/plumbing/run_notes.hpp"
#include "app/plumbing/runner.hpp"
#include "app/plumbing/session.hpp"
#include "app/runs/shaper_run.hpp"
#include "estimate/shaper.hpp"
#include "estimate/capacity.hpp"
#include "estimate/load_budget.hpp"
#include "estimate/own_qdisc.hpp"
#include "estimate/stats.hpp"
#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

// Trains whose replies came back closer together than they left, over a
// span of at least kCloserMinSpan (estimate/capacity.hpp), that end the
// phase when they are most of the trains (CapacityLoop::run).
constexpr int kCloserTrains = 4;

// Kept trains of each length before a run that lifted trains for lost load
// may stop on precision (CapacityLoop::precise_enough).
constexpr std::size_t kLadderTrains = 8;
// A train whose markers left our interface, and whose replies came back, in
// under this share of the time it took to send: our own queue held its head
// back (CapacityLoop::size).
constexpr double kHeldBack = 0.5;

// The rate a sample says the path carried, for sizing and budgeting the
// trains and for the shaper's hints: none from replies that came back closer
// together than the train left (they read the way back, not the path: a
// 16-packet train through 20 Mbit/s read 2.2 Gbit/s, sized the next trains
// to 550 packets and set their idle by it, 95% of the link in the unit
// test), and never more than we offered (an uncompressed train shows only
// our own sending).
double carried_rate(const CapacitySample& s) {
  if (s.capacity_bps <= 0 ||
      replies_closer_than_sent(s, CapacityFilter{}.compressed_share, kCloserMinSpan)) {
    return 0;
  }
  // Our own queue dropped all the load but a packet: the markers' spacing is
  // the time the tail waited there behind this host's traffic, not any
  // link's rate (seed 2036's path 32, run again: a 16-packet train kept only
  // its markers, read 150 kbit/s for a 5.9 Mbit/s link, sized and budgeted
  // the phase by it, and the time cap ended it with no estimate).
  if (s.lost_load > 0 && s.load_left < 2) return 0;
  return s.offered_bps > 0 ? std::min(s.capacity_bps, s.offered_bps) : s.capacity_bps;
}

// IP bytes of the longest train sent.
double largest_train_bytes(const CapacityResult& res, int packet_size) {
  double largest = 0;
  for (const auto& t : res.trains) largest = std::max(largest, 1.0 * t.load_packets);
  return largest * packet_size;
}

// The longest short train: the long one (ratio × N) stays within max_load_packets
// (validate() keeps that at least the ratio, so N >= 1 fits).
int max_short_packets(const Config& c) {
  return std::max(1,
                  static_cast<int>(std::floor(c.max_load_packets / std::max(1.0, c.length_ratio))));
}

int sized_load_packets(const Config& c, double capacity_bps, int packet_size) {
  const double n = std::ceil(c.target_dispersion_s * capacity_bps / (8.0 * packet_size));
  return load_packets_within(n, kMinLoadPackets, max_short_packets(c));
}


}  // namespace

CapacityTrainParams train_params(const Config& c, const FlowId& flow, int n, int packet_size) {
  CapacityTrainParams p;
  p.flow = flow;
  p.load_packets = n;
  p.packet_size = static_cast<std::uint16_t>(packet_size);
  p.drain_packets = c.drain_packets;
  p.markers = c.markers;
  // Back to back (line rate) is what a capacity train wants; under --max-rate
  // every packet waits for the previous one's bits at that rate instead. A path
  // faster than the cap then leaves the trains uncompressed: a lower bound.
  apply_rate_cap(p, c.max_rate_bps);
  return p;
}

nlohmann::json capacity_checks_note(const std::vector<Warning>& before,
                                    const CapacityResult& res) {
  nlohmann::json removed = nlohmann::json::array();
  std::size_t kept = 0;
  for (const Warning& w : before) {
    const bool still = std::any_of(res.warnings.begin(), res.warnings.end(), [&](const Warning& x) {
      return x.code == w.code && x.message == w.message;
    });
    if (still) {
      ++kept;
    } else {
      removed.push_back(w.code);
    }
  }
  const std::vector<Warning> added(res.warnings.begin() + static_cast<std::ptrdiff_t>(kept),
                                   res.warnings.end());
  nlohmann::json j = {{"removed", removed},
                      {"added", warnings_json(added)},
                      {"valid", res.valid},
                      {"load_check", load_check_json(res.load_check)},
                      {"gap_check", res.gap_check},
                      {"shaper", shaper_json(res.shaper)},
                      {"shaper_check", shaper_check_json(res.shaper)}};
  // The trains' estimate a bucket's sustained rate replaced: a refill that
  // refutes the bucket restores it (shaper_run.hpp, unapply_shaper).
  if (!res.before_shaper.is_null()) j["before_shaper"] = res.before_shaper;
  if (!res.policer.is_null()) j["policer"] = res.policer;
  // Written when the checks replaced the estimate or widened its interval.
  const bool widened = res.gap_check.is_object() && res.gap_check.value("widened", false);
  if (res.capacity_source != "rst_trains" || widened) {
    j["capacity"] = {{"source", res.capacity_source},   {"capacity_bps", res.capacity_bps},
                     {"low_bps", res.low_bps},          {"high_bps", res.high_bps},
                     {"kde_bandwidth_bps", res.kde_bandwidth_bps}, {"lower_bound", res.lower_bound}};
  }
  return j;
}

void apply_capacity_checks(CapacityResult& res, const nlohmann::json& j) {
  // The oldest records (tests/data/clean_10m and the captures of its day)
  // hold only "added" and "removed"; "valid" and "load_check" came with the
  // load check, "shaper"/"shaper_check" with the shaper probe. Absent, the
  // checks did not change them.
  if (j.contains("valid")) res.valid = j.at("valid").get<bool>();
  for (const auto& code : j.at("removed")) {
    const std::string k = code.get<std::string>();
    res.warnings.erase(std::remove_if(res.warnings.begin(), res.warnings.end(),
                                      [&](const Warning& w) { return w.code == k; }),
                       res.warnings.end());
  }
  for (const Warning& w : warnings_from_json(j.at("added"))) res.warnings.push_back(w);
  if (j.contains("load_check")) res.load_check = load_check_from_json(j.at("load_check"));
  if (j.contains("gap_check")) res.gap_check = j.at("gap_check");
  if (j.contains("shaper_check")) {
    res.shaper = shaper_from_json(j.at("shaper"), j.at("shaper_check"));
  }
  if (j.contains("before_shaper")) res.before_shaper = j.at("before_shaper");
  if (j.contains("policer")) res.policer = j.at("policer");
  if (j.contains("capacity")) {  // written only when the checks replaced or widened the estimate
    const auto& k = j.at("capacity");
    res.capacity_source = k.at("source").get<std::string>();
    res.capacity_bps = k.at("capacity_bps").get<double>();
    res.low_bps = k.at("low_bps").get<double>();
    res.high_bps = k.at("high_bps").get<double>();
    res.kde_bandwidth_bps = k.at("kde_bandwidth_bps").get<double>();
    res.lower_bound = k.at("lower_bound").get<bool>();
  }
}

CapacityResult run_capacity(const Config& c, const std::atomic<bool>& stop) {
  auto session = open_session(c, stop);
  return run_capacity_phase(*session, c, stop, session->t_begin + from_seconds(c.max_time_s));
}

CapacityResult run_capacity_phase(Session& ss, const Config& c, const std::atomic<bool>& stop,
                                  Nanos t_cap) {
  const Nanos t_begin = ss.t_begin;
  CapacityResult res;
  res.params = params_json(c);
  describe_endpoints(ss, c, res);
  res.warnings = ss.warnings;
  res.params["packet_size"] = ss.packet_size;
  Prober& prober = *ss.prober;
  res.params["privileges"] = prober.privileges().to_json();
  // With --save-pcap: what `linkwidth analyze` needs beside the packets.
  prober.note(phase_note_json(
      CapacityRunNote{c.command, run_head(res), c.length_ratio > 1, c.precision, c.max_rate_bps}));

  // The trains stop a fifth of the phase's time early: the checks after them
  // (the load check's and the reply-gap check's SYN trains) need it. On slow
  // paths the trains ran to the cap and left them none (random-path benchmark
  // at fae46df: three 5-10 Mbit/s paths under `measure --max-time 20` sent
  // no gap train and kept trains 19-31% low).
  const Nanos t_now = mono_now();
  const Nanos t_trains = t_cap > t_now ? t_now + (t_cap - t_now) * 4 / 5 : t_cap;
  LiveRunner runner(ss, c, "capacity", t_trains);
  PhasePath path{ss.flow, ss.packet_size, ss.disc.rtt_s, ss.seqs};
  // The shaper probe (app/shaper_run) is live only: its streams are not
  // replayed; what it found goes into the end note, and analyze hands the
  // loop the same finding at the same train.
  // Its streams have their own caps (bytes, rate, time: app/shaper_run.cpp)
  // and, but for the routine check's (in_ledger), are left out of the
  // --max-load ledger, bytes and time: they do not
  // make later trains wait, nor give them credit (estimate/load_budget.hpp).
  // The policer probe (shaper_run.hpp): right after shaper streams that
  // lost-reply trains called for and that passed whole at our own rate (a
  // policer drops the trains' full-size load, not the streams' small
  // markers; no queue met streams that large, so neither will its stream),
  // else after the checks below when every train came back at our own rate.
  PolicerProbe policer;
  auto probe = [&](const ShaperHints& h, bool in_ledger = false) {
    if (c.verbose) {
      std::fprintf(stderr,
                   "shaper probe: %s (fast trains %.0f bytes, largest %.0f, over %.2f s; slow "
                   "%.4g; bucket hint %.0f)\n",
                   h.trigger.c_str(), h.fast_bytes, h.largest_fast_bytes, h.fast_span_s, h.slow_bps,
                   bucket_hint_bytes(h.fast_bytes, h.largest_fast_bytes, h.fast_span_s, h.slow_bps));
    }
    // Streams the ledger does not count go only where full-size SYN trains
    // confirm the rate they are sized on (the estimate, or the sustained
    // rate the trains suggest): on a saturated 3 Mbit/s link (HTTP, TCP)
    // trains whose load a full byte-limited queue dropped around their
    // 40-byte markers read 14 to 733 Mbit/s, and streams of 0.5 to 15 MB
    // each went at our own rate. The check's trains count in the ledger.
    RateConfirm confirm;
    if (!in_ledger) {
      const double rate = h.trigger == "capacity_lower_bound" && res.capacity_bps > 0
                              ? res.capacity_bps
                              : std::max(h.slow_bps, kUnknownPathBps);
      confirm = confirm_stream_rate(ss, c, stop, t_cap, rate);
      if (c.verbose) {
        std::fprintf(stderr, "shaper probe: %s at %.4g by %d of %d SYN trains (%.4g)\n",
                     confirm.confirmed ? "confirmed" : "not confirmed", rate, confirm.whole,
                     confirm.sent, confirm.syn_bps);
      }
    }
    const auto with_check = [&](ShaperRecord rec) {
      rec.syn_trains = confirm.sent;
      rec.syn_whole = confirm.whole;
      rec.syn_bps = confirm.syn_bps;
      return rec;
    };
    if (!in_ledger && !confirm.confirmed) {
      ShaperRecord rec;
      rec.probed = true;  // written: the check's trains and why no stream went
      rec.trigger = h.trigger;
      rec.verdict = "unconfirmed";
      // The rest of the phase paces its average on what whole SYN trains
      // read, where that is lower; where none came back whole, on the
      // slowest path we look for (the trains, sized on the estimate the
      // check refused, went on at 10% of 700 Mbit/s into that 3 Mbit/s
      // link: 12 MB in 14 s; now the ledger ends the phase instead).
      const double shown = confirm.syn_bps > 0                       ? confirm.syn_bps
                           : confirm.sent >= 3 && confirm.whole == 0 ? kUnknownPathBps
                                                                     : 0.0;
      if (shown > 0) {
        const double cb = runner.load_capacity();
        runner.set_load_capacity(cb > 0 ? std::min(cb, shown) : shown);
      }
      return with_check(rec);
    }
    // A confirmed stream's sustained part is sized on no more than whole
    // SYN trains read (at least half the rate; on a token bucket they pass
    // in its burst or at its sustained rate, not below it).
    ShaperHints hs = h;
    if (!in_ledger && confirm.syn_bps > 0 && hs.slow_bps > confirm.syn_bps) {
      hs.slow_bps = confirm.syn_bps;
    }
    const Nanos t = mono_now();
    const std::uint64_t b = prober.bytes_sent();
    ShaperRecord rec = with_check(run_shaper_probe(ss, c, stop, t_cap, hs));
    const Nanos span = mono_now() - t;
    if (!in_ledger) exclude_from_ledger(ss.load, span, prober.bytes_sent() - b);
    rec.elapsed_s = to_seconds(span);
    if (h.trigger == "replies_lost" && !rec.found && rec.not_emptied && !policer.ran &&
        !stop.load()) {
      policer = run_policer_probe(ss, c, stop, t_cap, std::max(4e6, 3.0 * h.queued_bytes));
    }
    return rec;
  };
  CapacityTrains trains = capacity_trains(runner, c, path, res, probe);
  trains.tally.finish(res, c.max_rate_bps);
  // What follows is not re-derived offline: its outcome goes into the end
  // note for `linkwidth analyze`.
  const std::vector<Warning> before = res.warnings;
  if (!trains.shaper_tried && res.valid && !res.lower_bound && !stop.load()) {
    // A bucket that every train overran by the same B shows only as a
    // negative offset of the two-length slope (-B/R); the sizing trains,
    // inside it, as a rate far above the estimate.
    ShaperHints h = trains.shaper_hints;
    h.slow_bps = res.capacity_bps;
    h.queued_bytes = 0;
    if (offset_suggests_bucket(res.dispersion_offset_s, res.capacity_bps, trains.packet_size)) {
      h.trigger = "negative_offset";
    } else if (rate_drop_suggests_bucket(h.fast_bps, res.capacity_bps)) {
      h.trigger = "sizing_faster";
    }
    if (!h.trigger.empty()) {
      trains.shaper = probe(h);
      trains.shaper_tried = true;
    }
  } else if (!trains.shaper_tried && res.valid && res.lower_bound && !stop.load()) {
    // A bucket refilled at least as fast as the trains' average rate
    // (max_load of the line) keeps every train in its burst: they come back
    // at our own rate. One stream, three times the largest train, checks.
    ShaperHints h = trains.shaper_hints;
    h.trigger = "capacity_lower_bound";
    h.slow_bps = c.max_load * res.capacity_bps;
    h.queued_bytes = 0;
    h.growths = 1;
    h.growth = 2.5;
    h.fast_bytes = 1.5 * largest_train_bytes(res, trains.packet_size);
    h.largest_fast_bytes = h.fast_bytes;
    trains.shaper = probe(h);
    trains.shaper_tried = true;
  }
  // The trains' rates were the burst's: the phases after this one (hops)
  // budget with the sustained rate.
  auto take_shaper = [&] {
    apply_shaper(trains.shaper, res);
    if (trains.shaper.found && res.capacity_bps > 0) {
      const double cb = runner.load_capacity();
      runner.set_load_capacity(cb > 0 ? std::min(cb, res.capacity_bps) : res.capacity_bps);
    }
  };
  if (trains.shaper_tried) take_shaper();
  take_reply_warnings(ss, res.warnings);
  check_capacity_plausible(ss, c, stop, t_cap, trains.stamps, res);
  check_capacity_gaps(ss, c, stop, t_cap, res);
  // Every train came back at our own rate: a policer (a token bucket that
  // drops, with no queue) shows nothing else. One stream of full-size SYN
  // markers, after load that empties a bucket three times the largest
  // train and at least 4 MB, says (shaper_run.hpp, run_policer_probe).
  if (!policer.ran && res.valid && res.lower_bound && !res.shaper.found && !stop.load()) {
    policer = run_policer_probe(ss, c, stop, t_cap,
                                std::max(4e6, 3.0 * largest_train_bytes(res, trains.packet_size)));
  }
  apply_policer(policer, res);
  // The routine check, after the checks: it takes the time of one stream
  // (0.5 s in the paths benchmark), which, sent before them, the gap check
  // lacked on slow and loaded paths (4 capacities of the benchmark at
  // ce3d362 went from the gaps' +0.4..+1.3% to the trains' -14..-41%).
  const double trains_bps = res.capacity_bps;
  const int routine_n = routine_markers(ss.replies.rate_per_s(), ss.replies.max_burst());
  if (!trains.shaper_tried && res.valid && !res.lower_bound && !stop.load() &&
      !c.no_shaper_stream && routine_n > 0) {
    ShaperHints h = trains.shaper_hints;
    h.queued_bytes = 0;
    // Nothing in the trains: a bucket drained at a second bucket's peak
    // rate P, and refilled faster than the trains' average (--max-load of
    // P), lets every train through at P, which is not our sending rate
    // (tbf 20 Mbit/s, 300 KB, peakrate 100: capacity 96.7, shaper null).
    // Only a stream that empties it shows it (ShaperProbe's way): one,
    // paced just under the trains' rate, so that on a path without a
    // bucket it comes back as one line and fills no queue but what the
    // other traffic adds; a bucket of up to about 0.08 s of (0.95 P - R)
    // empties.
    h.trigger = "routine";
    h.stream_bytes = c.shaper_stream_bytes > 0 ? c.shaper_stream_bytes
                                               : routine_stream_bytes(trains_bps);
    h.pace_bps = 0.95 * trains_bps;
    // Fewer markers than a triggered stream's 40: their replies come out
    // of the --max-replies budget on every path (24 still leave 3 in the
    // burst of a 30 KB bucket, quadratic spacing).
    h.markers = routine_n;
    h.slow_bps = c.max_load * trains_bps;
    h.growths = 0;
    // The idle before it: what the largest train took of such a bucket
    // refills at R >= the trains' average rate (slower, the trains would
    // have emptied it and shown it), about ten times that train's span.
    h.fast_bytes = h.largest_fast_bytes = largest_train_bytes(res, trains.packet_size);
    h.fast_span_s = 0;
    // Sent on every path, it keeps to --max-load like the trains: it waits
    // until the phase's average, the stream included, allows it, and counts
    // (left out, it raised a 1.5 s run's average to 19% of a 50 Mbit/s path:
    // the fresh-clone CI at c77073a). Not when that wait would pass the cap.
    const Nanos ready = load_ready(ss, c, static_cast<std::uint64_t>(h.stream_bytes));
    if (ready + from_seconds(8.0 * h.stream_bytes / h.pace_bps) + 500 * kMs < t_cap) {
      while (mono_now() < ready && !stop.load()) sleep_until(ready);
    }
    if (mono_now() >= ready && !stop.load()) {
      trains.shaper = probe(h, true);
      trains.shaper_tried = true;
      if (trains.shaper.found && trains.shaper.peak_is_lower_bound) {
        // The stream's burst came at the pace we gave it, under the trains'
        // rate; the trains, which the bucket let through, read the peak.
        trains.shaper.peak_bps = std::max(trains.shaper.peak_bps, trains_bps);
        trains.shaper.peak_is_lower_bound = false;
      }
      take_shaper();
    }
  }
  // Our own interface's root shaper, when one is read (estimate/own_qdisc):
  // a capacity above its rate is its rate, here already, so that the
  // avail-bw search runs up to it and `capacity` says so too.
  if (res.valid && ss.own.begin(ss.route.interface)) {
    const int l2 = ss.own.l2_header();
    ss.own.end();
    const OwnQdisc q = own_qdisc_rate(read_qdisc_config(ss.route.interface));
    if (q.known) {
      cap_at_own_shaper(res,
                        {ss.route.interface, q.kind, q.rate_bps,
                         qdisc_ip_capacity(q.rate_bps, q.overhead, trains.packet_size, l2)},
                        warned_of(res.warnings, WarningCode::kLocalBottleneck));
    }
  }
  const nlohmann::json checks = capacity_checks_note(before, res);
  const CaptureStats cs = prober.capture_stats();
  if (cs.dropped > 0) {
    res.warnings.push_back({WarningCode::kCaptureDrops,
                            std::to_string(cs.dropped) + " packets dropped by the capture buffer"});
  }
  res.probe_packets = prober.packets_sent();
  res.probe_bytes = prober.bytes_sent();
  res.elapsed_s = to_seconds(mono_now() - t_begin);
  prober.note(phase_note_json(CapacityEndNote{res.stop_reason, res.elapsed_s, res.probe_packets,
                                              res.probe_bytes, cs.dropped, checks}));
  ss.packet_size = trains.packet_size;  // a path-MTU shrink holds for later phases too
  add_systematic_margin(res);
  return res;
}

void take_own_shaper_capacity(CapacityResult& res, double ip_bps, const std::string& why) {
  res.warnings.push_back({WarningCode::kCapacityFromOwnShaper, why});
  res.capacity_bps = ip_bps;
  res.low_bps = ip_bps * (1 - kOwnShaperSlack);
  res.high_bps = ip_bps * (1 + kOwnShaperRounding);
  res.capacity_source = "own_shaper";
  res.lower_bound = false;
}

bool cap_at_own_shaper(CapacityResult& res, const OwnShaper& own, bool spread_leaving) {
  if (!res.valid || res.shaper.found || res.capacity_source == "policer" ||
      res.capacity_source == "own_shaper" || !(own.ip_bps > 0) ||
      !(own.ip_bps < res.capacity_bps)) {
    return false;
  }
  const std::string read = res.lower_bound ? "at least " + format_rate(res.capacity_bps)
                                           : format_rate(res.capacity_bps);
  take_own_shaper_capacity(
      res, own.ip_bps,
      (spread_leaving ? "the trains read " + read + " leaving this host's own "
                      : "the capacity phase read " + read +
                            ", but every packet of ours leaves through this host's own ") +
          own.interface + ", whose root " + own.kind + " shaper runs at " +
          format_rate(own.rate_bps) + " (" + format_rate(own.ip_bps) +
          " at the IP layer): the narrow link is that shaper, its rate the capacity (a token "
          "bucket lets trains and back-to-back pairs out at line rate while its tokens last)");
  return true;
}

void add_systematic_margin(CapacityResult& res) {
  if (!res.valid || res.lower_bound || !(res.capacity_bps > 0)) return;
  res.low_bps = std::min(res.low_bps, res.capacity_bps * (1 - kSystematicRel));
  res.high_bps = std::max(res.high_bps, res.capacity_bps * (1 + kSystematicRel));
}

namespace {

// Whether a train's warm-up SYN (when it has one) or its head marker drew no
// reply while every later marker's came back: lost where no overrun bucket
// or queue takes replies (lost_replies_suggest_bucket). A train that lost its
// head and later replies too met a queue still full from the train before
// it (a bucket the trains overran, budgeted at its burst rate: the lab's
// 20 Mbit/s tbf with a 3 MB bucket lost both in its short trains between
// the long ones), which is a bucket's sign, not a lossy wire's.
bool early_reply_lost(const Train& t, const TrainOutcome& o) {
  if (t.markers.empty() || o.probes.size() != t.probes.size()) return false;
  for (std::size_t k = 1; k < t.markers.size(); ++k) {
    if (o.probes[static_cast<std::size_t>(t.markers[k])].reply == 0) return false;
  }
  const auto head = static_cast<std::size_t>(t.markers.front());
  if (o.probes[head].reply == 0) return true;
  for (std::size_t i = 0; i < head; ++i) {
    if (t.probes[i].role == Role::kWarmup && o.probes[i].reply == 0) return true;
  }
  return false;
}

// The capacity phase's loop (capacity_trains): its state between trains and
// its steps, in the order of one turn of the loop: plan the train (slow_rate:
// the two-rate cycle), run it, book it (book), the path MTU, the shaper watch
// (watch_shaper), sizing (size), the idle that keeps the load under
// --max-load (pace), and the stop rule (precise_enough).
class CapacityLoop {
 public:
  CapacityLoop(ProbeRunner& runner, const Config& c, PhasePath& path, CapacityResult& res,
               const ShaperProbe& shaper_probe)
      : out_(c.length_ratio > 1, c.verbose, c.precision),
        runner_(runner),
        c_(c),
        path_(path),
        res_(res),
        shaper_probe_(shaper_probe),
        auto_size_(c.load_packets == 0),
        two_lengths_(c.length_ratio > 1) {
    out_.packet_size = path.packet_size;
    n_ = auto_size_ ? sizing_load_packets(c.max_load_packets) : c.load_packets;
    sized_ = !auto_size_;
  }

  CapacityTrains run();

 private:
  enum class Next { kOn, kNextTrain, kStop };

  double slow_rate();
  void book(const TallyStep& step, double slow_bps, int group);
  bool shrink_to_mtu(const TallyStep& step);
  Next watch_shaper(const CapacitySample& s, double slow_bps, double train_bytes, Nanos start,
                    bool early_lost);
  void size(const CapacitySample& s);
  Nanos pace(const Train& train, const TrainResult& run, const CapacitySample& s, int n_train);
  bool precise_enough() const;
  void warn_own_queue_drops();
  // The long trains' load packets for short ones of `n`.
  int long_packets(int n) const { return static_cast<int>(std::lround(n * c_.length_ratio)); }

  CapacityTrains out_;
  ProbeRunner& runner_;
  const Config& c_;
  PhasePath& path_;
  CapacityResult& res_;
  const ShaperProbe& shaper_probe_;
  const bool auto_size_;
  const bool two_lengths_;
  int n_ = 0;  // the short trains' load packets
  bool sized_ = false;
  int consecutive_silent_ = 0;
  // Of those silent trains, the ones whose markers the capture never saw
  // leave (our own queue dropped them), once it has seen some of ours leave.
  int silent_held_here_ = 0;
  bool seen_leaving_ = false;
  int probes_sent_ = 0, never_left_ = 0;  // of the trains' packets
  int lost_reply_trains_ = 0;  // trains that lost later marker replies after a fast one
  int early_lost_trains_ = 0;  // ... that lost the warm-up's or the head's reply
  unsigned recent_later_lost_ = 0;  // of the last 4 trains, those that lost later replies
  int compressed_trains_ = 0;  // trains whose replies the way back compressed
  int closer_trains_ = 0;      // trains back closer than sent, over short spans too
  int timed_trains_ = 0;       // trains sent over kCloserMinSpan or more, replies back
  int slow_trains_ = 0;        // compressed trains far slower than the fast ones
  Nanos first_fast_ = 0;       // start of the first train that came back fast (0: none yet)
  int sizing_trains_ = 0;
  std::vector<double> rates_;           // every train's bits / reply dispersion: budgets the idle
  std::vector<double> group_rates_[2];  // kept measured trains' rates: short, long
  CapacityEstimate est_;
  // Two offered rates (estimate/capacity.hpp, fit_rate_dependence): the
  // trains cycle short/long at our fastest rate, then short/long paced at
  // slow_train_rate() of the fast trains' measured rate (median of the last
  // five) and the estimate so far. `fast_rates_` holds the measured offered
  // rates of fast trains, sizing trains included.
  std::vector<double> fast_rates_;
  bool any_slow_ = false;
  double slow_rate_ = 0;            // the slow trains' rate, once chosen
  std::vector<double> kept_rate_[2];  // per-train rates of kept measured trains: fast, slow
};

// The slow trains' rate on their turn of the cycle, else 0.
double CapacityLoop::slow_rate() {
  if (!sized_ || !two_lengths_ || !slow_train_turn(out_.tally.measured()) || fast_rates_.empty()) {
    return 0;
  }
  const std::vector<double> recent(
      fast_rates_.end() -
          std::min<std::ptrdiff_t>(5, static_cast<std::ptrdiff_t>(fast_rates_.size())),
      fast_rates_.end());
  // Chosen once per run: a corrected (higher) estimate later would close
  // the gap to the fast rate and stop the very trains the fit needs.
  if (slow_rate_ <= 0) {
    const double best = rates_.empty() ? 0 : *std::max_element(rates_.begin(), rates_.end());
    slow_rate_ = slow_train_rate(median(recent), est_.valid ? est_.capacity_bps : best);
  }
  return slow_rate_;
}

// The train's sample into the rate lists the cycle, the budget and the stop
// rule read.
void CapacityLoop::book(const TallyStep& step, double slow_bps, int group) {
  const CapacitySample& s = step.sample;
  if (sized_ && s.kept()) group_rates_[group].push_back(s.capacity_bps);
  if (slow_bps == 0 && s.offered_bps > 0 && s.verdict != SampleVerdict::kUnsent) {
    fast_rates_.push_back(s.offered_bps);
  }
  if (sized_ && s.kept()) kept_rate_[slow_bps > 0].push_back(s.capacity_bps);
}

// The packets shrink to the path MTU; sizing starts over. False if the train
// found none.
bool CapacityLoop::shrink_to_mtu(const TallyStep& step) {
  if (step.path_mtu <= 0) return false;
  out_.packet_size = step.path_mtu;
  sized_ = !auto_size_;
  sizing_trains_ = 0;
  if (auto_size_) n_ = sizing_load_packets(c_.max_load_packets);
  group_rates_[0].clear();  // other lengths from here on
  group_rates_[1].clear();
  return true;
}

// Token buckets (estimate/shaper.hpp): the sizing trains fit a bucket and
// come back at the peak; a later, longer train meets the sustained rate. The
// first sign of it runs the shaper probe, once.
CapacityLoop::Next CapacityLoop::watch_shaper(const CapacitySample& s, double slow_bps,
                                              double train_bytes, Nanos start, bool early_lost) {
  ShaperHints& hints = out_.shaper_hints;
  // (Replies that came back closer together than the train left give no
  // rate at all.)
  const double carried = carried_rate(s);
  if (s.capacity_bps > 0 && carried <= 0) return Next::kOn;
  if (carried > 0 && !rate_drop_suggests_bucket(hints.fast_bps, carried)) {
    hints.fast_bytes += train_bytes;  // came back at about the sizing rate: within a bucket
    hints.largest_fast_bytes = std::max(hints.largest_fast_bytes, train_bytes);
    if (first_fast_ == 0) first_fast_ = start;
  }
  // The bucket refilled from the first fast train to this one's start.
  if (first_fast_ > 0) hints.fast_span_s = to_seconds(start - first_fast_);
  if (!sized_ && s.verdict != SampleVerdict::kLostReply) {
    hints.fast_bps = std::max(hints.fast_bps, carried);
  }
  // (Not a slow train: paced trains meet more cross traffic and read lower
  // without any bucket.)
  const bool slower =
      slow_bps == 0 && s.kept() && rate_drop_suggests_bucket(hints.fast_bps, s.capacity_bps);
  // (A lost warm-up reply alone leaves the train's sample whole: it counts
  // as an early loss all the same.)
  if (hints.fast_bps > 0) {
    const bool later_lost = !early_lost && s.verdict == SampleVerdict::kLostReply;
    early_lost_trains_ += early_lost ? 1 : 0;
    lost_reply_trains_ += later_lost ? 1 : 0;
    recent_later_lost_ = ((recent_later_lost_ << 1) | (later_lost ? 1u : 0u)) & 0xFu;
  }
  if (slower) ++slow_trains_;
  // Two compressed trains far slower than an earlier (shorter) one, or two
  // trains that lost replies after one that came back fast: only an
  // uncompressed train would show our own sending rate, which a busy host
  // lowers. A bucket the trains overrun slows every train of that length
  // alike; one train alone is not enough. A host descheduled for a moment
  // loses one reply, or stretches one train: a 50-packet train on an
  // unshaped 100 Mbit/s path read 33 Mbit/s (18 ms against 6 ms) between
  // trains that read 98, and sent a stream (the fresh-clone CI at 1a507d9,
  // and 1 run in 20 here); the stream's 40 markers at once would also cost a
  // target that limits its replies 35 of them (the fresh-clone CI at d364570).
  if (out_.shaper_tried || !shaper_probe_ || hints.fast_bps <= 0 ||
      !(slow_trains_ >= 2 ||
        lost_replies_suggest_bucket(lost_reply_trains_, early_lost_trains_,
                                    static_cast<int>(std::bitset<4>(recent_later_lost_).count())) ||
        consecutive_silent_ >= 2)) {
    return Next::kOn;
  }
  out_.shaper_tried = true;
  hints.trigger = slower ? "rate_drop" : "replies_lost";
  hints.slow_bps = slower ? s.capacity_bps : 0.0;
  hints.queued_bytes = train_bytes;
  out_.shaper = shaper_probe_(hints);
  if (out_.shaper.found) {
    res_.stop_reason = StopReason::kShaper;
    return Next::kStop;
  }
  if (!sized_ && out_.shaper.stream_rate_bps > 0) {
    // The stream was compressed: size the trains by it.
    n_ = sized_load_packets(c_, out_.shaper.stream_rate_bps, out_.packet_size);
    sized_ = true;
  }
  consecutive_silent_ = 0;
  silent_held_here_ = 0;
  return Next::kNextTrain;
}

// Sizing trains (not used for the estimate) grow until one is long enough
// to trust its rate: a short train can fit inside a shaper's token-bucket
// burst and look arbitrarily fast.
void CapacityLoop::size(const CapacitySample& s) {
  if (sized_) return;
  // A train that left our interface and came back in under half the time we
  // took to send it sizes nothing either, and the next is as short: our own
  // queue held its head behind this host's traffic, and what followed went
  // missing there or bunched, with nothing on the path to spread it again
  // (seed 2036's path 32: our 5.9 Mbit/s tbf with a 17 KB queue full of this
  // host's TCP; the 16-packet train left with its load dropped, the markers
  // 66 us apart, and read 2.9 Gbit/s; grown eight-fold twice, a 500-packet
  // train of 750 KB went, and the budget it spent left no time for another:
  // no estimate).
  if (s.left_dispersion_s > 0 && s.left_dispersion_s < kHeldBack * s.send_dispersion_s &&
      s.reply_dispersion_s < kHeldBack * s.send_dispersion_s) {
    return;
  }
  ++sizing_trains_;
  // (A train our own queue cut counts only the bits that left: its rate holds.)
  const double carried = carried_rate(s);
  if (carried > 0 && (s.kept() || s.verdict == SampleVerdict::kNotCompressed ||
                             s.verdict == SampleVerdict::kLostLoad)) {
    const bool trustworthy = s.reply_dispersion_s >= c_.target_dispersion_s / 4 ||
                             n_ >= max_short_packets(c_) || sizing_trains_ >= 4;
    if (trustworthy) {
      n_ = sized_load_packets(c_, carried, out_.packet_size);
      sized_ = true;
    } else {
      n_ = std::min(n_ * 8, max_short_packets(c_));
    }
  }
  // (A train back closer together than it left sizes nothing, and the next
  // is as short: with no rate known the budget is kUnknownPathBps, and a
  // train eight times as long would wait 15 s for it.)
}

// When the next train may start. Idle so the average probing rate stays
// under max_load of the capacity and the bottleneck queue drains: at least
// max(train time at C_b / max_load, 2·N·L/C_b). C_b is budget_capacity()
// (estimate/load_budget.hpp): the lower quartile of the per-train rates, at
// most the estimate. Not the estimate alone, nor the best rate: load lost in
// a small queue still counts in a train's bits, not in its dispersion, so
// long trains read up to twice the link and the slope of two equal
// dispersions gigabits (the lab's 15 KB queue at 20 Mbit/s probed at 28% of C
// that way). No rate yet (every reply lost): kUnknownPathBps, a slow path.
// Long trains reading faster than short ones mark lost load: the budget falls
// by that ratio (load_loss_factor). The runner's gate holds the bytes really
// sent over the elapsed time under max_load x C_b as well.
Nanos CapacityLoop::pace(const Train& train, const TrainResult& run, const CapacitySample& s,
                         int n_train) {
  if (const double carried = carried_rate(s); carried > 0) rates_.push_back(carried);
  est_ = out_.tally.estimate();
  const double budget_rate =
      budget_capacity(rates_, est_.valid ? est_.capacity_bps : 0,
                      load_loss_factor(group_rates_[0], group_rates_[1], c_.length_ratio));
  runner_.set_load_capacity(budget_rate);
  const double train_bits = 8.0 * static_cast<double>(train.total_bytes());
  const double L = out_.packet_size;
  const double idle =
      std::max(train_bits / budget_rate / c_.max_load, 2.0 * n_train * L * 8.0 / budget_rate);
  return std::max(run.end_mono, run.start_mono + from_seconds(idle));
}

// The precision stop: enough trains, an estimate whose interval is within
// --precision, and a two-rate fit that has seen what it needs.
bool CapacityLoop::precise_enough() const {
  // With slow trains in the cycle, not before the two-rate fit can see
  // them (3 trains a cell at least, after losses: 16 measured trains),
  // unless two cycles in, the slow trains read as fast as the fast ones
  // (no cross traffic to correct for: a clean path stops as early as it did).
  const int measured = out_.tally.measured();
  const bool slow_agree =
      kept_rate_[1].size() >= 2 && kept_rate_[0].size() >= 2 &&
      median(kept_rate_[1]) >= (1 - std::max(0.02, 2 * c_.precision)) * median(kept_rate_[0]);
  // The slope far below the short trains' own rates: the long trains met
  // cross traffic that the short ones did not, at either rate (80% constant-
  // rate load on 50 Mbit/s: 3 long trains each met 3 cross packets, the slope
  // read 40.06 with an interval of +-0.6%, the short trains 49.6, and the
  // phase stopped at 7 trains). More trains meet the cross traffic at other
  // phases; the slope is not trusted before 16.
  const bool lengths_disagree =
      two_lengths_ && est_.valid && group_rates_[0].size() >= 2 &&
      est_.capacity_bps < (1 - std::max(0.05, 3 * c_.precision)) * median(group_rates_[0]);
  // Trains lifted for load lost unseen: each length's top rung (its whole
  // trains) is only known once enough trains came back (3% loss on 28-packet
  // trains: 57% of them a packet or more short; 5 long trains all short
  // made the top a rung low and the slope +7.8% at 5 trains a length).
  const bool ladder_ready = out_.tally.lifted() == 0 || out_.tally.kept_per_length(kLadderTrains);
  const bool fit_ready = (!any_slow_ || measured >= 16 || slow_agree) &&
                         (!lengths_disagree || measured >= 16) && ladder_ready;
  return out_.tally.enough(c_.min_trains) && est_.valid && fit_ready &&
         (est_.high_bps - est_.low_bps) / 2 <= c_.precision * est_.capacity_bps;
}

// No marker of the train was seen leaving this host (the capture sees our
// packets after our own qdisc): that queue dropped them.
bool markers_never_left(const TrainResult& run) {
  for (int i : run.train.markers) {
    const ProbeOutcome& p = run.outcome.probes[static_cast<std::size_t>(i)];
    if (p.left > 0) return false;
  }
  return !run.train.markers.empty();
}

CapacityTrains CapacityLoop::run() {
  CapacityTally& tally = out_.tally;
  res_.stop_reason = StopReason::kMaxTrains;
  Nanos next_start = 0;  // the first train goes at once
  for (int i = 0; i < c_.max_trains; ++i) {
    const int L = out_.packet_size;
    const int group = sized_ && two_lengths_ ? tally.measured() % 2 : 0;
    const int n_train = group == 1 ? long_packets(n_) : n_;
    const double slow_bps = slow_rate();
    CapacityTrainParams tp = train_params(c_, path_.flow, n_train, L);
    // Slower than the fast trains (and so than every cap): only the gap grows.
    if (slow_bps > 0) tp.gap = std::max(tp.gap, gap_for_rate(slow_bps, L));
    any_slow_ = any_slow_ || slow_bps > 0;
    const Train train = make_capacity_train(tp, i, path_.seqs);
    const StopReason why = runner_.admit(train, [&] { return next_start; });
    if (why != StopReason::kNone) {
      res_.stop_reason = why;
      break;
    }
    // Busy-wait while the replies are due: about the train's time at the
    // bottleneck, bounded; the prober opens the window one RTT after the head.
    const double expect_s =
        8.0 * static_cast<double>(train.total_bytes()) / (est_.valid ? est_.capacity_bps : 1e6);
    TrainOptions o;
    o.wait_for = train.markers;
    o.busy_wait = busy_wait(1.5 * expect_s);
    o.note = {{"load_packets", n_train},
              {"short_load_packets", n_},
              {"group", group},
              {"sizing", !sized_},
              {"slow_bps", slow_bps},
              {"packet_size", L}};
    const TrainResult run = runner_.run(train, o);
    // The target's reply limit, not the path, took this train's replies.
    if (run.replies_limited) tally.forgive_losses();
    add_reply_stamps(run.train, run.outcome, out_.stamps);
    const TallyStep step = tally.add(run.train, run.outcome, n_train, n_, group, !sized_, L, res_);
    const CapacitySample& s = step.sample;
    book(step, slow_bps, group);
    if (shrink_to_mtu(step)) continue;
    const bool silent = run.outcome.markers_lost == static_cast<int>(run.train.markers.size());
    consecutive_silent_ = silent ? consecutive_silent_ + 1 : 0;
    silent_held_here_ = !silent ? 0 : silent_held_here_ + (markers_never_left(run) ? 1 : 0);
    for (const ProbeOutcome& p : run.outcome.probes) {
      seen_leaving_ = seen_leaving_ || p.left > 0;
      probes_sent_ += p.sent > 0 ? 1 : 0;
      never_left_ += p.sent > 0 && p.left == 0 ? 1 : 0;
    }

    const bool early_lost = early_reply_lost(run.train, run.outcome);
    if (c_.verbose && (early_lost || s.verdict == SampleVerdict::kLostReply)) {
      std::fprintf(stderr, "train %d: N=%d lost replies (%s)\n", i, n_train,
                   early_lost ? "warm-up or head only" : "later markers");
    }
    const Next shaper = watch_shaper(s, slow_bps, static_cast<double>(train.total_bytes()),
                                     run.start_mono, early_lost);
    if (shaper == Next::kStop) break;
    if (shaper == Next::kNextTrain) {
      next_start = 0;  // the stream's own idle and wait came first
      continue;
    }
    if (consecutive_silent_ >= 5) {
      // Markers that never left this host were dropped by our own queue (a
      // saturated uplink: this host's other traffic keeps its qdisc full),
      // not ignored by the target.
      if (seen_leaving_ && 2 * silent_held_here_ > consecutive_silent_) {
        throw Error("capacity",
                    "this host's own queue on " + res_.interface +
                        " dropped our markers before they left, in " +
                        std::to_string(silent_held_here_) + " of the last " +
                        std::to_string(consecutive_silent_) +
                        " trains: its qdisc is full (this host's other traffic saturates the "
                        "uplink); no reply could come",
                    "own_queue_full");
      }
      throw Error("capacity", "the target stopped answering: no marker reply in 5 trains",
                  "replies_stopped");
    }
    // Replies that came back closer together than the trains left: the
    // return path compresses them (a slow or busy link from the target back
    // to us: each reply waits behind its traffic's large packets, then
    // leaves right behind the one before). Every dispersion then reads that
    // link's queue, not the forward path: 20 Mbit/s with a 5 Mbit/s return
    // link busy with a TCP upload read 93-297 Mbit/s from the trains and
    // 140 from the SYN gaps (54-byte replies back to back at 5 Mbit/s), and
    // the load budget, sized on those rates, let the trains load the link
    // at 50%. Stop sending, no estimate: twice over a span of 1 ms or more
    // (timing noise is 20-200 us), or once so and once more over 100 us,
    // or in most trains over 100 us (short
    // trains whose two replies came back 85 us apart, one reply's time on
    // that link, whatever their length: noise compresses a train now and
    // then, never most of them).
    if (s.reply_dispersion_s > 0 && s.send_dispersion_s >= kCloserMinSpan) {
      ++timed_trains_;
      if (replies_closer_than_sent(s, CapacityFilter{}.compressed_share, kCloserMinSpan)) {
        ++closer_trains_;
      }
    }
    if (s.verdict == SampleVerdict::kRepliesCompressed) ++compressed_trains_;
    if (compressed_trains_ >= 2 || (compressed_trains_ >= 1 && closer_trains_ >= 2) ||
        (closer_trains_ >= kCloserTrains && 2 * closer_trains_ > timed_trains_)) {
      throw Error("capacity",
                  "the replies came back closer together than the trains left (" +
                      std::to_string(std::max(compressed_trains_, closer_trains_)) + " of " +
                      std::to_string(res_.trains_sent) +
                      " trains): the return path compresses them (a slow or busy link from the "
                      "target back to us), so no dispersion measures the forward path",
                  "replies_compressed");
    }
    size(s);
    if (step.shortened_to > 0) {
      n_ = step.shortened_to;
      res_.queue_fit_load_packets = two_lengths_ ? long_packets(n_) : n_;
    }

    next_start = pace(train, run, s, n_train);
    const StopReason late = runner_.check_time(next_start);
    if (late != StopReason::kNone) {
      res_.stop_reason = late;
      break;
    }
    if (precise_enough()) {
      res_.stop_reason = StopReason::kPrecision;
      break;
    }
  }
  warn_own_queue_drops();
  return std::move(out_);
}

// A quarter or more of the trains' packets never seen leaving (the capture
// sees ours after our own qdisc, and saw some): that queue dropped them.
// Full of this host's other traffic (an uplink at or over its rate: UDP at
// 1.5 times our own 5 Mbit/s tbf let only the small markers in, every
// train read 2.4 Gbit/s and no estimate came, with no word of why), or too
// small for the trains (trains_shortened says what was done about it).
void CapacityLoop::warn_own_queue_drops() {
  if (!seen_leaving_ || never_left_ == 0 || 4 * never_left_ < probes_sent_) return;
  res_.warnings.push_back(
      {WarningCode::kOwnQueueDrops,
       std::to_string(never_left_) + " of the " + std::to_string(probes_sent_) +
           " packets of the capacity trains never left this host: its own queue on " +
           res_.interface +
           " dropped them (full of this host's other traffic, or too small for the trains); "
           "what reached the path was not what we sent"});
}

}  // namespace

CapacityTrains capacity_trains(ProbeRunner& runner, const Config& c, PhasePath& path,
                               CapacityResult& res, const ShaperProbe& shaper_probe) {
  return CapacityLoop(runner, c, path, res, shaper_probe).run();
}

}  // namespace lw
