#include "app/plumbing/runner.hpp"

#include <algorithm>
#include <random>

#include "app/plumbing/config.hpp"
#include "app/plumbing/run_notes.hpp"
#include "app/plumbing/session.hpp"

namespace lw {

Nanos busy_wait(double expect_s) {
  return std::min<Nanos>(from_seconds(expect_s) + 2 * kMs, 50 * kMs);
}

LiveRunner::LiveRunner(Session& s, const Config& c, const char* phase, Nanos t_cap)
    : s_(s), c_(c), phase_(phase), t_cap_(t_cap), reply_wait_(lw::reply_wait(s, c)) {
  begin_load_phase(s_);
}

void LiveRunner::set_load_capacity(double capacity_bps) { s_.load.capacity_bps = capacity_bps; }
double LiveRunner::load_capacity() const { return s_.load.capacity_bps; }

StopReason LiveRunner::refuse(StopReason why) {
  // The replay reads the gate's verdict from here (app/analyze.cpp).
  s_.prober->note(note_json(StoppedNote{why}));
  return why;
}

StopReason LiveRunner::admit(const Train& train, const std::function<Nanos()>& start_at,
                             Nanos span) {
  if (stopped()) return refuse(StopReason::kInterrupted);
  if (s_.prober->bytes_sent() + train.total_bytes() > c_.max_bytes)
    return refuse(StopReason::kMaxBytes);
  // The phase's own idle rule, and the --max-load gate on what was really sent.
  const Nanos start = std::max(start_at(), load_ready(s_, c_, train.total_bytes()));
  if (std::max(start, mono_now()) + span + reply_wait_ > t_cap_)
    return refuse(StopReason::kMaxTime);
  wait_until(start);
  if (stopped()) return refuse(StopReason::kInterrupted);
  s_.own.sample(mono_now(), s_.prober->bytes_sent(), s_.prober->packets_sent());
  return StopReason::kNone;
}

StopReason LiveRunner::check_time(Nanos start) {
  if (start + reply_wait_ > t_cap_) return refuse(StopReason::kMaxTime);
  return StopReason::kNone;
}

TrainResult LiveRunner::run(const Train& train, const TrainOptions& o) {
  s_.prober->note(note_json(TrainNote{phase_, train.id, train.probes.size()}, o.note));
  const GovernedRun g =
      run_train(s_, c_, train, o.wait_for, reply_wait_, t_cap_, o.any, o.busy_wait,
                [&](const TrainRun& r) {  // replies after this were not used
                  s_.prober->note(note_json(TrainDoneNote{train.id, r.start_mono, r.end_mono}));
                });
  return result_of(train, g);
}

TrainResult LiveRunner::result_of(const Train& train, const GovernedRun& g) {
  if (g.replies_limited) s_.prober->note(note_json(ReplyLimitNote{train.id}));
  TrainResult r;
  r.train = train;
  r.outcome = g.run.outcome;
  r.start_mono = g.run.start_mono;
  r.end_mono = g.run.end_mono;
  r.replies_limited = g.replies_limited;
  return r;
}

Nanos LiveRunner::send(const Train& train, const TrainOptions& o) {
  s_.prober->note(note_json(TrainNote{phase_, train.id, train.probes.size()}, o.note));
  budget_train(s_, train, t_cap_);
  flight_.push_back(train);
  return s_.prober->send(train, o.wait_for, o.busy_wait);
}

std::vector<TrainResult> LiveRunner::collect() {
  std::vector<TrainRun> runs =
      s_.prober->collect(loaded_reply_wait(s_, c_, reply_wait_, 0, t_cap_));
  std::vector<TrainResult> out;
  // Every train's replies are in before any reply check sends its own.
  for (std::size_t k = 0; k < runs.size(); ++k) {
    s_.prober->note(note_json(TrainDoneNote{flight_[k].id, runs[k].start_mono, runs[k].end_mono}));
  }
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const Train& train = flight_[k];
    out.push_back(
        result_of(train, account_train(s_, c_, train, std::move(runs[k]), reply_wait_, t_cap_)));
  }
  flight_.clear();
  return out;
}

Nanos LiveRunner::quiet_start(Nanos start, Nanos span) {
  return s_.prober->quiet_start(start, span);
}

Nanos LiveRunner::now() {
  const Nanos t = mono_now();
  s_.prober->note(note_json(ClockNote{t}));
  return t;
}

void LiveRunner::wait_until(Nanos mono) {
  // (With trains in flight it polls without sleeping while their replies are due.)
  while (mono_now() < mono && !s_.prober->stopped()) s_.prober->idle_until(mono);
}

bool LiveRunner::stopped() {
  ++checks_;
  const bool s = s_.prober->stopped();
  if (s && !stop_noted_) {
    // The replay answers "stopped" from this check on.
    s_.prober->note(note_json(StopNote{checks_}));
    stop_noted_ = true;
  }
  return s;
}

int LiveRunner::reply_burst() {
  const int b = s_.replies.max_burst();
  // Noted only once a limit is known: replay reads "no limit" otherwise.
  if (b != ReplyGovernor::kNoBurstLimit) s_.prober->note(note_json(BurstNote{b}));
  return b;
}

void LiveRunner::after_stall() {
  // Whatever preempted us may be periodic (a timer, another process): start
  // the next train at a random phase of it, not locked to it.
  s_.start_jitter = std::uniform_int_distribution<Nanos>(0, 10 * kMs)(rng_);
}

double LiveRunner::own_link_availbw() {
  const double v = s_.own.availbw(s_.packet_size);
  // The replay reads it from the note (app/analyze.cpp).
  if (v != own_noted_) s_.prober->note(note_json(OwnLinkNote{v}));
  own_noted_ = v;
  return v;
}

std::uint64_t LiveRunner::bytes_sent() { return s_.prober->bytes_sent(); }
std::uint64_t LiveRunner::packets_sent() { return s_.prober->packets_sent(); }

unsigned LiveRunner::capture_drops() {
  const unsigned n = s_.prober->capture_stats().dropped;
  s_.prober->note(note_json(DropsNote{phase_, n}));
  return n;
}

}  // namespace lw
