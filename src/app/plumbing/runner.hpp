#pragma once
// The one seam between a measurement phase and the world. Every phase
// (capacity, hops, avail-bw, and the ones to come) plans its trains and reads
// their outcomes through a ProbeRunner; it never touches the prober, the
// session or a clock itself. Two implementations:
//   LiveRunner   (app/runner.cpp)   sends through the session's prober and
//                                   reply budget, and with --save-pcap notes
//                                   every train, clock reading and stop;
//   ReplayRunner (app/analyze.cpp)  hands back what a recorded run saw, in
//                                   the order the live run asked for it.
// So `linkwidth analyze` runs the live phase code, not a copy of it.
//
//   const StopReason why = runner.admit(train, [&] { return next_start; });
//   if (why != StopReason::kNone) { res.stop_reason = why; break; }  // a cap or a signal
//   TrainResult r = runner.run(train, {train.markers, false, busy_wait(expect_s)});
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "linkwidth/time.hpp"
#include "match/match.hpp"
#include "nlohmann/json.hpp"
#include "plan/capacity_plan.hpp"
#include "plan/probe.hpp"
#include "report/stop_reason.hpp"

namespace lw {

// How one train is sent and waited for.
struct TrainOptions {
  std::vector<int> wait_for;  // probes whose replies end the wait (with `any`: one of them)
  bool any = false;
  Nanos busy_wait = 0;  // poll without sleeping this long once replies are due
  // Extra fields of the train's run record (capacity: its length group, ...).
  nlohmann::json note = nlohmann::json::object();
};

// One train as it went out (replay: as recorded) and what came back.
struct TrainResult {
  Train train;
  TrainOutcome outcome;
  Nanos start_mono = 0;  // when the pacer started (replay: 0 in older records)
  Nanos end_mono = 0;    // when we stopped waiting for replies
  // A reply check right after it found that the target limits its replies:
  // the train's lost replies were the limit's, not the path's (session.hpp).
  bool replies_limited = false;
};

class ProbeRunner {
 public:
  virtual ~ProbeRunner() = default;

  // The per-train gate, the same for every phase, in this order: the stop
  // flag, --max-bytes, then `start_at()` (the phase's idle rule; it may read
  // now()), the time cap (start + span + reply wait past t_cap), the wait
  // until start, the stop flag again. Returns kNone when the train may go,
  // else the stop reason (interrupted, max_bytes, max_time, incomplete).
  virtual StopReason admit(const Train& train, const std::function<Nanos()>& start_at,
                           Nanos span = 0) = 0;
  // The time cap alone, for a phase that plans its next start after a train
  // (capacity): kNone or kMaxTime.
  virtual StopReason check_time(Nanos start) = 0;
  // Sends the train (within the reply budget) and collects its replies.
  virtual TrainResult run(const Train& train, const TrainOptions& o) = 0;

  // Pipelined trains (a long round trip): send() puts a train out, after the
  // gate (admit) as for run(), without waiting for its replies, and returns
  // when it started; collect() waits for the replies of every train sent
  // since the last collect() and returns them in send order. No run() while
  // trains are in flight. This default runs each train at once (the replay:
  // the records hold every train whole).
  virtual Nanos send(const Train& train, const TrainOptions& o) {
    pending_.push_back(run(train, o));
    return pending_.back().start_mono;
  }
  // Pipelined: the earliest time from `start` at which a train of `span`
  // goes out while no reply of a train in flight is due.
  virtual Nanos quiet_start(Nanos start, Nanos /*span*/) { return start; }
  virtual std::vector<TrainResult> collect() {
    std::vector<TrainResult> out;
    out.swap(pending_);
    return out;
  }

  virtual Nanos now() = 0;                  // CLOCK_MONOTONIC (noted / as recorded)
  virtual void wait_until(Nanos mono) = 0;  // or until stopped
  virtual bool stopped() = 0;
  // Replies a train may ask of the target at once (ReplyGovernor::max_burst).
  virtual int reply_burst() = 0;
  // After a train our host sent off schedule: the next one starts at a
  // random phase of whatever preempted us.
  virtual void after_stall() {}
  // Our own link's avail-bw from its counters so far (OwnCounters::availbw),
  // read after each avail-bw train to judge whether our queue or the path
  // spread it (evaluate_paced_train); 0: not known (no shaper rate, no
  // counters, or a phase that does not read them).
  virtual double own_link_availbw() { return 0; }
  virtual std::uint64_t bytes_sent() = 0;
  virtual std::uint64_t packets_sent() = 0;
  virtual unsigned capture_drops() = 0;
  // How long to wait for a train's replies (session.hpp, reply_wait).
  virtual Nanos reply_wait() const = 0;

  // The --max-load budget (estimate/load_budget.hpp). The capacity the
  // phase's average probing rate is held under max_load of, from now on: a
  // conservative one (budget_capacity(), never a rate lost load can inflate);
  // 0 = nothing measured yet (no bound). A live runner's admit() then also
  // waits until the bytes really sent since its phase began, over the time
  // since, leave room for the train (load_ready_at): the idle rules of the
  // phases are budgeted with this rate too, and the gate catches what they
  // miss (reply checks, rates revised down later). It carries over to the
  // session's next phase. The replay waits for nothing, so keeps it only.
  virtual void set_load_capacity(double capacity_bps) { load_capacity_ = capacity_bps; }
  virtual double load_capacity() const { return load_capacity_; }

 private:
  double load_capacity_ = 0;
  std::vector<TrainResult> pending_;
};

// The one busy-wait rule: poll while the replies are due (`expect_s`: how
// long they take to come in after the head's), plus 2 ms, at most 50 ms. The
// prober opens the window when the head's reply is due (its send + the
// smallest RTT seen, app/prober.hpp), so no RTT belongs in `expect_s`.
Nanos busy_wait(double expect_s);

// What a phase knows of the path it probes, live (from the session) or
// replayed (from the run records).
struct PhasePath {
  FlowId flow;          // the measurement's 5-tuple (dport: the closed port)
  int packet_size = 0;  // load packet size L after the MTU clamp
  double rtt_s = 0;     // from discovery
  SeqAllocator& seqs;   // sequence numbers of the phase's probes
};

struct Session;
struct Config;
struct GovernedRun;

// The live runner of one phase of a session: trains go through the session's
// reply budget and reply checks (session.hpp, run_train), ending by t_cap, and
// the session's --max-load gate (session.hpp, load_ready), whose count of
// bytes and time starts when the runner is made.
class LiveRunner : public ProbeRunner {
 public:
  LiveRunner(Session& s, const Config& c, const char* phase, Nanos t_cap);

  StopReason admit(const Train& train, const std::function<Nanos()>& start_at,
                   Nanos span = 0) override;
  StopReason check_time(Nanos start) override;
  TrainResult run(const Train& train, const TrainOptions& o) override;
  Nanos send(const Train& train, const TrainOptions& o) override;
  std::vector<TrainResult> collect() override;
  Nanos quiet_start(Nanos start, Nanos span) override;
  Nanos now() override;
  void wait_until(Nanos mono) override;
  bool stopped() override;
  int reply_burst() override;
  void after_stall() override;
  double own_link_availbw() override;
  std::uint64_t bytes_sent() override;
  std::uint64_t packets_sent() override;
  unsigned capture_drops() override;
  Nanos reply_wait() const override { return reply_wait_; }
  void set_load_capacity(double capacity_bps) override;
  double load_capacity() const override;

 private:
  StopReason refuse(StopReason why);
  // The phase's view of a governed run (and its reply-limit note).
  TrainResult result_of(const Train& train, const GovernedRun& g);

  Session& s_;
  const Config& c_;
  const char* phase_;
  Nanos t_cap_;
  Nanos reply_wait_;
  int checks_ = 0;
  bool stop_noted_ = false;
  double own_noted_ = 0;  // the last OwnLinkNote's value
  std::vector<Train> flight_;  // sent, replies not yet collected
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace lw
