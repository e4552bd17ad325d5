#include "app/plumbing/session.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "app/plumbing/path_checks.hpp"
#include "estimate/load_budget.hpp"
#include "linkwidth/error.hpp"
#include "plan/hops_plan.hpp"
#include "plan/target_marker.hpp"
#include "report/writers.hpp"

namespace lw {

IpAddr checked_target(const Config& c) {
  const IpAddr addr = resolve_target(c.target, c.family);
  std::string why = forbidden_target_reason(addr);
  if (why.empty()) why = local_target_reason(addr);
  if (!why.empty()) {
    throw Error("target", "refusing to probe " + format_ipv4(addr) + ": it is " + why,
                "forbidden_target", ExitCode::kUsage);
  }
  return addr;
}

int effective_packet_size(const Config& c, const Route& r, std::vector<Warning>& w) {
  if (c.packet_size <= r.mtu) return c.packet_size;
  w.push_back({WarningCode::kPacketSizeClamped,
               "packet size lowered from " + std::to_string(c.packet_size) + " to the MTU of " +
                   r.interface + " (" + std::to_string(r.mtu) + ")"});
  return r.mtu;
}

std::unique_ptr<Session> open_session(const Config& c, const std::atomic<bool>& stop,
                                      bool any_peer) {
  auto s = std::make_unique<Session>();
  s->t_begin = mono_now();
  s->dst = checked_target(c);
  s->route = find_route(s->dst, c.interface, c.source);
  s->packet_size = effective_packet_size(c, s->route, s->warnings);
  s->reserved = std::make_unique<PortReservation>(s->route.source, c.sport);
  s->prober = std::make_unique<Prober>(s->route, s->dst, s->reserved->port(), stop, c, any_peer);
  s->replies = ReplyGovernor(c.max_replies);
  std::random_device rd;
  s->seqs = SeqAllocator(static_cast<std::uint32_t>(rd()));
  s->flow = FlowId{s->route.source, s->dst, s->reserved->port(), 0};
  // IPv6: one nonzero 20-bit flow label for every probe of the run (ECMP
  // routers hash it with the addresses: a second label could be a second path).
  if (s->dst.is_v6()) s->flow.flow_label = 1u + static_cast<std::uint32_t>(rd()) % 0xfffffu;
  s->disc = discover_marker(*s->prober, s->flow, discovery_ports(c.port), c.discovery_tries,
                            from_seconds(c.reply_timeout_s), s->seqs);
  s->flow.dport = static_cast<std::uint16_t>(s->disc.port);
  s->flow.marker = s->disc.kind;  // every train planned for this flow uses it
  s->prober->set_rtt(from_seconds(s->disc.rtt_s));
  // Discovery's probes drew replies too (at least the last round's).
  s->replies.spend(s->dst, s->disc.replies_asked, mono_now());
  s->warnings.insert(s->warnings.end(), s->disc.warnings.begin(), s->disc.warnings.end());
  s->replier = check_replier(*s, c, s->warnings);
  return s;
}

void describe_endpoints(const Session& s, const Config& c, CapacityResult& r) {
  r.target = c.target;
  r.target_addr = format_scoped(s.dst);
  r.source = format_scoped(s.route.source);
  r.interface = s.route.interface;
  r.source_port = s.reserved->port();
  r.port = s.disc.port;
  r.marker_kind = s.disc.kind;
  r.rtt_s = s.disc.rtt_s;
  r.replier = s.replier;
}

Nanos reply_wait(const Session& s, const Config& c) {
  // 20 RTTs within [100 ms, --reply-timeout], but never under 3 RTTs: a fixed
  // cap near the path's RTT would cut off the replies of every train.
  const Nanos rtt = from_seconds(s.disc.rtt_s);
  return std::max(3 * rtt, std::min(from_seconds(c.reply_timeout_s),
                                    std::max<Nanos>(100 * kMs, 20 * rtt)));
}

Nanos loaded_reply_wait(Nanos wait, Nanos longest_rtt, Nanos timeout, Nanos room) {
  const Nanos loaded = std::min({2 * longest_rtt + 10 * kMs, timeout, room});
  return std::max(wait, loaded);
}

Nanos loaded_reply_wait(Session& s, const Config& c, Nanos wait, Nanos span, Nanos t_cap) {
  const Nanos w = loaded_reply_wait(wait, s.prober->longest_rtt(), from_seconds(c.reply_timeout_s),
                                    t_cap - (mono_now() + span));
  if (c.verbose && w > wait && w > s.wait_reported) {
    std::fprintf(stderr, "reply wait %.0f ms (longest reply %.1f ms, %d late)\n",
                 to_seconds(w) * 1e3, to_seconds(s.prober->longest_rtt()) * 1e3,
                 s.prober->late_replies());
    s.wait_reported = w;
  }
  return w;
}

namespace {

// Full-TTL SYNs draw an RST/ACK (or SYN/ACK) from the host they are addressed
// to; TTL-limited ones draw ICMP from routers, budgeted apart (hops).
constexpr int kFullTtl = 64;

bool asks_reply(const Probe& p) {
  return ((p.flags & kSyn) || p.is_bare_ack()) && !(p.flags & kRst) && p.ttl >= kFullTtl;
}

// Waits (stop-aware) until `asked` replies of every host fit the budget, then
// spends them. False if stopped or the wait would pass `t_cap`.
bool wait_for_budget(Session& s, const std::map<IpAddr, int>& asked, Nanos t_cap) {
  Nanos ready = mono_now();
  for (const auto& [host, n] : asked) ready = std::max(ready, s.replies.ready_at(host, n, ready));
  ready += s.start_jitter;
  s.start_jitter = 0;
  if (ready > t_cap) return false;
  while (mono_now() < ready && !s.prober->stopped()) sleep_until(ready);
  if (s.prober->stopped()) return false;
  const Nanos t = mono_now();
  for (const auto& [host, n] : asked) s.replies.spend(host, n, t);
  return true;
}

// Sends `trains` trains of `per_train` bare SYNs to the target, each after
// `idle` and within the reply budget; (asked, answered, first reply lost) per
// train. Stops early (fewer entries) when a cap or the clock cuts it short.
std::vector<ReplyGovernor::BurstCheck> bare_syn_trains(Session& s, const Config& c, int trains,
                                                       int per_train, Nanos idle,
                                                       Nanos reply_timeout, Nanos t_cap) {
  std::vector<ReplyGovernor::BurstCheck> out;
  const std::vector<IpAddr> to(per_train, s.dst);
  for (int k = 0; k < trains; ++k) {
    const Train t = make_addr_check(s.flow, to, 200 * kUs, -400 - k, s.seqs);
    if (s.prober->bytes_sent() + t.total_bytes() > c.max_bytes) break;
    const Nanos after = mono_now() + idle;
    if (after + reply_timeout > t_cap) break;
    while (mono_now() < after && !s.prober->stopped()) sleep_until(after);
    if (!wait_for_budget(s, {{s.dst, per_train}}, t_cap - reply_timeout)) break;
    const TrainRun run = s.prober->run(
        t, t.markers, loaded_reply_wait(s, c, reply_timeout, t.probes.back().offset, t_cap));
    ReplyGovernor::BurstCheck b;
    b.asked = per_train;
    for (int i : t.markers) b.answered += run.outcome.probes[i].reply != 0 ? 1 : 0;
    for (std::size_t i = 0; i < t.markers.size() && b.first_lost < 0; ++i) {
      if (run.outcome.probes[t.markers[i]].reply == 0) b.first_lost = static_cast<int>(i);
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace

GovernedRun run_train(Session& s, const Config& c, const Train& train,
                      const std::vector<int>& wait_for, Nanos reply_timeout, Nanos t_cap, bool any,
                      Nanos busy_wait, const std::function<void(const TrainRun&)>& after_run) {
  budget_train(s, train, t_cap);
  const Nanos span = train.probes.empty() ? 0 : train.probes.back().offset;
  TrainRun run = s.prober->run(train, wait_for,
                               loaded_reply_wait(s, c, reply_timeout, span, t_cap), any,
                               busy_wait);
  if (after_run) after_run(run);
  return account_train(s, c, train, std::move(run), reply_timeout, t_cap);
}

void budget_train(Session& s, const Train& train, Nanos t_cap) {
  std::map<IpAddr, int> asked;
  for (const Probe& p : train.probes) {
    if (asks_reply(p)) ++asked[p.dst];
  }
  // Past t_cap the caller's own checks stop the run; the budget wait is
  // bounded by it so that it cannot stretch a run beyond --max-time.
  wait_for_budget(s, asked, std::max(t_cap, mono_now()));
}

GovernedRun account_train(Session& s, const Config& c, const Train& train, TrainRun run,
                          Nanos reply_timeout, Nanos t_cap) {
  GovernedRun g;
  g.run = std::move(run);
  s.duplicate_replies += g.run.outcome.duplicate_replies;
  int n_asked = 0, n_answered = 0;
  for (std::size_t i = 0; i < train.probes.size(); ++i) {
    if (!asks_reply(train.probes[i])) continue;
    ++n_asked;
    n_answered += g.run.outcome.probes[i].reply != 0 ? 1 : 0;
  }
  if (!s.replies.record_train(n_asked, n_answered)) return g;

  const double start_rate = s.replies.rate_per_s();
  for (;;) {
    const auto checks = bare_syn_trains(s, c, ReplyGovernor::kCheckTrains,
                                        ReplyGovernor::kCheckMarkers, 0, reply_timeout, t_cap);
    if (static_cast<int>(checks.size()) < ReplyGovernor::kCheckTrains) return g;
    int a = 0, b = 0;
    for (const auto& x : checks) a += x.asked, b += x.answered;
    const double at = s.replies.rate_per_s();
    const ReplyGovernor::Step step = s.replies.on_check(a, b);
    if (c.verbose) {
      std::fprintf(stderr, "reply check at %.4g/s: %d of %d replies: %s\n", at, b, a,
                   step_name(step));
    }
    if (step == ReplyGovernor::Step::kCheckAgain) continue;
    char buf[64];
    const int k = s.replies.burst_check_size();
    if (k > 0 && step != ReplyGovernor::Step::kPathLoss) {
      // The rate is fine now; does the host answer k replies at once? Each
      // check after an idle long enough for a limiter at our rate to refill.
      const auto bursts = bare_syn_trains(s, c, 2, k, from_seconds(2.0 * k / s.replies.rate_per_s()),
                                          reply_timeout, t_cap);
      if (bursts.size() == 2 && s.replies.on_burst_check(bursts)) {
        g.replies_limited = true;
        s.reply_warnings.push_back(
            {WarningCode::kReplyBurstLimited,
             format_ipv4(s.dst) + " answered only " + std::to_string(s.replies.max_burst()) +
                 " of " + std::to_string(k) +
                 " SYNs sent at once, after an idle: it (or a firewall before it) limits its RST "
                 "replies in bursts; trains now ask at most " +
                 std::to_string(s.replies.max_burst()) + " replies of it"});
      }
      if (c.verbose) {
        std::fprintf(stderr, "reply burst check of %d: %d, %d answered\n", k,
                     bursts.size() > 0 ? bursts[0].answered : -1,
                     bursts.size() > 1 ? bursts[1].answered : -1);
      }
    }
    if (step == ReplyGovernor::Step::kLimited) {
      g.replies_limited = true;
      std::snprintf(buf, sizeof buf, "%.0f", s.replies.rate_per_s());
      const std::string clean = buf;
      std::snprintf(buf, sizeof buf, "%.0f", s.replies.lossy_rate_per_s());
      s.reply_warnings.push_back(
          {WarningCode::kReplyRateLimited,
           format_ipv4(s.dst) + " lost replies when asked for " + std::string(buf) +
               " per second and answered every one at " + clean +
               " per second: it (or a firewall before it) limits its RST replies; probing "
               "slowed to " +
               clean + " replies per second"});
    } else if (step == ReplyGovernor::Step::kPathLoss && !s.reply_loss_reported) {
      s.reply_loss_reported = true;
      char lowest[32];
      std::snprintf(buf, sizeof buf, "%.0f", start_rate);
      std::snprintf(lowest, sizeof lowest, "%.0f", at);
      s.reply_warnings.push_back(
          {WarningCode::kReplyLoss,
           "replies from " + format_ipv4(s.dst) + " went missing even without load (" +
               std::to_string(a - b) + " of " + std::to_string(a) +
               " in the last check of bare SYNs; checked at " + buf + " down to " + lowest +
               " replies per second): loss on the path or at the target, not a "
               "rate limit"});
    }
    return g;
  }
}

bool wait_for_reply_budget(Session& s, const IpAddr& host, int n, Nanos t_cap) {
  return wait_for_budget(s, {{host, n}}, t_cap);
}

Nanos load_ready(const Session& s, const Config& c, std::uint64_t next_bytes) {
  return ledger_ready_at(s.load, s.prober->bytes_sent(), next_bytes, c.max_load);
}

void begin_load_phase(Session& s) {
  s.load.t0 = mono_now();
  s.load.bytes0 = s.prober->bytes_sent();
}

void take_reply_warnings(Session& s, std::vector<Warning>& to) {
  if (s.duplicate_replies > s.duplicates_reported) {
    s.reply_warnings.push_back(
        {WarningCode::kDuplicateReplies,
         std::to_string(s.duplicate_replies - s.duplicates_reported) + " repl" +
             (s.duplicate_replies - s.duplicates_reported == 1 ? "y" : "ies") +
             " arrived more than once (the path or the target duplicates packets); the first "
             "copy of each was used"});
    s.duplicates_reported = s.duplicate_replies;
  }
  if (const int late = s.prober->late_replies(); late > s.late_reported) {
    char ms[64];
    std::snprintf(ms, sizeof ms, "%.0f ms (a round trip of %.1f ms at discovery)",
                  to_seconds(s.prober->longest_late_rtt()) * 1e3, s.disc.rtt_s * 1e3);
    s.reply_warnings.push_back(
        {WarningCode::kRepliesLate,
         std::to_string(late - s.late_reported) + " repl" +
             (late - s.late_reported == 1 ? "y" : "ies") +
             " came back after the wait for them, up to " + ms +
             " after their probe: queues on the path fill under load; later trains waited up to "
             "twice the longest reply time seen (within --reply-timeout), and the late replies "
             "counted as lost"});
    s.late_reported = late;
  }
  to.insert(to.end(), s.reply_warnings.begin(), s.reply_warnings.end());
  s.reply_warnings.clear();
}

PhaseStart phase_start(const Session& s) {
  return {mono_now(), s.prober->bytes_sent(), s.prober->packets_sent()};
}

std::vector<Warning> close_phase(Session& s, const PhaseStart& at, std::vector<Warning>& warnings,
                                 std::uint64_t* bytes, std::uint64_t* packets, double* elapsed_s) {
  std::vector<Warning> reply;
  take_reply_warnings(s, reply);
  warnings.insert(warnings.end(), reply.begin(), reply.end());
  *bytes = s.prober->bytes_sent() - at.bytes0;
  *packets = s.prober->packets_sent() - at.packets0;
  *elapsed_s = to_seconds(mono_now() - at.t0);
  return reply;
}

}  // namespace lw
