#include "app/capacity_run.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "app/path_checks.hpp"
#include "app/session.hpp"
#include "estimate/capacity.hpp"
#include "estimate/stats.hpp"
#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"
#include "report/writers.hpp"
#include "send/packet_builder.hpp"

namespace lw {

namespace {

constexpr int kSizingLoadPackets = 16;
constexpr int kMinLoadPackets = 8;

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

// Everything the trains of one configuration (packet and train size) gave.
struct Samples {
  std::vector<double> disp[2];    // kept reply dispersions: 0 = short, 1 = long trains
  double group_bits[2] = {0, 0};  // bits after the head marker, per length
  std::vector<double> kept;       // per-train capacity samples (both lengths)
  std::vector<double> kept_by_group[2];
  std::vector<double> uncompressed;  // reply rates of trains the path did not compress
  std::map<std::string, int> rejected;
  std::vector<double> left_ratio;  // left dispersion / reply dispersion, kept trains

  void clear() { *this = Samples{}; }
};

void apply_estimate(CapacityResult& res, const CapacityEstimate& e) {
  res.valid = e.valid;
  res.capacity_bps = e.capacity_bps;
  res.low_bps = e.low_bps;
  res.high_bps = e.high_bps;
  res.kde_bandwidth_bps = e.kde_bandwidth_bps;
}

// The final estimate from the samples, with the warnings that qualify it.
void conclude(CapacityResult& res, const Samples& sm, bool two_lengths,
              const CapacityEstimate& est, double precision) {
  res.trains_used = static_cast<int>(sm.kept.size());
  const CapacityEstimate per_train = aggregate_capacity(sm.kept);
  if (!sm.kept.empty()) res.per_train_capacity_bps = per_train.capacity_bps;
  if (est.valid && two_lengths && sm.kept.size() >= 4 &&
      prefer_per_train(est, per_train, precision)) {
    apply_estimate(res, per_train);
    res.warnings.push_back(
        {"slope_too_noisy", "the two-length slope was too noisy (" + format_rate(est.capacity_bps) +
                                ", 95% interval " + format_rate(est.low_bps) + " to " +
                                format_rate(est.high_bps) +
                                "); reported: the per-train estimate, which may include a small "
                                "fixed offset"});
  } else if (est.valid) {
    apply_estimate(res, est);
  } else if (!sm.uncompressed.empty() && sm.kept.empty()) {
    // Everything we sent came back at our own sending rate: the path is at
    // least this fast, and we cannot say more.
    CapacityEstimate lb;
    lb.valid = true;
    lb.capacity_bps = lb.low_bps = lb.high_bps =
        *std::max_element(sm.uncompressed.begin(), sm.uncompressed.end());
    apply_estimate(res, lb);
    res.lower_bound = true;
    res.warnings.push_back({"capacity_lower_bound",
                            "the path carried every train as fast as we could send it; the "
                            "capacity is at least this and possibly more"});
  } else if (!sm.kept.empty()) {
    // Only one train length survived: fall back to the per-train estimate.
    apply_estimate(res, aggregate_capacity(sm.kept));
    res.warnings.push_back({"single_length_estimate",
                            "too few trains of one of the two lengths survived; the estimate "
                            "includes the fixed head/tail offset"});
  }
  if (!sm.uncompressed.empty() && est.valid) {
    res.warnings.push_back(
        {"trains_not_compressed", std::to_string(sm.uncompressed.size()) +
                                      " train(s) were not sent faster than the path and were "
                                      "not used"});
  }
  if (const auto it = sm.rejected.find("send_stall"); it != sm.rejected.end()) {
    res.warnings.push_back(
        {"send_stalls", std::to_string(it->second) +
                            " train(s) left this host so late that the bottleneck could have run "
                            "dry (the CPU was busy or the process descheduled) and were not used"});
  }
  if (!sm.rejected.empty()) {
    std::ostringstream m;
    int total = 0;
    for (const auto& [k, v] : sm.rejected) {
      m << (total ? ", " : "") << v << " " << k;
      total += v;
    }
    res.warnings.push_back(
        {"trains_rejected", std::to_string(total) + " train(s) rejected (" + m.str() + ")"});
  }
  if (!res.valid && res.stop_reason != "interrupted") {
    res.warnings.push_back({"no_estimate", "no train gave a usable sample"});
  }
  if (two_lengths && sm.kept_by_group[0].size() >= 2 && sm.kept_by_group[1].size() >= 2 &&
      median(sm.kept_by_group[1]) > 1.1 * median(sm.kept_by_group[0])) {
    // Long trains carried more per second than short ones by far more than a
    // fixed offset explains: load packets were probably lost inside the
    // network (which shortens a train unseen). Trust the short trains only.
    apply_estimate(res, aggregate_capacity(sm.kept_by_group[0]));
    res.warnings.push_back({"load_loss_suspected",
                            "long trains looked much faster than short ones (lost load packets "
                            "shorten a train unseen); the estimate uses the short trains only"});
  }
  if (sm.left_ratio.size() >= 2 && median(sm.left_ratio) > 0.9) {
    res.warnings.push_back(
        {"local_bottleneck", "the trains were already spread to this rate when they left " +
                                 res.interface +
                                 ": the narrow link is this host's own interface or its qdisc"});
  }
}

// The smallest next-hop MTU in ICMP "fragmentation needed" replies, 0 if none.
int reported_path_mtu(const TrainOutcome& o) {
  int mtu = 0;
  for (const auto& p : o.probes) {
    if (p.kind == ReplyKind::kIcmp && p.icmp_type == 3 && p.icmp_code == 4 && p.icmp_mtu >= 68) {
      mtu = mtu == 0 ? p.icmp_mtu : std::min<int>(mtu, p.icmp_mtu);
    }
  }
  return mtu;
}

}  // namespace

nlohmann::json params_json(const Config& c) {
  return {{"interface", c.interface},
          {"source", c.source},
          {"port", c.port},
          {"source_port", c.sport},
          {"packet_size", c.packet_size},
          {"load_packets", c.load_packets},
          {"markers", c.markers},
          {"drain_packets", c.drain_packets},
          {"train_dispersion_s", c.target_dispersion_s},
          {"max_load_packets", c.max_load_packets},
          {"length_ratio", c.length_ratio},
          {"min_trains", c.min_trains},
          {"max_trains", c.max_trains},
          {"precision", c.precision},
          {"max_load", c.max_load},
          {"max_time_s", c.max_time_s},
          {"max_bytes", c.max_bytes},
          {"max_rate_bps", c.max_rate_bps},
          {"max_replies_per_s", c.max_replies},
          {"discovery_tries", c.discovery_tries},
          {"reply_timeout_s", c.reply_timeout_s}};
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
  int L = ss.packet_size;
  res.params["packet_size"] = L;
  Prober& prober = *ss.prober;
  res.params["privileges"] = prober.privileges().to_json();
  SeqAllocator& seqs = ss.seqs;
  const FlowId flow = ss.flow;
  const DiscoveryResult& disc = ss.disc;

  const CapacityFilter filter;
  const bool auto_size = c.load_packets == 0;
  int n = auto_size ? kSizingLoadPackets : c.load_packets;
  bool sized = !auto_size;
  const bool two_lengths = c.length_ratio > 1;
  Samples sm;
  std::vector<ReplyStamp> stamps;  // TTL and IP ID of every marker reply
  int consecutive_silent = 0;
  int measured = 0;  // trains after sizing
  int sizing_trains = 0;
  int long_losses = 0;  // consecutive long trains with a lost marker reply
  // Forget every sample (after the train size or packet size changed).
  auto restart = [&] {
    sm.clear();
    measured = 0;
    long_losses = 0;
  };
  const Nanos reply_wait = lw::reply_wait(ss, c);
  res.stop_reason = "max_trains";
  Nanos next_start = mono_now();
  double best_rate = 0;  // highest per-train rate seen: a bound for idle budgeting
  CapacityEstimate est;
  double offset_s = 0;
  auto update_estimate = [&] {
    if (two_lengths) {
      const SlopeEstimate se =
          estimate_capacity_slope(sm.disp[0], sm.group_bits[0], sm.disp[1], sm.group_bits[1]);
      est = se.capacity;
      offset_s = se.offset_s;
    } else {
      est = aggregate_capacity(sm.kept);
    }
  };

  for (int i = 0; i < c.max_trains; ++i) {
    if (stop.load()) {
      res.stop_reason = "interrupted";
      break;
    }
    const int group = sized && two_lengths ? measured % 2 : 0;
    const int n_train = group == 1 ? static_cast<int>(std::lround(n * c.length_ratio)) : n;
    const Train train = make_capacity_train(train_params(c, flow, n_train, L), i, seqs);
    if (prober.bytes_sent() + train.total_bytes() > c.max_bytes) {
      res.stop_reason = "max_bytes";
      break;
    }
    while (mono_now() < next_start && !stop.load()) sleep_until(next_start);
    if (stop.load()) {
      res.stop_reason = "interrupted";
      break;
    }
    if (mono_now() + reply_wait > t_cap) {
      res.stop_reason = "max_time";
      break;
    }
    // Busy-wait while the replies are due: about the train's time at the
    // bottleneck plus the RTT, bounded.
    const double expect_s =
        8.0 * static_cast<double>(train.total_bytes()) / (est.valid ? est.capacity_bps : 1e6) +
        2 * disc.rtt_s;
    const Nanos busy = std::min<Nanos>(from_seconds(1.5 * expect_s) + 2 * kMs, 50 * kMs);
    const GovernedRun governed = run_train(ss, c, train, train.markers, reply_wait, t_cap, false, busy);
    const TrainRun& run = governed.run;
    // The target's reply limit, not the path, took this train's replies.
    if (governed.replies_limited) long_losses = 0;
    ++res.trains_sent;
    add_reply_stamps(train, run.outcome, stamps);
    const CapacitySample s = evaluate_capacity_train(timing_of(train, run.outcome), filter);

    TrainRecord rec;
    rec.train = i;
    rec.load_packets = n_train;
    rec.verdict = verdict_name(s.verdict);
    rec.capacity_bps = s.capacity_bps;
    rec.offered_bps = s.offered_bps;
    rec.reply_dispersion_s = s.reply_dispersion_s;
    rec.send_dispersion_s = s.send_dispersion_s;
    rec.max_send_lag_s = s.max_send_lag_s;
    rec.left_dispersion_s = s.left_dispersion_s;
    if (s.kept() && s.left_dispersion_s > 0) {
      sm.left_ratio.push_back(s.left_dispersion_s / s.reply_dispersion_s);
    }

    // A router with a smaller MTU dropped our DF load and said so: shrink the
    // packets to the path MTU and start over with the sizing train.
    const int path_mtu = reported_path_mtu(run.outcome);
    if (path_mtu > 0 && path_mtu < L) {
      res.warnings.push_back(
          {"path_mtu", "a router reported a path MTU of " + std::to_string(path_mtu) +
                           "; load packets shrunk from " + std::to_string(L) + " bytes"});
      L = std::max(path_mtu, 64);
      res.params["packet_size"] = L;
      restart();
      sized = !auto_size;
      sizing_trains = 0;
      if (auto_size) n = kSizingLoadPackets;
      rec.verdict = "path_mtu";
      res.trains.push_back(rec);
      continue;
    }

    consecutive_silent = run.outcome.markers_lost == static_cast<int>(train.markers.size())
                             ? consecutive_silent + 1
                             : 0;
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
      rec.verdict = "sizing";
    } else {
      ++measured;
      if (group == 1) long_losses = s.verdict == SampleVerdict::kLostReply ? long_losses + 1 : 0;
      if (s.kept()) {
        sm.kept.push_back(s.capacity_bps);
        sm.kept_by_group[group].push_back(s.capacity_bps);
        sm.disp[group].push_back(s.reply_dispersion_s);
        sm.group_bits[group] = s.capacity_bps * s.reply_dispersion_s;
      } else if (s.verdict == SampleVerdict::kNotCompressed) {
        // The path carried what we offered: a lower bound no higher than our
        // own sending rate (reply timing noise can put the reply rate above it).
        sm.uncompressed.push_back(
            s.offered_bps > 0 ? std::min(s.capacity_bps, s.offered_bps) : s.capacity_bps);
      } else {
        ++sm.rejected[rec.verdict];
      }
    }
    if (long_losses >= 2 && n > kMinLoadPackets) {
      // Long trains keep losing their tail: a queue on the path cannot hold
      // them. Halve the trains and start over.
      n = std::max(kMinLoadPackets, n / 2);
      restart();
      res.warnings.push_back({"trains_shortened",
                              "long trains lost their tail reply repeatedly; trains shortened to " +
                                  std::to_string(n) + " load packets"});
    }
    res.trains.push_back(rec);
    if (c.verbose) {
      std::fprintf(stderr, "train %d: N=%d %s C=%.4g disp=%.6f\n", i, n_train, rec.verdict.c_str(),
                   s.capacity_bps, s.reply_dispersion_s);
    }

    // Idle so the average probing rate stays under max_load of the capacity and
    // the bottleneck queue drains: at least max(dispersion/max_load, 2·N·L/C).
    // The rate to budget with: the current estimate, else the best sample so
    // far. With none (every reply lost), the time the train took to leave us
    // stands in: conservative, since the path is no faster than it showed.
    if (s.capacity_bps > 0) best_rate = std::max(best_rate, s.capacity_bps);
    const double budget_rate = est.valid ? std::min(est.capacity_bps, 2 * best_rate) : best_rate;
    const double train_bits = 8.0 * static_cast<double>(train.total_bytes());
    const double train_time =
        budget_rate > 0 ? train_bits / budget_rate
                        : std::max(s.send_dispersion_s, to_seconds(run.end_mono - run.start_mono));
    const double idle = std::max(train_time / c.max_load,
                                 budget_rate > 0 ? 2.0 * n_train * L * 8.0 / budget_rate : 0.0);
    next_start = std::max(run.end_mono, run.start_mono + from_seconds(idle));
    if (next_start + reply_wait > t_cap) {
      res.stop_reason = "max_time";
      break;
    }

    update_estimate();
    const bool enough =
        two_lengths ? static_cast<int>(sm.disp[0].size() + sm.disp[1].size()) >= c.min_trains &&
                          sm.disp[0].size() >= 2 && sm.disp[1].size() >= 2
                    : static_cast<int>(sm.kept.size()) >= c.min_trains;
    if (enough && est.valid && (est.high_bps - est.low_bps) / 2 <= c.precision * est.capacity_bps) {
      res.stop_reason = "precision";
      break;
    }
  }

  update_estimate();
  res.dispersion_offset_s = offset_s;
  conclude(res, sm, two_lengths, est, c.precision);
  take_reply_warnings(ss, res.warnings);
  if (res.lower_bound && res.capacity_bps >= c.max_rate_bps / 1.15) {
    res.warnings.push_back(
        {"max_rate_limited", "trains were paced at --max-rate " + format_rate(c.max_rate_bps) +
                                 "; the path may be faster: raise --max-rate to measure it"});
  }
  check_capacity_plausible(ss, c, stop, t_cap, stamps, res);
  const CaptureStats cs = prober.capture_stats();
  if (cs.dropped > 0) {
    res.warnings.push_back(
        {"capture_drops", std::to_string(cs.dropped) + " packets dropped by the capture buffer"});
  }
  res.probe_packets = prober.packets_sent();
  res.probe_bytes = prober.bytes_sent();
  res.elapsed_s = to_seconds(mono_now() - t_begin);
  ss.packet_size = L;  // a path-MTU shrink holds for later phases too
  return res;
}

nlohmann::json plan_packets_json(const Train& t) {
  PacketBuilder builder;
  nlohmann::json packets = nlohmann::json::array();
  for (const Probe& p : t.probes) {
    std::string flags;
    if (p.flags & kSyn) flags += "S";
    if (p.flags & kRst) flags += "R";
    if (p.flags & kAck) flags += "A";
    packets.push_back({{"index", p.index},
                       {"role", role_name(p.role)},
                       {"flags", flags},
                       {"seq", p.seq},
                       {"ip_len", p.ip_len},
                       {"ttl", p.ttl},
                       {"offset_s", to_seconds(p.offset)},
                       {"wire_bytes", builder.build(p).size()}});
  }
  return packets;
}

nlohmann::json plan_header(const Config& c, std::uint32_t* dst, Route* route,
                           std::vector<Warning>* warnings) {
  *dst = checked_target(c);
  nlohmann::json plan;
  plan["type"] = "plan";
  plan["command"] = c.command;
  plan["target"] = c.target;
  plan["target_addr"] = format_ipv4(*dst);
  try {
    *route = find_route(*dst, c.interface, c.source);
  } catch (const Error& e) {
    warnings->push_back({"no_route", e.what()});
    route->interface = c.interface;
  }
  return plan;
}

nlohmann::json plan_capacity(const Config& c) {
  std::uint32_t dst = 0;
  Route route;
  std::vector<Warning> warnings;
  nlohmann::json plan = plan_header(c, &dst, &route, &warnings);
  const int L = effective_packet_size(c, route, warnings);
  const int n = c.load_packets > 0 ? c.load_packets : kSizingLoadPackets;
  FlowId flow{route.source, dst, static_cast<std::uint16_t>(c.sport),
              static_cast<std::uint16_t>(c.port > 0 ? c.port : default_candidate_ports()[0])};
  SeqAllocator seqs(1000);
  const Train t = make_capacity_train(train_params(c, flow, n, L), 0, seqs);
  const nlohmann::json packets = plan_packets_json(t);
  plan["params"] = params_json(c);
  plan["params"]["packet_size"] = L;
  plan["source"] = format_ipv4(route.source);
  plan["interface"] = route.interface;
  plan["first_train"] = {{"load_packets", n}, {"bytes", t.total_bytes()}, {"packets", packets}};
  plan["schedule"] = {
      {"discovery",
       "SYNs to closed-port candidates, up to " + std::to_string(c.discovery_tries) + " tries"},
      {"sizing", c.load_packets > 0
                     ? "fixed load packets per train"
                     : "first train sizes the rest: N = ceil(train_dispersion * C / (8 L)), "
                       "clamped to [8, max_load_packets]"},
      {"idle", "after each train: max(train time at C / max_load, 2 N L / C)"},
      {"checks", "after discovery: SYNs with TTL h and h+1 (h = hop count of the reply; "
                 "middlebox check); if the capacity is at our own sending rate: up to 8 trains "
                 "of 7 full-size SYNs (dropped-load check)"},
      {"stop", "precision reached after min_trains, or max_trains / max_time / max_bytes"}};
  plan["caps"] = {{"max_trains", c.max_trains},
                  {"max_time_s", c.max_time_s},
                  {"max_bytes", c.max_bytes},
                  {"max_rate_bps", c.max_rate_bps},
                  {"worst_case_bytes",
                   std::min<std::uint64_t>(c.max_bytes, static_cast<std::uint64_t>(c.max_trains) *
                                                            (c.max_load_packets + 5) * L)}};
  nlohmann::json w = nlohmann::json::array();
  for (const auto& x : warnings) w.push_back({{"code", x.code}, {"message", x.message}});
  plan["warnings"] = w;
  return plan;
}

std::string plan_text(const nlohmann::json& plan) {
  std::ostringstream o;
  o << "dry run: linkwidth " << plan["command"].get<std::string>() << " "
    << plan["target"].get<std::string>() << " (" << plan["target_addr"].get<std::string>()
    << ") from " << plan["source"].get<std::string>() << " via "
    << plan["interface"].get<std::string>() << "; nothing is sent\n";
  o << "first train (" << plan["first_train"]["load_packets"].get<int>() << " load packets, "
    << plan["first_train"]["bytes"].get<std::uint64_t>() << " bytes):\n";
  o << "  idx role    flags seq         ip_len ttl offset_us\n";
  char buf[160];
  for (const auto& p : plan["first_train"]["packets"]) {
    std::snprintf(buf, sizeof buf, "  %3d %-7s %-5s %-11u %6d %3d %9.1f\n", p["index"].get<int>(),
                  p["role"].get<std::string>().c_str(), p["flags"].get<std::string>().c_str(),
                  p["seq"].get<unsigned>(), p["ip_len"].get<int>(), p["ttl"].get<int>(),
                  p["offset_s"].get<double>() * 1e6);
    o << buf;
  }
  for (const auto& [k, v] : plan["schedule"].items())
    o << k << ": " << v.get<std::string>() << "\n";
  o << "caps: " << plan["caps"].dump() << "\n";
  for (const auto& w : plan["warnings"])
    o << "warning: " << w["message"].get<std::string>() << "\n";
  return o.str();
}

}  // namespace lw
