#include "app/plumbing/prober.hpp"

#include <algorithm>

#include <cstdio>

#include "capture/run_record.hpp"
#include "linkwidth/error.hpp"

namespace lw {

namespace {

PacerOptions pacer_options(const Config& c) {
  PacerOptions o;
  o.max_rate_bps = c.max_rate_bps;
  return o;
}

}  // namespace

Prober::PrivilegeGate::PrivilegeGate(const IpAddr& target) {
  // Refused again here, whatever the session checked: nothing below sends to them.
  std::string why = forbidden_target_reason(target);
  if (why.empty()) why = local_target_reason(target);
  if (!why.empty()) {
    throw Error("target", "refusing to probe " + format_ipv4(target) + ": it is " + why,
                "forbidden_target", ExitCode::kUsage);
  }
  require_capture_privileges();
}

std::string capture_filter(const IpAddr& self, const IpAddr& target, std::uint16_t sport,
                           bool any_peer) {
  const std::string s = format_ip(self), t = format_ip(target), p = std::to_string(sport);
  if (self.is_v6()) {
    const std::string icmp6 = "(icmp6 and dst host " + s + " and ip6[40] < 128)";
    // libpcap's `tcp`, `icmp6` and `port` read the next-header field of the
    // fixed header only: a reply behind a hop-by-hop, routing, fragment, AH or
    // destination-options header would fail them all. Such packets to us pass
    // whole (kernel-side: `ip6 protochain` compiles to a backward jump the
    // kernel refuses, which moves all filtering into user space), and
    // decode.cpp walks the chain; the matcher checks ports and addresses.
    const std::string ext = " or (ip6 and dst host " + s +
                            " and (ip6[6] == 0 or ip6[6] == 43 or ip6[6] == 44 or ip6[6] == 51 "
                            "or ip6[6] == 60))";
    if (any_peer) return "(ip6 and tcp and host " + s + " and port " + p + ") or " + icmp6 + ext;
    return "(ip6 and tcp and host " + t + " and host " + s + " and port " + p + ") or " + icmp6 +
           ext;
  }
  if (any_peer)
    return "(tcp and host " + s + " and port " + p + ") or (icmp and dst host " + s + ")";
  // Our probes and the target's replies in one 5-tuple family, plus ICMP errors
  // addressed to us (they quote the probe that caused them).
  return "(tcp and host " + t + " and host " + s + " and port " + p + ") or (icmp and dst host " +
         s + ")";
}

Prober::Prober(const Route& route, const IpAddr& target, std::uint16_t sport,
               const std::atomic<bool>& stop, const Config& c, bool any_peer)
    : route_(route),
      target_(target),
      stop_(stop),
      max_bytes_(c.max_bytes),
      max_rate_bps_(c.max_rate_bps),
      gate_(target),
      socket_(route.interface, 8 << 20, target.family()),
      capture_(route.interface, capture_filter(route.source, target, sport, any_peer)),
      pacer_(socket_, pacer_options(c)) {
  // Created while we may still write where the user can (before the drop).
  if (!c.save_pcap.empty()) capture_.save_to(c.save_pcap);
  saving_ = !c.save_pcap.empty();
  privileges_ = drop_privileges();
  if (c.verbose) {
    std::fprintf(stderr, "privileges: dropped; running as %s (uid %u, gid %u), no capabilities%s\n",
                 privileges_.user.c_str(), privileges_.uid, privileges_.gid,
                 privileges_.bounding_cleared ? ", bounding set cleared" : "");
  }
}

void Prober::note(const nlohmann::json& j) {
  if (!saving_) return;
  const Nanos now = real_now();
  for (const auto& body :
       note_bodies(notes_++, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)))
    capture_.save_record(now, body);
}

TrainRun Prober::transmit(const Train& train) {
  std::vector<std::vector<std::uint8_t>> bytes;
  bytes.reserve(train.probes.size());
  std::uint64_t total = 0;
  for (const auto& p : train.probes) {
    bytes.push_back(builder_.build(p));
    total += bytes.back().size();
  }
  if (bytes_ + total > max_bytes_) {
    // The session stops before this; reaching it is a bug we must not act on.
    throw Error("send",
                "train " + std::to_string(train.id) + " would pass --max-bytes (" +
                    std::to_string(bytes_ + total) + " > " + std::to_string(max_bytes_) +
                    " bytes); nothing sent",
                "max_bytes_exceeded");
  }
  TrainRun r;
  r.start_mono = mono_now();
  // The capture is drained while a long train is sent: the ring (64 blocks,
  // each handed over when full or after pcap's 1 ms timeout) holds about 64
  // ms of it; past that the kernel dropped the replies (a 2 MB shaper stream
  // paced at 94 Mbit/s lost its replies after 59 ms).
  r.sent = pacer_.send(train, bytes, &stop_, [this] { capture_.drain(captured_); });
  for (std::size_t i = 0; i < r.sent.size(); ++i) {
    if (r.sent[i].sent) {
      ++packets_;
      bytes_ += bytes[i].size();
      // The offered schedule, which the capture cannot see (--save-pcap only).
      capture_.save_record(r.sent[i].actual_real, send_record_body(train.probes[i]));
    }
  }
  return r;
}

void Prober::learn_rtt(const TrainOutcome& o) {
  // The smallest round trip seen so far opens the next trains' busy windows;
  // the longest (from the send: our own queue counts) sizes the waits.
  for (const ProbeOutcome& p : o.probes) {
    const Nanos d = p.reply > 0 && p.left > 0 ? p.reply - p.left : 0;
    if (d > 0 && (rtt_ == 0 || d < rtt_)) rtt_ = d;
    if (p.reply > 0 && p.sent > 0) longest_rtt_ = std::max(longest_rtt_, p.reply - p.sent);
  }
}

void Prober::keep_if_unanswered(const Train& train, const std::vector<int>& wait_for,
                                const TrainRun& run) {
  for (int i : wait_for) {
    if (run.outcome.probes[static_cast<std::size_t>(i)].reply == 0) {
      if (unanswered_.size() >= kMaxUnanswered) unanswered_.erase(unanswered_.begin());
      unanswered_.push_back({train, run.sent, run.outcome, run.end_mono});
      return;
    }
  }
}

void Prober::find_late(const std::vector<Decoded>& packets) {
  const Nanos now = mono_now();
  std::vector<Unanswered> kept;
  for (Unanswered& u : unanswered_) {
    const TrainOutcome late = match_train(u.train, u.sent, packets, route_.source);
    bool missing = false;
    for (std::size_t i = 0; i < late.probes.size(); ++i) {
      ProbeOutcome& was = u.outcome.probes[i];
      const ProbeOutcome& p = late.probes[i];
      if (was.reply == 0 && p.reply != 0 && p.sent != 0 && p.reply > p.sent) {
        ++late_replies_;
        longest_late_rtt_ = std::max(longest_late_rtt_, p.reply - p.sent);
        longest_rtt_ = std::max(longest_rtt_, p.reply - p.sent);
        was.reply = p.reply;
      }
      missing = missing || (u.train.probes[i].role == Role::kMarker && was.reply == 0);
    }
    if (missing && now - u.ended < kLateHorizon) kept.push_back(std::move(u));
  }
  unanswered_ = std::move(kept);
}

void Prober::drain_stale() {
  captured_.clear();
  capture_.drain(captured_);
  if (!unanswered_.empty()) find_late(captured_);
  captured_.clear();
}

TrainRun Prober::run(const Train& train, const std::vector<int>& wait_for, Nanos reply_timeout,
                     bool any, Nanos busy_wait, Nanos settle, Nanos quiet) {
  if (!flight_.empty()) {
    throw Error("send", "a train was run while pipelined trains were in flight (a bug)",
                "internal");
  }
  drain_stale();  // packets of earlier trains
  TrainRun r = transmit(train);
  const Nanos sent_at = mono_now();
  Nanos deadline = sent_at + reply_timeout;
  // The busy window opens when the head's reply is due (its send + the RTT,
  // less a margin for jitter), not when sending ends: on a long path nothing
  // can come back for a whole round trip, and spinning through it would only
  // burn a CPU. On a short path (RTT under the train's send time) this is the
  // end of sending, as before.
  // `busy_wait` is how long the replies take to come in after the head's.
  // The RTT is the smallest seen, so no reply comes before it; the margin
  // is for a timer that wakes late and for the RTT's own jitter.
  const Nanos jitter = reply_jitter();
  const Nanos spin_from = std::min(deadline, std::max(sent_at, r.start_mono + rtt_ - jitter));
  const Nanos spin_until = std::min(
      deadline, std::max(sent_at, r.start_mono + rtt_ + jitter) + std::min(busy_wait, reply_timeout));
  bool first = true;
  int last_got = 0;
  Nanos last_reply = 0, longest_gap = 0;
  for (;;) {
    const bool fresh = capture_.drain(captured_) > 0;
    if (fresh || first) {
      r.outcome = match_train(train, r.sent, captured_, route_.source);
      first = false;
    }
    int got = 0;
    for (int i : wait_for) got += r.outcome.probes[i].reply != 0 ? 1 : 0;
    const bool done = any ? got > 0 : got == static_cast<int>(wait_for.size());
    const Nanos now = mono_now();
    if (settle > 0 && got > 0 && now + settle < deadline) {
      deadline = now + settle;
      settle = 0;
    }
    if (done || stop_.load() || now >= deadline) break;
    if (quiet > 0) {
      if (got > last_got) {
        if (last_reply != 0) longest_gap = std::max(longest_gap, now - last_reply);
        last_reply = now;
        last_got = got;
      } else if (last_reply != 0 && now - last_reply > std::max(quiet, 3 * longest_gap)) {
        break;
      }
    }
    // Busy-poll while replies are due: a CPU that sleeps wakes up late for the
    // interrupt that timestamps the tail reply (tens of µs on a VM), and it
    // would not for the head reply, which arrives while we are still sending.
    if (now >= spin_from && now < spin_until) continue;
    capture_.wait(std::min<Nanos>({deadline - now, 20 * kMs, now < spin_from ? spin_from - now : deadline - now}));
  }
  r.end_mono = mono_now();
  learn_rtt(r.outcome);
  if (!unanswered_.empty()) find_late(captured_);
  if (!any) keep_if_unanswered(train, wait_for, r);
  return r;
}

// The busy window of a train in flight: from when its head's reply is due to
// `busy_wait` after its replies are due to end (as in run()).
std::pair<Nanos, Nanos> Prober::spin_window(const InFlight& f) const {
  const Nanos jitter = reply_jitter();
  return {f.run.start_mono + rtt_ - jitter,
          std::max(f.sent_at, f.run.start_mono + rtt_ + jitter) + f.busy_wait};
}

// How long to sleep from `now`: 0 inside the busy window of a train whose
// replies are not all in, else until the next such window opens (or `limit`).
Nanos Prober::sleep_for(Nanos now, Nanos limit) const {
  Nanos d = limit;
  for (const InFlight& f : flight_) {
    if (f.done) continue;
    const auto [from, until] = spin_window(f);
    if (now >= from && now < until) return 0;
    if (from > now) d = std::min(d, from - now);
  }
  return d;
}

Nanos Prober::send(const Train& train, const std::vector<int>& wait_for, Nanos busy_wait) {
  if (flight_.empty()) drain_stale();  // packets of earlier trains
  InFlight f;
  f.train = train;
  f.wait_for = wait_for;
  f.busy_wait = busy_wait;
  f.run = transmit(train);
  f.sent_at = mono_now();
  const Nanos start = f.run.start_mono;
  flight_.push_back(std::move(f));
  return start;
}

bool Prober::update_flight(bool fresh, Nanos now) {
  bool all = true;
  for (InFlight& f : flight_) {
    if (f.done) continue;
    if (fresh) {
      f.run.outcome = match_train(f.train, f.run.sent, captured_, route_.source);
      int got = 0;
      for (int i : f.wait_for) got += f.run.outcome.probes[i].reply != 0 ? 1 : 0;
      if (got == static_cast<int>(f.wait_for.size())) {
        f.done = true;
        f.run.end_mono = now;
      }
    }
    all = all && f.done;
  }
  return all;
}

Nanos Prober::quiet_start(Nanos t, Nanos span) const {
  const Nanos jitter = reply_jitter();
  t = std::max(t, mono_now());
  for (std::size_t moved = 0; moved <= flight_.size(); ++moved) {
    bool clear = true;
    for (const InFlight& f : flight_) {
      if (f.done) continue;
      const Nanos expect = std::max<Nanos>(0, f.busy_wait - 2 * kMs);
      const Nanos from = f.run.start_mono + rtt_ - jitter;
      const Nanos to = f.run.start_mono + rtt_ + jitter + expect;
      if (t < to && t + span > from) {
        t = to;
        clear = false;
      }
    }
    if (clear) break;
  }
  return t;
}

void Prober::idle_until(Nanos t) {
  for (Nanos now = mono_now(); now < t && !stop_.load(); now = mono_now()) {
    if (flight_.empty()) {
      sleep_until(t);
      continue;
    }
    update_flight(capture_.drain(captured_) > 0, now);
    const Nanos d = sleep_for(now, std::min<Nanos>(t - now, 20 * kMs));
    if (d > 0) capture_.wait(d);
  }
}

std::vector<TrainRun> Prober::collect(Nanos reply_timeout) {
  std::vector<TrainRun> out;
  if (flight_.empty()) return out;
  const Nanos deadline = flight_.back().sent_at + reply_timeout;
  for (bool first = true;; first = false) {
    const bool fresh = capture_.drain(captured_) > 0;
    const Nanos now = mono_now();
    const bool all = update_flight(fresh || first, now);
    if (all || stop_.load() || now >= deadline) break;
    const Nanos d = sleep_for(now, std::min<Nanos>(deadline - now, 20 * kMs));
    if (d > 0) capture_.wait(d);
  }
  const Nanos end = mono_now();
  if (!unanswered_.empty()) find_late(captured_);
  for (InFlight& f : flight_) {
    if (!f.done) {
      f.run.outcome = match_train(f.train, f.run.sent, captured_, route_.source);
      f.run.end_mono = end;
    }
    learn_rtt(f.run.outcome);
    keep_if_unanswered(f.train, f.wait_for, f.run);
    out.push_back(std::move(f.run));
  }
  flight_.clear();
  captured_.clear();
  return out;
}

}  // namespace lw
