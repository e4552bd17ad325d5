#include "app/runs/capacity_run.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "app/runs/capacity_tally.hpp"
#include "app/plumbing/path_checks.hpp"
#include "app/plumbing/runner.hpp"
#include "app/plumbing/session.hpp"
#include "app/runs/shaper_run.hpp"
#include "estimate/shaper.hpp"
#include "estimate/capacity.hpp"
#include "estimate/load_budget.hpp"
#include "estimate/stats.hpp"
#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

// The longest short train: the long one (ratio × N) stays within max_load_packets.
int max_short_packets(const Config& c) {
  return std::max(kMinLoadPackets,
                  static_cast<int>(std::floor(c.max_load_packets / std::max(1.0, c.length_ratio))));
}

int sized_load_packets(const Config& c, double capacity_bps, int packet_size) {
  const double n = std::ceil(c.target_dispersion_s * capacity_bps / (8.0 * packet_size));
  return static_cast<int>(std::clamp(n, static_cast<double>(kMinLoadPackets),
                                     static_cast<double>(max_short_packets(c))));
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
                      {"shaper", shaper_json(res.shaper)},
                      {"shaper_check", shaper_check_json(res.shaper)}};
  if (res.capacity_source != "rst_trains") {
    j["capacity"] = {{"source", res.capacity_source},   {"capacity_bps", res.capacity_bps},
                     {"low_bps", res.low_bps},          {"high_bps", res.high_bps},
                     {"kde_bandwidth_bps", res.kde_bandwidth_bps}, {"lower_bound", res.lower_bound}};
  }
  return j;
}

void apply_capacity_checks(CapacityResult& res, const nlohmann::json& j) {
  if (!j.is_object()) return;
  res.valid = j.value("valid", res.valid);
  for (const auto& code : j.value("removed", nlohmann::json::array())) {
    const std::string k = code.get<std::string>();
    res.warnings.erase(std::remove_if(res.warnings.begin(), res.warnings.end(),
                                      [&](const Warning& w) { return w.code == k; }),
                       res.warnings.end());
  }
  for (const Warning& w : warnings_from_json(j.value("added", nlohmann::json::array()))) {
    res.warnings.push_back(w);
  }
  if (j.contains("load_check")) res.load_check = load_check_from_json(j.at("load_check"));
  if (j.contains("shaper_check")) {
    res.shaper = shaper_from_json(j.value("shaper", nlohmann::json()), j.at("shaper_check"));
  }
  if (j.contains("capacity")) {
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
  prober.note({{"kind", "run"},
               {"phase", "capacity"},
               {"command", c.command},
               {"head", to_json(res)},
               {"two_lengths", c.length_ratio > 1},
               {"precision", c.precision},
               {"max_rate_bps", c.max_rate_bps}});

  LiveRunner runner(ss, c, "capacity", t_cap);
  PhasePath path{ss.flow, ss.packet_size, ss.disc.rtt_s, ss.seqs};
  // The shaper probe (app/shaper_run) is live only: its streams are not
  // replayed; what it found goes into the end note, and analyze hands the
  // loop the same finding at the same train.
  // Its streams have their own caps (bytes, rate, time: app/shaper_run.cpp)
  // and are left out of the --max-load ledger, bytes and time: they do not
  // make later trains wait, nor give them credit (estimate/load_budget.hpp).
  auto probe = [&](const ShaperHints& h) {
    if (c.verbose) std::fprintf(stderr, "shaper probe: %s\n", h.trigger.c_str());
    const Nanos t = mono_now();
    const std::uint64_t b = prober.bytes_sent();
    ShaperRecord rec = run_shaper_probe(ss, c, stop, t_cap, h);
    const Nanos span = mono_now() - t;
    exclude_from_ledger(ss.load, span, prober.bytes_sent() - b);
    rec.elapsed_s = to_seconds(span);
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
    h.grow = false;
    double largest = 0;
    for (const auto& t : res.trains) largest = std::max(largest, 1.0 * t.load_packets);
    h.fast_bytes = 1.5 * largest * trains.packet_size;
    trains.shaper = probe(h);
    trains.shaper_tried = true;
  }
  if (trains.shaper_tried) apply_shaper(trains.shaper, res);
  if (trains.shaper.found && res.capacity_bps > 0) {
    // The trains' rates were the burst's: the phases after this one (hops)
    // budget with the sustained rate.
    const double cb = runner.load_capacity();
    runner.set_load_capacity(cb > 0 ? std::min(cb, res.capacity_bps) : res.capacity_bps);
  }
  take_reply_warnings(ss, res.warnings);
  check_capacity_plausible(ss, c, stop, t_cap, trains.stamps, res);
  const nlohmann::json checks = capacity_checks_note(before, res);
  const CaptureStats cs = prober.capture_stats();
  if (cs.dropped > 0) {
    res.warnings.push_back({WarningCode::kCaptureDrops,
                            std::to_string(cs.dropped) + " packets dropped by the capture buffer"});
  }
  res.probe_packets = prober.packets_sent();
  res.probe_bytes = prober.bytes_sent();
  res.elapsed_s = to_seconds(mono_now() - t_begin);
  prober.note({{"kind", "end"},
               {"phase", "capacity"},
               {"stop_reason", res.stop_reason},
               {"elapsed_s", res.elapsed_s},
               {"probe_packets", res.probe_packets},
               {"probe_bytes", res.probe_bytes},
               {"capture_drops", cs.dropped},
               {"checks", checks}});
  ss.packet_size = trains.packet_size;  // a path-MTU shrink holds for later phases too
  return res;
}

CapacityTrains capacity_trains(ProbeRunner& runner, const Config& c, PhasePath& path,
                               CapacityResult& res, const ShaperProbe& shaper_probe) {
  CapacityTrains out(c.length_ratio > 1, c.verbose, c.precision);
  // Token buckets (estimate/shaper.hpp): the sizing trains fit a bucket and
  // come back at the peak; a later, longer train meets the sustained rate.
  // The first sign of it runs the shaper probe, once.
  ShaperHints& shaper_hints = out.shaper_hints;
  ShaperRecord& shaper = out.shaper;
  bool& shaper_tried = out.shaper_tried;
  auto try_shaper = [&](const std::string& trigger, double slow_bps, double queued_bytes) {
    shaper_tried = true;
    shaper_hints.trigger = trigger;
    shaper_hints.slow_bps = slow_bps;
    shaper_hints.queued_bytes = queued_bytes;
    if (shaper_probe) shaper = shaper_probe(shaper_hints);
    return shaper.found;
  };
  CapacityTally& tally = out.tally;
  int& L = out.packet_size;
  L = path.packet_size;
  const bool auto_size = c.load_packets == 0;
  int n = auto_size ? kSizingLoadPackets : c.load_packets;
  bool sized = !auto_size;
  const bool two_lengths = c.length_ratio > 1;
  int consecutive_silent = 0;
  int sizing_trains = 0;
  res.stop_reason = StopReason::kMaxTrains;
  Nanos next_start = 0;  // the first train goes at once
  std::vector<double> rates;           // every train's bits / reply dispersion: budgets the idle
  std::vector<double> group_rates[2];  // kept measured trains' rates: short, long
  CapacityEstimate est;

  // Two offered rates (estimate/capacity.hpp, fit_rate_dependence): the
  // trains cycle short/long at our fastest rate, then short/long paced at
  // slow_train_rate() of the fast trains' measured rate (median of the last
  // five) and the estimate so far. `fast_rates` holds the measured offered
  // rates of fast trains, sizing trains included.
  std::vector<double> fast_rates;
  bool any_slow = false;
  double slow_rate = 0;  // the slow trains' rate, once chosen
  std::vector<double> kept_rate[2];  // per-train rates of kept measured trains: fast, slow
  for (int i = 0; i < c.max_trains; ++i) {
    const int group = sized && two_lengths ? tally.measured() % 2 : 0;
    const int n_train = group == 1 ? static_cast<int>(std::lround(n * c.length_ratio)) : n;
    double slow_bps = 0;
    if (sized && two_lengths && slow_train_turn(tally.measured()) && !fast_rates.empty()) {
      const std::vector<double> recent(
          fast_rates.end() - std::min<std::ptrdiff_t>(5, static_cast<std::ptrdiff_t>(fast_rates.size())),
          fast_rates.end());
      // Chosen once per run: a corrected (higher) estimate later would close
      // the gap to the fast rate and stop the very trains the fit needs.
      if (slow_rate <= 0) {
        const double best = rates.empty() ? 0 : *std::max_element(rates.begin(), rates.end());
        slow_rate = slow_train_rate(median(recent), est.valid ? est.capacity_bps : best);
      }
      slow_bps = slow_rate;
    }
    CapacityTrainParams tp = train_params(c, path.flow, n_train, L);
    // Slower than the fast trains (and so than every cap): only the gap grows.
    if (slow_bps > 0) tp.gap = std::max(tp.gap, gap_for_rate(slow_bps, L));
    any_slow = any_slow || slow_bps > 0;
    const Train train = make_capacity_train(tp, i, path.seqs);
    const StopReason why = runner.admit(train, [&] { return next_start; });
    if (why != StopReason::kNone) {
      res.stop_reason = why;
      break;
    }
    // Busy-wait while the replies are due: about the train's time at the
    // bottleneck, bounded; the prober opens the window one RTT after the head.
    const double expect_s =
        8.0 * static_cast<double>(train.total_bytes()) / (est.valid ? est.capacity_bps : 1e6);
    TrainOptions o;
    o.wait_for = train.markers;
    o.busy_wait = busy_wait(1.5 * expect_s);
    o.note = {{"load_packets", n_train},
              {"short_load_packets", n},
              {"group", group},
              {"sizing", !sized},
              {"slow_bps", slow_bps},
              {"packet_size", L}};
    const TrainResult run = runner.run(train, o);
    // The target's reply limit, not the path, took this train's replies.
    if (run.replies_limited) tally.forgive_losses();
    add_reply_stamps(run.train, run.outcome, out.stamps);
    const TallyStep step = tally.add(run.train, run.outcome, n_train, n, group, !sized, L, res);
    const CapacitySample& s = step.sample;
    if (sized && s.kept()) group_rates[group].push_back(s.capacity_bps);
    if (slow_bps == 0 && s.offered_bps > 0 && s.verdict != SampleVerdict::kUnsent) {
      fast_rates.push_back(s.offered_bps);
    }
    if (sized && s.kept()) kept_rate[slow_bps > 0].push_back(s.capacity_bps);

    if (step.path_mtu > 0) {
      // The packets shrink to the path MTU; sizing starts over.
      L = step.path_mtu;
      sized = !auto_size;
      sizing_trains = 0;
      if (auto_size) n = kSizingLoadPackets;
      group_rates[0].clear();  // other lengths from here on
      group_rates[1].clear();
      continue;
    }

    consecutive_silent = run.outcome.markers_lost == static_cast<int>(run.train.markers.size())
                             ? consecutive_silent + 1
                             : 0;
    const double train_bytes = static_cast<double>(train.total_bytes());
    if (s.capacity_bps > 0 && !rate_drop_suggests_bucket(shaper_hints.fast_bps, s.capacity_bps)) {
      shaper_hints.fast_bytes += train_bytes;  // came back at about the sizing rate: within a bucket
    }
    if (!sized && s.capacity_bps > 0 && s.verdict != SampleVerdict::kLostReply) {
      shaper_hints.fast_bps = std::max(shaper_hints.fast_bps, s.capacity_bps);
    }
    // (Not a slow train: paced trains meet more cross traffic and read lower
    // without any bucket.)
    const bool slower = slow_bps == 0 && s.kept() &&
                        rate_drop_suggests_bucket(shaper_hints.fast_bps, s.capacity_bps);
    // A compressed train far slower than an earlier (shorter) one, or a train
    // that lost replies after one that came back fast: only an uncompressed
    // train would show our own sending rate, which a busy host lowers.
    if (!shaper_tried && shaper_probe && shaper_hints.fast_bps > 0 &&
        (slower || s.verdict == SampleVerdict::kLostReply || consecutive_silent >= 2)) {
      if (try_shaper(slower ? "rate_drop" : "replies_lost", slower ? s.capacity_bps : 0.0,
                     train_bytes)) {
        res.stop_reason = StopReason::kShaper;
        break;
      }
      if (!sized && shaper.stream_rate_bps > 0) {
        // The stream was compressed: size the trains by it.
        n = sized_load_packets(c, shaper.stream_rate_bps, L);
        sized = true;
      }
      next_start = 0;  // the stream's own idle and wait came first
      consecutive_silent = 0;
      continue;
    }
    if (consecutive_silent >= 5) {
      throw Error("capacity", "the target stopped answering: no marker reply in 5 trains",
                  "replies_stopped");
    }

    if (!sized) {
      // Sizing trains (not used for the estimate) grow until one is long
      // enough to trust its rate: a short train can fit inside a shaper's
      // token-bucket burst and look arbitrarily fast.
      ++sizing_trains;
      if (s.capacity_bps > 0 && (s.kept() || s.verdict == SampleVerdict::kNotCompressed)) {
        const bool trustworthy = s.reply_dispersion_s >= c.target_dispersion_s / 4 ||
                                 n >= max_short_packets(c) || sizing_trains >= 4;
        if (trustworthy) {
          n = sized_load_packets(c, s.capacity_bps, L);
          sized = true;
        } else {
          n = std::min(n * 8, max_short_packets(c));
        }
      }
    }
    if (step.shortened_to > 0) n = step.shortened_to;

    // Idle so the average probing rate stays under max_load of the capacity and
    // the bottleneck queue drains: at least max(train time at C_b / max_load,
    // 2·N·L/C_b). C_b is budget_capacity() (estimate/load_budget.hpp): the
    // lower quartile of the per-train rates, at most the estimate. Not the
    // estimate alone, nor the best rate: load lost in a small queue still
    // counts in a train's bits, not in its dispersion, so long trains read up
    // to twice the link and the slope of two equal dispersions gigabits (the
    // lab's 15 KB queue at 20 Mbit/s probed at 28% of C that way). No rate yet
    // (every reply lost): kUnknownPathBps, a slow path. Long trains reading
    // faster than short ones mark lost load: the budget falls by that ratio
    // (load_loss_factor). The runner's gate holds the bytes really sent over
    // the elapsed time under max_load x C_b as well.
    if (s.capacity_bps > 0) rates.push_back(s.capacity_bps);
    est = tally.estimate();
    const double budget_rate = budget_capacity(rates, est.valid ? est.capacity_bps : 0,
                                               load_loss_factor(group_rates[0], group_rates[1]));
    runner.set_load_capacity(budget_rate);
    const double train_bits = 8.0 * static_cast<double>(train.total_bytes());
    const double idle =
        std::max(train_bits / budget_rate / c.max_load, 2.0 * n_train * L * 8.0 / budget_rate);
    next_start = std::max(run.end_mono, run.start_mono + from_seconds(idle));
    const StopReason late = runner.check_time(next_start);
    if (late != StopReason::kNone) {
      res.stop_reason = late;
      break;
    }

    // With slow trains in the cycle, not before the two-rate fit can see
    // them (3 trains a cell at least, after losses: 16 measured trains),
    // unless two cycles in, the slow trains read as fast as the fast ones
    // (no cross traffic to correct for: a clean path stops as early as it did).
    const bool slow_agree =
        kept_rate[1].size() >= 2 && kept_rate[0].size() >= 2 &&
        median(kept_rate[1]) >= (1 - std::max(0.02, 2 * c.precision)) * median(kept_rate[0]);
    // The slope far below the short trains' own rates: the long trains met
    // cross traffic that the short ones did not, at either rate (80% constant-
    // rate load on 50 Mbit/s: 3 long trains each met 3 cross packets, the slope
    // read 40.06 with an interval of +-0.6%, the short trains 49.6, and the
    // phase stopped at 7 trains). More trains meet the cross traffic at other
    // phases; the slope is not trusted before 16.
    const bool lengths_disagree =
        two_lengths && est.valid && group_rates[0].size() >= 2 &&
        est.capacity_bps < (1 - std::max(0.05, 3 * c.precision)) * median(group_rates[0]);
    const bool fit_ready =
        (!any_slow || tally.measured() >= 16 || slow_agree) && (!lengths_disagree || tally.measured() >= 16);
    if (tally.enough(c.min_trains) && est.valid && fit_ready &&
        (est.high_bps - est.low_bps) / 2 <= c.precision * est.capacity_bps) {
      res.stop_reason = StopReason::kPrecision;
      break;
    }
  }
  return out;
}

}  // namespace lw
