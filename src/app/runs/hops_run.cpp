#include "app/runs/hops_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/runs/capacity_run.hpp"
#include "app/runs/capacity_tally.hpp"
#include "app/plumbing/discovery.hpp"
#include "app/plumbing/net.hpp"
#include "app/plumbing/path_checks.hpp"
#include "app/plumbing/prober.hpp"
#include "app/plumbing/run_notes.hpp"
#include "app/plumbing/runner.hpp"
#include "app/plumbing/session.hpp"
#include "estimate/hops.hpp"
#include "estimate/load_budget.hpp"
#include "linkwidth/error.hpp"
#include "plan/hops_plan.hpp"
#include "plan/target_marker.hpp"
#include "report/hops_writers.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

// Sized trains are at least this long (capacity's floor, kMinLoadPackets, is lower).
constexpr int kHopsMinLoadPackets = 16;
constexpr Nanos kSweepSpacing = 200 * kUs;
// Slack on top of the modelled ICMP bucket: Linux counts tokens in jiffies.
constexpr Nanos kBudgetSlack = 30 * kMs;

struct PathHop {
  IpAddr addr;  // 0 = unknown
  bool tcp = false;        // answers RST/ACK to a SYN on its own address
  int icmp_ttl = 0;        // TTL of its time exceeded as received
};

// Did hop k's marker draw the reply its kind should draw?
Nanos reply_time(const ProbeOutcome& o, MarkerKind kind) {
  if (o.reply == 0) return 0;
  if (kind == MarkerKind::kTtl) {
    return o.kind == ReplyKind::kIcmp && o.icmp_kind == IcmpKind::kTimeExceeded ? o.reply : 0;
  }
  // kAddr: a router's closed port (RST/ACK); kTarget: whatever the run's marker kind draws.
  if (kind == MarkerKind::kAddr) return o.kind == ReplyKind::kRstAck ? o.reply : 0;
  return is_tcp_answer(o.kind) ? o.reply : 0;
}

}  // namespace

HopsResult run_hops(const Config& c, const std::atomic<bool>& stop) {
  const std::unique_ptr<Session> s = open_session(c, stop, /*any_peer=*/true);
  return run_hops(*s, c, stop);
}

HopsResult run_hops(Session& s, const Config& c, const std::atomic<bool>&) {
  const Nanos t_begin = s.t_begin;
  HopsResult res;
  res.target = c.target;
  res.hop_markers = c.hop_markers;
  res.params = params_json(c, ParamSet::kHops);
  res.params["icmp_rate"] = icmp_rate_for(c, s.dst);  // the family's default unless given

  const IpAddr dst = s.dst;
  res.target_addr = format_scoped(dst);
  res.source = format_ipv4(s.route.source);
  res.interface = s.route.interface;
  res.source_port = s.reserved->port();
  const int L = s.packet_size;
  res.params["packet_size"] = L;
  res.port = s.disc.port;
  res.marker_kind = s.disc.kind;
  res.rtt_s = s.disc.rtt_s;
  res.replier = s.replier;
  res.warnings = s.warnings;
  // Trains go through the reply budget and checks (session.hpp, run_train).
  LiveRunner io(s, c, "hops", t_begin + from_seconds(c.max_time_s));
  // With --save-pcap: what `linkwidth analyze` needs to replay this phase.
  s.prober->note(phase_note_json(HopsRunNote{c.command, run_head(res), config_json(c), t_begin,
                                             s.prober->bytes_sent(), s.prober->packets_sent(), L,
                                             s.disc.rtt_s, lw::reply_wait(s, c),
                                             io.load_capacity()}));
  PhasePath path{s.flow, L, s.disc.rtt_s, s.seqs};
  // Replies from the nearest router are due first: the busy windows follow
  // the smallest reply time the hops trains see, not the target's RTT.
  const Nanos target_rtt = s.prober->rtt();
  s.prober->set_rtt(0);
  const HopsResult out = run_hops_on(io, std::move(res), c, path, s.dst, t_begin);
  s.prober->set_rtt(target_rtt);
  HopsResult done = out;
  // Not re-derived offline: noted for `linkwidth analyze`.
  std::vector<Warning> reply;
  take_reply_warnings(s, reply);
  done.warnings.insert(done.warnings.end(), reply.begin(), reply.end());
  s.prober->note(phase_note_json(HopsEndNote{warnings_json(reply)}));
  return done;
}

double icmp_rate_for(const Config& c, const IpAddr& dst) {
  // Linux's defaults, measured in the lab (scripts/icmp6_ratelimit.py, kernel
  // 6.18): a router answers a burst of 6, then 1 ICMP error per second
  // (net.ipv4.icmp_ratelimit = 1000 ms) or about 10 ICMPv6 errors per second
  // (net.ipv6.icmp.ratelimit = 100 ms; Cisco's IPv6 default is the same
  // 100 ms). --icmp-rate overrides both.
  return c.icmp_rate_given || dst.is_v4() ? c.icmp_rate : 10.0;
}

namespace {

// What the path discovery and the router check found, and what the trains
// spend: hop k (TTL k + 1) for k < H; the target is hop H.
struct HopsPath {
  std::vector<PathHop> hops;
  std::vector<IcmpBudget> budget;  // each router's ICMP tokens as we model them
  int H = 0;                       // path length; 0 = the target was not reached
};

// Path discovery: TTL 1..max_hops in the train's 5-tuple; the smallest TTL
// the target answers is the path length H. Silent TTLs below it are asked
// again (each ask costs that router one ICMP token).
HopsPath discover_path(ProbeRunner& io, const Config& c, const PhasePath& path_info,
                       const IpAddr& dst, double icmp_rate, Nanos t_cap) {
  const Nanos reply_wait = io.reply_wait();
  HopsPath p;
  p.budget.assign(c.max_hops, IcmpBudget(icmp_rate, c.icmp_burst));
  p.hops.resize(c.max_hops);
  std::vector<int> ask(c.max_hops);
  for (int i = 0; i < c.max_hops; ++i) ask[i] = i + 1;
  Nanos last_sweep = 0;
  for (int round = 0; round < c.discovery_tries && !ask.empty(); ++round) {
    if (round > 0) {
      // Ask again only once a rate-limited router has a new token: right after
      // another traceroute (or our own last run) its bucket may be empty.
      const Nanos again = last_sweep + from_seconds(1.0 / icmp_rate) + kBudgetSlack;
      if (again + reply_wait > t_cap) break;
      io.wait_until(again);
    }
    last_sweep = io.now();
    const Train sweep =
        make_ttl_sweep(path_info.flow, ask, kSweepSpacing, -100 - round, path_info.seqs);
    const TrainResult run = io.run(sweep, {sweep.markers});
    for (int ttl : ask) p.budget[ttl - 1].spend(1, run.start_mono);
    for (std::size_t i = 0; i < ask.size(); ++i) {
      const ProbeOutcome& o = run.outcome.probes[static_cast<std::size_t>(sweep.markers[i])];
      const int ttl = ask[i];
      PathHop& hop = p.hops[ttl - 1];
      if (is_tcp_answer(o.kind) && o.reply_from == dst) {
        if (p.H == 0 || ttl < p.H) p.H = ttl;
      } else if (o.kind == ReplyKind::kIcmp && hop.addr == 0) {
        hop.addr = o.reply_from;
        hop.icmp_ttl = o.icmp_kind == IcmpKind::kTimeExceeded ? o.reply_ttl : 0;
      }
    }
    if (p.H == 0) {
      // No TTL reached the target: it may be out of reach, or every answer
      // came after the wait (a host that stood still: the fresh-clone CI of
      // 2026-11-26 ended a measure on a 2-hop lab path this way). Ask every
      // TTL again while the tries last; a target out of reach costs them.
      continue;
    }
    std::vector<int> next;
    for (int ttl = 1; ttl < p.H; ++ttl) {
      if (p.hops[ttl - 1].addr == 0) next.push_back(ttl);
    }
    ask = next;
    if (io.stopped()) break;
  }
  return p;
}

// The path as far as the target, which answered from TTL H: when the
// session's TTL check heard nothing at the replies' hop count, the sweep may
// have (path_checks).
void reach_target(HopsPath& p, const IpAddr& dst, HopsResult& res) {
  const int H = p.H;
  res.target_reached = true;
  p.hops.resize(H);
  p.budget.erase(p.budget.begin() + H, p.budget.end());
  p.hops[H - 1].addr = dst;
  p.hops[H - 1].tcp = true;
  const int rh = res.replier.reply_hops;
  if (res.replier.check == "inconclusive" && rh >= 1 && rh + 1 == H &&
      p.hops[rh - 1].icmp_ttl > 0) {
    apply_replier_check(classify_replier(res.replier.reply_ttl,
                                         {TtlAnswer::kTimeExceeded, p.hops[rh - 1].addr,
                                          p.hops[rh - 1].icmp_ttl},
                                         {TtlAnswer::kTargetReply, dst, 0}),
                        dst, res.replier, res.warnings);
  }
}

bool addressable(const PathHop& h, const IpAddr& dst) {
  // Only addresses we would accept as a target (an ICMP source can be anything).
  return h.addr != 0 && h.addr != dst && forbidden_target_reason(h.addr).empty();
}

// The router check: which routers answer TCP on their own address (the
// paper's markers). Not asked with --hop-markers ttl.
void check_routers(ProbeRunner& io, const Config& c, PhasePath& path_info, const IpAddr& dst,
                   HopsPath& p) {
  std::vector<IpAddr> check;
  std::vector<int> check_hop;
  if (c.hop_markers != HopMarkers::kTtl) {
    for (int k = 0; k + 1 < p.H; ++k) {
      if (addressable(p.hops[k], dst)) {
        check.push_back(p.hops[k].addr);
        check_hop.push_back(k);
      }
    }
  }
  if (check.empty()) return;
  const Train t = make_addr_check(path_info.flow, check, kSweepSpacing, -200, path_info.seqs);
  const TrainResult run = io.run(t, {t.markers});
  for (std::size_t i = 0; i < check.size(); ++i) {
    const ProbeOutcome& o = run.outcome.probes[static_cast<std::size_t>(t.markers[i])];
    p.hops[check_hop[i]].tcp = o.kind == ReplyKind::kRstAck && o.reply_from == check[i];
  }
}

// The recursive trains' running state.
struct HopTrains {
  std::vector<MarkerKind> kind;  // per hop, as the next train marks it
  std::vector<MarkerChoice> choice;
  std::vector<HopTrainTiming> timings;  // the trains the estimate uses
  int n = 0;                            // load packets per train
  bool sized = false;
  double slowest_bps = 0;  // lowest hop rate seen: budgets the idle time
  int silent_trains = 0;
  int path_changes = 0;
};

HopTrains first_markers(const Config& c, const IpAddr& dst, HopsPath& p) {
  HopTrains s;
  s.kind.resize(p.H);
  s.choice.resize(p.H);
  for (int k = 0; k < p.H; ++k) {
    const bool addr_ok = addressable(p.hops[k], dst);
    if (k + 1 < p.H) p.hops[k].tcp = p.hops[k].tcp && addr_ok;
    s.kind[k] = initial_marker_kind(c.hop_markers, k + 1 == p.H, addr_ok, p.hops[k].tcp);
    s.choice[k].kind = s.kind[k];
  }
  s.n = c.load_packets > 0 ? c.load_packets : sizing_load_packets(c.max_load_packets);
  s.sized = c.load_packets > 0;
  return s;
}

// One train's replies per hop; updates the routers' budgets and addresses.
// Returns how many hops answered at all.
int read_hop_train(const RecursiveTrain& rt, const TrainResult& run, HopsPath& p, HopTrains& s,
                   HopTrainTiming& tm) {
  const int H = p.H;
  tm.bits = rt.bits;
  tm.head_reply.assign(H, 0);
  tm.tail_reply.assign(H, 0);
  tm.head_sent.assign(H, 0);
  tm.tail_sent.assign(H, 0);
  int any = 0;
  for (int k = 0; k < H; ++k) {
    const ProbeOutcome& h = run.outcome.probes[rt.head[k]];
    const ProbeOutcome& t = run.outcome.probes[rt.tail[k]];
    tm.head_reply[k] = reply_time(h, s.kind[k]);
    tm.tail_reply[k] = reply_time(t, s.kind[k]);
    tm.head_sent[k] = h.sent;
    tm.tail_sent[k] = t.sent;
    const bool got = tm.head_reply[k] != 0 || tm.tail_reply[k] != 0;
    if (s.kind[k] == MarkerKind::kTtl && p.hops[k].addr != 0 &&
        (tm.head_reply[k] == 0 || tm.tail_reply[k] == 0)) {
      p.budget[k].drain(run.start_mono);  // a known router left a reply out: out of tokens
    }
    any += got ? 1 : 0;
    if (s.kind[k] == MarkerKind::kTtl && (tm.head_reply[k] != 0 || tm.tail_reply[k] != 0)) {
      const IpAddr from = tm.head_reply[k] != 0 ? h.reply_from : t.reply_from;
      if (p.hops[k].addr == 0)
        p.hops[k].addr = from;  // silent in discovery, answers now
      else if (from != p.hops[k].addr)
        ++s.path_changes;
    }
  }
  return any;
}

// Sizing: the first train's slowest hop sets N for the target dispersion.
// Returns whether the train joins the estimate (a train of another length is
// not mixed into the medians).
bool size_from_train(const Config& c, int packet_size, const HopTrainTiming& tm, int H,
                     HopTrains& s) {
  double train_slowest = 0;
  for (int k = 0; k < H; ++k) {
    const double d = hop_dispersion(tm, k);
    if (d > 0) {
      const double r = tm.bits[k] / d;
      train_slowest = train_slowest > 0 ? std::min(train_slowest, r) : r;
    }
  }
  if (train_slowest > 0) {
    s.slowest_bps = s.slowest_bps > 0 ? std::min(s.slowest_bps, train_slowest) : train_slowest;
  }
  if (s.sized || train_slowest <= 0) return true;
  const double want = std::ceil(c.target_dispersion_s * train_slowest / (8.0 * packet_size));
  // (Within --max-load-packets, or what a small queue held in the capacity
  // phase, even below the floor.)
  const int n_new = load_packets_within(want, kHopsMinLoadPackets, c.max_load_packets);
  const bool keep = n_new == s.n;
  s.n = n_new;
  s.sized = true;
  return keep;
}

void print_hop_train(int i, int load_packets, Nanos at, const HopTrainTiming& tm, int any,
                     int H, bool keep) {
  std::string missing;
  for (int k = 0; k < H; ++k) {
    if (tm.head_reply[k] == 0) missing += " head" + std::to_string(k + 1);
    if (tm.tail_reply[k] == 0) missing += " tail" + std::to_string(k + 1);
  }
  std::fprintf(stderr, "train %d: N=%d at +%.3f s, answered hops %d/%d%s%s%s\n", i, load_packets,
               to_seconds(at), any, H, keep ? "" : " (sizing)",
               missing.empty() ? "" : ", missing:", missing.c_str());
}

// Auto: a hop whose markers of one kind drew nothing in two trains gets the
// other kind, once.
void switch_marker_kinds(const HopTrainTiming& tm, const HopsPath& p, HopTrains& s,
                         HopsResult& res) {
  for (int k = 0; k + 1 < p.H; ++k) {
    const bool got = tm.head_reply[k] != 0 || tm.tail_reply[k] != 0;
    if (!s.choice[k].record(got, p.hops[k].tcp)) continue;
    s.kind[k] = s.choice[k].kind;
    res.warnings.push_back(
        {WarningCode::kMarkerKindSwitched,
         "hop " + std::to_string(k + 1) + " did not answer its " +
             std::string(s.kind[k] == MarkerKind::kTtl ? "addressed" : "TTL-limited") +
             " markers; switched to " + name(s.kind[k]) + " markers"});
  }
}

// The recursive trains, each admitted by the runner's gate once every
// TTL-marked router has the two ICMP errors it asks of it, until a cap, the
// stop flag or three silent trains.
void run_hop_trains(ProbeRunner& io, const Config& c, PhasePath& path_info, Nanos t_begin,
                    HopsPath& p, HopTrains& s, HopsResult& res) {
  const int H = p.H;
  res.stop_reason = StopReason::kMaxTrains;
  Nanos next_start = io.now();
  const double known_capacity = io.load_capacity();  // an earlier phase's budget (0: none)
  for (int i = 0; i < c.max_trains; ++i) {
    RecursiveTrainParams rp;
    rp.flow = path_info.flow;
    for (int k = 0; k < H; ++k) rp.hops.push_back({k + 1, p.hops[k].addr, s.kind[k]});
    rp.load_packets = s.n;
    rp.packet_size = static_cast<std::uint16_t>(path_info.packet_size);
    rp.drain_packets = c.drain_packets;
    RecursiveTrain rt = make_recursive_train(rp, i, path_info.seqs);
    space_to_rate(rt.train, c.max_rate_bps);  // the pacer refuses anything faster
    // Wait for the idle time and for every TTL-marked router to have the two
    // ICMP errors this train asks of it (a hop that never answered is not
    // waited for: it would only slow the others down).
    const StopReason why = io.admit(rt.train, [&] {
      Nanos start = std::max(next_start, io.now());
      for (int k = 0; k < H; ++k) {
        if (s.kind[k] != MarkerKind::kTtl || p.hops[k].addr == 0) continue;
        const Nanos ready = p.budget[k].ready_at(2, start);
        if (ready > start) start = ready + kBudgetSlack;
      }
      return start;
    });
    if (why != StopReason::kNone) {
      res.stop_reason = why;
      break;
    }
    const double train_bits = 8.0 * static_cast<double>(rt.train.total_bytes());
    // The train's time at the slowest hop; the prober opens the busy window
    // one (smallest seen) RTT after the head.
    const double expect_s = train_bits / (s.slowest_bps > 0 ? s.slowest_bps : 1e6);
    TrainOptions o;
    o.wait_for = rt.train.markers;
    o.busy_wait = busy_wait(1.5 * expect_s);
    const TrainResult run = io.run(rt.train, o);
    ++res.trains_sent;
    for (int k = 0; k < H; ++k) {
      if (s.kind[k] == MarkerKind::kTtl) p.budget[k].spend(2, run.start_mono);
    }

    HopTrainTiming tm;
    const int any = read_hop_train(rt, run, p, s, tm);
    s.silent_trains = any == 0 ? s.silent_trains + 1 : 0;
    const bool keep = size_from_train(c, path_info.packet_size, tm, H, s);
    if (keep) s.timings.push_back(tm);
    if (c.verbose) print_hop_train(i, rp.load_packets, run.start_mono - t_begin, tm, any, H, keep);
    if (c.hop_markers == HopMarkers::kAuto) switch_marker_kinds(tm, p, s, res);
    if (s.silent_trains >= 3) {
      res.stop_reason = StopReason::kNoReplies;
      res.warnings.push_back({WarningCode::kRepliesStopped, "no hop answered 3 trains in a row"});
      break;
    }
    // Idle so the average probing rate stays under max_load of the slowest
    // hop, and of the capacity an earlier phase budgeted with (measure), the
    // lower of the two (estimate/load_budget.hpp). No hop rate yet: that
    // capacity, else kUnknownPathBps (not the time the train took to leave
    // us: that is our own interface's rate, not the path's).
    double rate = s.slowest_bps > 0    ? s.slowest_bps
                  : known_capacity > 0 ? known_capacity
                                       : kUnknownPathBps;
    if (known_capacity > 0) rate = std::min(rate, known_capacity);
    io.set_load_capacity(rate);
    next_start =
        std::max(run.end_mono, run.start_mono + from_seconds(train_bits / rate / c.max_load));
  }
  res.load_packets = s.n;
}

// The per-hop records from the estimate; returns the hops that never
// answered (`unknown`) and those that answered fewer trains than were sent.
void hop_records(const HopsEstimate& est, const HopsPath& p, const HopTrains& s, HopsResult& res,
                 std::vector<int>& unknown, std::vector<int>& few) {
  for (int k = 0; k < p.H; ++k) {
    HopRecord h;
    h.ttl = k + 1;
    h.addr = p.hops[k].addr ? format_ipv4(p.hops[k].addr) : "";
    h.marker_kind = s.kind[k];
    h.answers_tcp = p.hops[k].tcp;
    if (k < static_cast<int>(est.hops.size())) {
      const HopEstimate& e = est.hops[k];
      h.replies = e.replies;
      h.used = e.used;
      h.dispersion_s = e.dispersion_s;
      h.rate_bps = e.rate_bps;
      h.choke_fraction = e.choke_fraction;
      h.bottleneck_fraction = e.bottleneck_fraction;
      h.passed_fraction = e.passed_fraction;
      h.passed_trains = e.passed_trains;
      h.rate_low_bps = e.rate_low_bps;
      h.rate_high_bps = e.rate_high_bps;
      h.compressed_fraction = e.compressed_fraction;
      h.compressed = e.compressed();
    }
    if (p.hops[k].addr == 0)
      unknown.push_back(k + 1);
    else if (!h.compressed && (!h.used || h.replies < static_cast<int>(s.timings.size())))
      few.push_back(k + 1);
    res.hops.push_back(h);
  }
}

// Hops whose replies came back closer together than their markers were sent
// (HopEstimate::compressed) take no part; when the last of them is the
// target, no bottleneck is named: a narrower link may lie past the last hop
// that could be read, and "no hop slowed the trains" would be false. True
// when that is so.
bool warn_compressed_hops(const HopsEstimate& est, HopsResult& res) {
  std::vector<int> hops;
  int worst = 0, of = 0;
  for (std::size_t k = 0; k < est.hops.size(); ++k) {
    if (!est.hops[k].compressed()) continue;
    hops.push_back(static_cast<int>(k) + 1);
    if (est.hops[k].compressed_trains > worst) {
      worst = est.hops[k].compressed_trains;
      of = est.hops[k].replies;
    }
  }
  if (hops.empty()) return false;
  const bool target = hops.back() == static_cast<int>(est.hops.size());
  res.warnings.push_back(
      {WarningCode::kRepliesCompressed,
       "the replies of hop(s) " + hop_list(hops) + " came back closer together than their "
           "markers were sent (in up to " + std::to_string(worst) + " of " + std::to_string(of) +
           " trains): the way back from there compresses them (a slow or busy link back to us), "
           "or the path dropped the load between them (a full queue); their dispersion says "
           "nothing of the forward path and they take no part" +
           (target ? std::string("; the target is among them, so no bottleneck is named (a "
                                 "narrower link may lie after the last hop that could be read)")
                   : std::string())});
  return target;
}

// The bottleneck hop (or why none is named), with its warnings.
void name_bottleneck(const HopsEstimate& est, const HopsFilter& f, std::size_t trains,
                     HopsResult& res) {
  if (warn_compressed_hops(est, res)) return;
  if (est.bottleneck >= 0) {
    set_bottleneck(res, est.bottleneck, est.confidence);
    const int earliest = res.bottleneck_earliest_hop - 1;
    if (earliest < est.bottleneck) {
      res.warnings.push_back(
          {WarningCode::kBottleneckAfterSilentHop,
           "hop(s) " + std::to_string(earliest + 1) + ".." + std::to_string(est.bottleneck) +
               " gave no usable replies, so the narrow link may be any link into hops " +
               std::to_string(earliest + 1) + ".." + std::to_string(est.bottleneck + 1)});
    }
    if (est.confidence < 0.5) {
      res.warnings.push_back({WarningCode::kLowConfidence,
                              "the bottleneck hop was the last choke point in "
                              "fewer than half of the trains"});
    }
  } else if (est.trains_voting >= f.min_trains && est.no_choke_fraction >= 0.5) {
    res.warnings.push_back({WarningCode::kNoBottleneck,
                            "no hop slowed the trains: the narrowest link is this host's own "
                            "interface, or every link is faster than we can send"});
  } else if (res.stop_reason != StopReason::kInterrupted) {
    res.warnings.push_back(
        {WarningCode::kNoBottleneck, "too few trains were answered by every hop (" +
                                         std::to_string(est.trains_voting) + " of " +
                                         std::to_string(trains) + ")"});
  }
}

// Summary: the estimate over the kept trains, the hop records, the
// bottleneck, and the warnings about silent hops, path changes and drops.
void summarize_hops(ProbeRunner& io, const Config& c, const HopsPath& p, const HopTrains& s,
                    Nanos t_begin, HopsResult& res) {
  HopsFilter f;
  f.min_step = c.min_step;
  f.min_trains = c.min_trains;
  const HopsEstimate est = estimate_hops(s.timings, f);
  res.trains_voting = est.trains_voting;
  res.no_choke_fraction = est.no_choke_fraction;
  std::vector<int> unknown, few;
  hop_records(est, p, s, res, unknown, few);
  name_bottleneck(est, f, s.timings.size(), res);
  if (!unknown.empty()) {
    res.warnings.push_back({WarningCode::kSilentHops,
                            "hop(s) " + hop_list(unknown) + " never answered; kept as unknown"});
  }
  if (!few.empty()) {
    res.warnings.push_back({WarningCode::kFewReplies,
                            "hop(s) " + hop_list(few) +
                                " answered fewer trains than were sent (ICMP rate limit or loss); "
                                "a hop answering under half of them is not used"});
  }
  if (s.path_changes > 0) {
    res.warnings.push_back(
        {WarningCode::kPathChanged, std::to_string(s.path_changes) +
                                        " TTL-limited marker(s) were answered by another "
                                        "router than in path discovery"});
  }
  const unsigned drops = io.capture_drops();
  if (drops > 0) {
    res.warnings.push_back({WarningCode::kCaptureDrops,
                            std::to_string(drops) + " packets dropped by the capture buffer"});
  }
  res.probe_packets = io.packets_sent();
  res.probe_bytes = io.bytes_sent();
  res.elapsed_s = to_seconds(io.now() - t_begin);
}

}  // namespace

void set_bottleneck(HopsResult& res, int k, double confidence) {
  const HopRecord& h = res.hops[static_cast<std::size_t>(k)];
  res.bottleneck_hop = k + 1;
  res.bottleneck_addr = h.addr;
  res.bottleneck_confidence = confidence;
  res.bottleneck_rate_bps = h.rate_bps;
  // Hops right before it that gave nothing usable hide where the step
  // happened: the narrow link is one of the links into hops earliest..k.
  int earliest = k;
  while (earliest > 0 && !res.hops[static_cast<std::size_t>(earliest - 1)].used) --earliest;
  res.bottleneck_earliest_hop = earliest + 1;
}

HopsResult run_hops_on(ProbeRunner& io, HopsResult res, const Config& c, PhasePath& path_info,
                       const IpAddr& dst, Nanos t_begin) {
  const Nanos t_cap = t_begin + from_seconds(c.max_time_s);
  HopsPath p = discover_path(io, c, path_info, dst, icmp_rate_for(c, dst), t_cap);
  if (io.stopped()) {
    res.stop_reason = StopReason::kInterrupted;
    return res;
  }
  if (p.H == 0) {
    throw Error("hops",
                "target " + res.target_addr + " did not answer within " +
                    std::to_string(c.max_hops) + " hops (raise --max-hops)",
                "path_too_long");
  }
  reach_target(p, dst, res);
  check_routers(io, c, path_info, dst, p);
  HopTrains s = first_markers(c, dst, p);
  run_hop_trains(io, c, path_info, t_begin, p, s, res);
  summarize_hops(io, c, p, s, t_begin, res);
  return res;
}

Config hops_config_from(const nlohmann::json& j) {
  // The ranges parse_cli allows (validate()): a damaged record must not size the run.
  return recorded_config(config_from_json(j), "hops");
}

}  // namespace lw
