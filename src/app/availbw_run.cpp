#include "app/availbw_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/capacity_run.hpp"
#include "app/session.hpp"
#include "estimate/availbw.hpp"
#include "estimate/capacity.hpp"
#include "estimate/stats.hpp"
#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"

namespace lw {

namespace {

constexpr int kMinCalibrationUsable = 3;
constexpr int kLostFleetsToStop = 3;

// Sends trains with the budget checks, the reply wait and the idle rule every
// avail-bw train shares. run() returns false (stop_reason set) when a cap,
// the time budget or a signal ends the run before the train is sent.
class PacedRunner {
 public:
  PacedRunner(Session& s, const Config& c, const std::atomic<bool>& stop, double capacity_bps,
              Nanos t_cap, AvailbwResult& res)
      : s_(s), c_(c), stop_(stop), capacity_(capacity_bps), t_cap_(t_cap), res_(res) {
    next_start_ = mono_now();
  }

  bool run(const Train& train, PacedSample* out, Nanos min_idle = 0) {
    if (stop_.load()) return stopped("interrupted");
    if (s_.prober->bytes_sent() + train.total_bytes() > c_.max_bytes) return stopped("max_bytes");
    const Nanos span = train.probes.back().offset;
    const Nanos wait = reply_wait(s_, c_);
    if (std::max(next_start_, mono_now()) + span + wait > t_cap_) return stopped("max_time");
    while (mono_now() < next_start_ && !stop_.load()) sleep_until(next_start_);
    if (stop_.load()) return stopped("interrupted");
    // Busy-poll while the replies are due: the train's span at the path's
    // capacity plus the round trip, bounded.
    const double expect_s = to_seconds(span) + 2 * s_.disc.rtt_s +
                            8.0 * static_cast<double>(train.total_bytes()) / capacity_;
    const Nanos busy = std::min<Nanos>(from_seconds(expect_s) + 2 * kMs, 50 * kMs);
    const TrainRun run = s_.prober->run(train, train.markers, wait, false, busy);
    ++res_.trains_sent;
    *out = evaluate_paced_train(timing_of(train, run.outcome));
    // Idle: the average probing rate stays under max_load of the train's own
    // rate (pathload's rule: idle >= span·(1/max_load - 1)), and the
    // bottleneck queue the train may have built drains (>= 2·N·L/C).
    double load_bits = 0;
    for (const auto& p : train.probes) load_bits += 8.0 * p.ip_len;
    const double sent_span = std::max(out->send_span_s, to_seconds(span));
    const double idle = std::max({sent_span * (1.0 / c_.max_load - 1.0), 2.0 * load_bits / capacity_,
                                  to_seconds(min_idle)});
    next_start_ = std::max(run.end_mono, run.start_mono + from_seconds(sent_span + idle));
    return true;
  }

  bool stopped(const char* why) {
    res_.stop_reason = why;
    return false;
  }

 private:
  Session& s_;
  const Config& c_;
  const std::atomic<bool>& stop_;
  double capacity_;
  Nanos t_cap_;
  AvailbwResult& res_;
  Nanos next_start_ = 0;
};

PacedTrainRecord record_of(const Train& t, const PacedSample& s, int packet_size,
                           const std::string& verdict) {
  PacedTrainRecord r;
  for (const auto& p : t.probes) r.load_packets += p.role == Role::kLoad ? 1 : 0;
  r.packet_size = packet_size;
  r.offered_bps = s.offered_bps;
  r.received_bps = s.received_bps;
  r.ratio = s.ratio;
  r.ratio_head_tail = s.ratio_head_tail;
  r.pdt = s.pdt;
  r.markers = s.markers;
  r.replies = s.replies;
  r.verdict = verdict;
  return r;
}

// Median of the trains' numbers that have them (0 if none).
void summarize(RateRecord& rr) {
  std::vector<double> off, rec, rat;
  for (const auto& t : rr.trains) {
    if (t.offered_bps > 0) off.push_back(t.offered_bps);
    if (t.received_bps > 0) rec.push_back(t.received_bps);
    if (t.ratio > 0) rat.push_back(t.ratio);
  }
  rr.offered_bps = off.empty() ? 0 : median(off);
  rr.received_bps = rec.empty() ? 0 : median(rec);
  rr.ratio = rat.empty() ? 0 : median(rat);
}

// The default method's train at rate O: MTU-sized load (the knee then sits at
// the avail-bw as IP-layer bits of full-size packets count it), at least
// train_time_s and min_train_packets long.
CapacityTrainParams search_train(const Config& c, const FlowId& flow, int L, double rate,
                                 double shorten) {
  CapacityTrainParams p;
  p.flow = flow;
  p.packet_size = static_cast<std::uint16_t>(L);
  const double n = std::ceil(c.train_time_s * rate / (8.0 * L));
  const int n_min = std::max(2, static_cast<int>(std::lround(c.min_train_packets * shorten)));
  p.load_packets = static_cast<int>(
      std::clamp(n * shorten, static_cast<double>(n_min), static_cast<double>(c.max_load_packets)));
  p.gap = gap_for_rate(rate, L);
  // No drain packets: they queue ahead of the head at a busy bottleneck and
  // would bias the first segment; the ratio starts at the first marker after
  // the head instead, at least two load packets in (past a small token
  // bucket's burst).
  p.drain_packets = 0;
  p.markers = std::min(c.avail_markers, 1 + p.load_packets / 2);
  return p;
}

void run_fleet_method(PacedRunner& runner, Session& ss, const Config& c, double C,
                      AvailbwResult& res, Nanos t0) {
  const int L = ss.packet_size;
  const double omega = res.resolution_bps;
  // Calibration: the time structure of a search train at C/2 (same gap and
  // length, so the same absolute timing noise) with packets shrunk to offer
  // calibration_rate·C, far below any avail-bw worth measuring.
  const CapacityTrainParams mid = search_train(c, ss.flow, L, C / 2, 1.0);
  CapacityTrainParams cal = mid;
  cal.packet_size = static_cast<std::uint16_t>(
      std::clamp(std::lround(L * c.calibration_rate / 0.5), 64L, static_cast<long>(L)));
  RateRecord calib;
  calib.phase = "calibration";
  calib.rate_bps = 8.0 * cal.packet_size / to_seconds(cal.gap);
  calib.verdict = "calibration";
  calib.at_s = to_seconds(mono_now() - t0);
  std::vector<double> cal_ratios;
  for (int i = 0; i < c.calibration_trains; ++i) {
    const Train t = make_capacity_train(cal, res.trains_sent, ss.seqs);
    PacedSample s;
    if (!runner.run(t, &s)) break;
    const bool ok = s.usable && !s.lost;
    if (ok) cal_ratios.push_back(s.ratio);
    calib.trains.push_back(record_of(t, s, cal.packet_size, ok ? "calibration" : "lost"));
    if (c.verbose) {
      std::fprintf(stderr, "calibration %d: ratio %.5f ht %.5f pdt %.2f replies %d/%d\n", i,
                   s.ratio, s.ratio_head_tail, s.pdt, s.replies, s.markers);
    }
  }
  summarize(calib);
  res.rates.push_back(calib);
  if (!res.stop_reason.empty()) return;
  if (static_cast<int>(cal_ratios.size()) < kMinCalibrationUsable) {
    throw Error("availbw",
                "the target answered too few markers of the low-rate calibration trains (" +
                    std::to_string(cal_ratios.size()) + " of " +
                    std::to_string(c.calibration_trains) + " usable)",
                "calibration_failed");
  }
  const NoiseModel noise = calibrate_noise(cal_ratios);
  res.noise_baseline = noise.baseline;
  res.noise_threshold = noise.threshold;
  if (noise.baseline > 1.05) {
    res.warnings.push_back({"calibration_disturbed",
                            "even trains at " + std::to_string(c.calibration_rate) +
                                " of the capacity came back spread out: the path may be "
                                "saturated; the avail-bw may be below the lowest rate tested"});
  }

  FleetSearchParams fp;
  fp.capacity_bps = C;
  fp.resolution_bps = omega;
  FleetSearch search(fp);
  double shorten = 1.0;
  res.stop_reason.clear();

  // One fleet at `rate`: K trains, stopped early once the verdict is settled.
  // Returns false when a cap ended the run.
  auto fleet = [&](double rate, const char* phase, FleetVerdict* fv, int* lost) {
    const bool early_stop = std::string(phase) == "search";
    RateRecord rr;
    rr.phase = phase;
    rr.rate_bps = rate;
    rr.at_s = to_seconds(mono_now() - t0);
    const CapacityTrainParams tp = search_train(c, ss.flow, L, rate, shorten);
    std::vector<TrainVerdict> verdicts;
    *lost = 0;
    bool settled = false;
    for (int k = 0; k < c.fleet_trains && !settled; ++k) {
      const Train t = make_capacity_train(tp, res.trains_sent, ss.seqs);
      PacedSample s;
      if (!runner.run(t, &s)) break;
      std::string v;
      if (s.lost) {
        ++*lost;
        verdicts.push_back(TrainVerdict::kAbove);  // loss inside a train counts as above
        v = "lost";
      } else if (!s.usable) {
        v = "unusable";
      } else {
        verdicts.push_back(classify_train(s.ratio, false, noise));
        v = train_verdict_name(verdicts.back());
      }
      rr.trains.push_back(record_of(t, s, L, v));
      // Response fleets run whole: their median ratio is the measurement.
      settled = early_stop && fleet_settled(verdicts, c.fleet_trains, c.fleet_fraction, fv);
      if (c.verbose) {
        std::fprintf(stderr, "%s %.4g N=%d: ratio %.5f ht %.5f pdt %.2f %s\n", phase, rate,
                     tp.load_packets, s.ratio, s.ratio_head_tail, s.pdt, v.c_str());
      }
    }
    summarize(rr);
    // Cut short by a cap, or unusable trains: decide on what came back.
    if (!settled) *fv = decide_fleet(verdicts, c.fleet_fraction);
    rr.verdict = fleet_verdict_name(*fv);
    const bool whole_fleet_lost = !rr.trains.empty() && *lost == static_cast<int>(rr.trains.size());
    if (!whole_fleet_lost) *lost = 0;
    res.rates.push_back(std::move(rr));
    return res.stop_reason.empty();
  };

  int lost_fleets = 0;
  for (int f = 0; f < c.max_fleets && !search.done(); ++f) {
    const double rate = search.next_rate();
    FleetVerdict fv = FleetVerdict::kGrey;
    int lost = 0;
    if (!fleet(rate, "search", &fv, &lost)) break;
    const RateRecord& rr = res.rates.back();
    // The bracket holds the rates we really offered (the markers add a little
    // to the rate asked for).
    const double offered = rr.offered_bps > 0 ? rr.offered_bps : rate;
    search.observe(offered, rr.ratio, fv);
    // Repeated loss: shorten the trains; if that does not help, give up.
    if (lost > 0) {
      if (++lost_fleets >= kLostFleetsToStop) {
        res.stop_reason = "loss";
        res.warnings.push_back({"repeated_loss",
                                "every train of " + std::to_string(kLostFleetsToStop) +
                                    " fleets in a row lost marker replies, even shortened"});
        break;
      }
      shorten = std::max(0.25, shorten / 2);
      res.warnings.push_back({"trains_shortened",
                              "a whole fleet lost marker replies; trains shortened"});
    } else {
      lost_fleets = 0;
    }
  }
  std::vector<RatePoint> response;
  if (res.stop_reason.empty()) {
    // Response fleets well above the bracket, where the tight link stays busy
    // through each train (see estimate_availbw): halfway to C and at C.
    if (search.high() < 0.9 * C) {
      for (const double top : {(search.high() + C) / 2, C}) {
        FleetVerdict fv = FleetVerdict::kGrey;
        int lost = 0;
        if (!fleet(top, "response", &fv, &lost)) break;
        const RateRecord& rr = res.rates.back();
        if (lost == 0) response.push_back({rr.offered_bps > 0 ? rr.offered_bps : top, rr.ratio, fv});
      }
    }
    // A cap that cuts the response fleets short leaves the search's reason.
    if (res.stop_reason.empty() || search.done()) {
      res.stop_reason = search.done() ? "resolution" : "max_fleets";
    }
  }

  const AvailbwEstimate est = estimate_availbw(response, noise, search.low(), search.high(), C);
  res.low_bps = est.low_bps;
  res.high_bps = est.high_bps;
  res.availbw_bps = est.availbw_bps;
  res.response_points = est.points;
  res.tight_link_capacity_bps = est.tight_capacity_bps;
  res.valid = !search.history().empty();
  if (c.verbose) {
    std::fprintf(stderr, "bracket [%.4g, %.4g] line %s -> %.4g, Ct %.4g\n", search.low(),
                 search.high(), est.basis.c_str(), est.availbw_bps, est.tight_capacity_bps);
  }
}

void run_linkwidth_method(PacedRunner& runner, Session& ss, const Config& c, double C,
                          AvailbwResult& res, Nanos t0) {
  LinkWidthSearchParams p;
  p.capacity_bps = C;
  p.theta_bps = res.resolution_bps;
  p.epsilon = c.epsilon;
  LinkWidthSearch search(p);
  const int L = ss.packet_size;
  int steps = 0;
  while (!search.done() && steps++ < c.max_fleets) {
    const double rate = search.next_rate();
    const PairGaps g = pair_gaps_for_rate(rate, c.pairs, L, from_seconds(c.pair_gap_s));
    PairTrainParams tp;
    tp.flow = ss.flow;
    tp.pairs = c.pairs;
    tp.packet_size = static_cast<std::uint16_t>(L);
    tp.intra_gap = g.intra_gap;
    tp.inter_gap = g.inter_gap;
    const Train t = make_pair_train(tp, res.trains_sent, ss.seqs);
    RateRecord rr;
    rr.phase = "search";
    rr.rate_bps = rate;
    rr.at_s = to_seconds(mono_now() - t0);
    PacedSample s;
    if (!runner.run(t, &s, from_seconds(c.train_delay_s))) break;
    // The paper's ratio is head to tail; a lost marker gives none, and we
    // take it as "above" (step 5).
    const double ratio = s.lost || s.ratio_head_tail <= 0 ? 2.0 : s.ratio_head_tail;
    search.observe(ratio);
    const bool within = ratio >= 1.0 - c.epsilon && ratio <= 1.0;
    rr.trains.push_back(record_of(t, s, L, s.lost ? "lost" : within ? "below" : "above"));
    summarize(rr);
    rr.ratio = s.ratio_head_tail;
    rr.verdict = within ? "below" : "above";
    if (!g.reachable) {
      res.warnings.push_back({"rate_unreachable", "the fixed inter-pair gap is too long to offer " +
                                                      std::to_string(rate) + " bit/s"});
    }
    res.rates.push_back(rr);
    if (c.verbose) {
      std::fprintf(stderr, "linkwidth rate %.4g: ratio %.5f %s\n", rate, ratio,
                   rr.verdict.c_str());
    }
  }
  if (res.stop_reason.empty()) res.stop_reason = search.done() ? "resolution" : "max_fleets";
  res.low_bps = search.low();
  res.high_bps = search.high();
  res.availbw_bps = search.estimate();
  res.valid = !res.rates.empty();
}

}  // namespace

AvailbwResult run_availbw_phase(Session& ss, const Config& c, const std::atomic<bool>& stop,
                                double capacity_bps, Nanos t_cap) {
  AvailbwResult res;
  res.method = c.method;
  res.search_capacity_bps = capacity_bps;
  const Nanos t0 = mono_now();
  const std::uint64_t bytes0 = ss.prober->bytes_sent();
  const std::uint64_t packets0 = ss.prober->packets_sent();
  res.resolution_bps = c.method == "linkwidth" && c.theta_bps > 0 ? c.theta_bps
                       : c.method == "linkwidth"                  ? c.theta * capacity_bps
                                                                  : c.resolution * capacity_bps;
  PacedRunner runner(ss, c, stop, capacity_bps, t_cap, res);
  if (c.method == "linkwidth") {
    run_linkwidth_method(runner, ss, c, capacity_bps, res, t0);
  } else {
    run_fleet_method(runner, ss, c, capacity_bps, res, t0);
  }
  res.probe_bytes = ss.prober->bytes_sent() - bytes0;
  res.probe_packets = ss.prober->packets_sent() - packets0;
  res.elapsed_s = to_seconds(mono_now() - t0);
  return res;
}

MeasureResult run_measure(const Config& c, const std::atomic<bool>& stop) {
  MeasureResult m;
  m.command = c.command;
  auto session = open_session(c, stop);
  const Nanos t_end = session->t_begin + from_seconds(c.max_time_s);
  double C = c.capacity_bps;
  if (C > 0) {
    m.capacity_given = true;
    describe_endpoints(*session, c, m.capacity);
    m.capacity.params = params_json(c);
    m.capacity.valid = true;
    m.capacity.capacity_bps = m.capacity.low_bps = m.capacity.high_bps = C;
    m.capacity.stop_reason = "given";
    m.capacity.warnings = session->warnings;
  } else {
    // The capacity phase gets at most half the budget; it usually needs ~1 s.
    m.capacity = run_capacity_phase(*session, c, stop,
                                    session->t_begin + from_seconds(c.max_time_s / 2));
    if (m.capacity.stop_reason == "interrupted") {
      m.availbw.stop_reason = "interrupted";
      return m;
    }
    if (!m.capacity.valid) {
      m.availbw.stop_reason = "no_capacity";
      m.availbw.warnings.push_back(
          {"no_capacity", "no capacity estimate, so no upper end for the avail-bw search"});
      return m;
    }
    C = m.capacity.capacity_bps;
    if (m.capacity.lower_bound) {
      m.availbw.warnings.push_back(
          {"capacity_lower_bound",
           "the capacity is only a lower bound (we could not send faster), so is the search's "
           "upper end"});
    }
  }
  const unsigned drops_before = session->prober->capture_stats().dropped;
  AvailbwResult a = run_availbw_phase(*session, c, stop, C, t_end);
  a.warnings.insert(a.warnings.begin(), m.availbw.warnings.begin(), m.availbw.warnings.end());
  m.availbw = std::move(a);
  const unsigned drops = session->prober->capture_stats().dropped - drops_before;
  if (drops > 0) {
    m.availbw.warnings.push_back({"capture_drops", std::to_string(drops) +
                                                       " packets dropped by the capture buffer "
                                                       "during the avail-bw search"});
  }
  return m;
}

}  // namespace lw
