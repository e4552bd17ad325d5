#pragma once
// What every measurement of one target shares: the checked address, the route,
// the reserved source port, the prober (raw socket + capture) and the closed
// port that discovery found. One session serves the capacity phase and the
// avail-bw phase of `linkwidth measure`, so both use one 5-tuple.
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "app/plumbing/config.hpp"
#include "app/plumbing/discovery.hpp"
#include "app/plumbing/net.hpp"
#include "app/plumbing/own_counters.hpp"
#include "app/plumbing/prober.hpp"
#include "estimate/load_budget.hpp"
#include "estimate/reply_rate.hpp"
#include "plan/capacity_plan.hpp"
#include "report/result.hpp"

namespace lw {

struct Session {
  IpAddr dst;
  Route route;
  int packet_size = 1500;  // load packet size after clamping to the MTU
  std::unique_ptr<PortReservation> reserved;
  std::unique_ptr<Prober> prober;
  SeqAllocator seqs{0};
  FlowId flow;
  DiscoveryResult disc;
  ReplierInfo replier;            // who answers in the target's name (app/path_checks)
  std::vector<Warning> warnings;  // from setup (packet size clamp, discovery, replier)
  Nanos t_begin = 0;
  // Replies asked of each host per second (--max-replies), lowered when a host
  // turns out to limit its RSTs; warnings it found that no result holds yet.
  ReplyGovernor replies{100};
  std::vector<Warning> reply_warnings;
  bool reply_loss_reported = false;
  // Added once to the next train's start, after its reply-budget wait: after
  // a send stall the next train starts at a random phase of whatever
  // preempted us (the budget alone would keep a fixed cadence).
  Nanos start_jitter = 0;
  // The --max-load ledger (estimate/load_budget.hpp): capacity_bps is kept
  // across phases; t0 and bytes0 restart with each (begin_load_phase) and
  // skip the shaper probe (exclude_from_ledger).
  LoadLedger load;
  // This host's own traffic through our interface, sampled between the
  // avail-bw phase's trains (estimate/own_traffic.hpp).
  OwnCounters own;
  int duplicate_replies = 0;  // replies that came twice or more (extra copies)
  int duplicates_reported = 0;
  int late_reported = 0;  // Prober::late_replies() already warned of
  Nanos wait_reported = 0;  // the longest grown reply wait -v has printed
};

// What run_train() adds to a train's run.
struct GovernedRun {
  TrainRun run;
  // A reply check during this call found that the target limits its replies:
  // this train's lost replies were the limit's, not the path's.
  bool replies_limited = false;
};

// Every measurement train goes through here: waits until the replies the
// train asks of each host fit the reply budget, sends it (Prober::run), and
// when marker replies keep going missing runs the reply check of
// estimate/reply_rate.hpp (trains of bare SYNs to the target, within
// --max-bytes and before t_cap). Warnings land in s.reply_warnings.
// `after_run` is called right after the train's own replies are in, before
// any reply check (the run records of --save-pcap close the train there).
GovernedRun run_train(Session& s, const Config& c, const Train& train,
                      const std::vector<int>& wait_for, Nanos reply_timeout, Nanos t_cap,
                      bool any = false, Nanos busy_wait = 0,
                      const std::function<void(const TrainRun&)>& after_run = nullptr);

// run_train() in two halves, for trains sent one after the other before
// their replies are in (pipelined: Prober::send/collect): budget_train()
// waits until the train's replies fit the reply budget, before its send;
// account_train() counts its replies and runs the reply check if due, after
// they are in (nothing may be in flight then: the check sends trains).
void budget_train(Session& s, const Train& train, Nanos t_cap);
GovernedRun account_train(Session& s, const Config& c, const Train& train, TrainRun run,
                          Nanos reply_timeout, Nanos t_cap);

// Waits (stop-aware) until `n` replies of `host` fit the reply budget and
// spends them; for probes run_train() does not count (TTL-limited SYNs that
// may reach the host). False if stopped or the wait would pass t_cap.
bool wait_for_reply_budget(Session& s, const IpAddr& host, int n, Nanos t_cap);

// The --max-load gate: the earliest start of a train of `next_bytes` such
// that everything sent since the phase began, this train included, averages
// at most --max-load x s.load.capacity_bps (no bound while that is 0).
// begin_load_phase() restarts the count (a phase's runner does it).
Nanos load_ready(const Session& s, const Config& c, std::uint64_t next_bytes);
void begin_load_phase(Session& s);

// Moves the reply warnings not yet reported into `to`.
void take_reply_warnings(Session& s, std::vector<Warning>& to);

// Where a phase began: its time and the prober's counters then.
struct PhaseStart {
  Nanos t0 = 0;
  std::uint64_t bytes0 = 0;
  std::uint64_t packets0 = 0;
};
PhaseStart phase_start(const Session& s);

// A phase's close: the reply warnings not yet reported join `warnings` (and
// are returned, for the end note: they are not re-derived offline); bytes,
// packets and seconds since `at` are stored through the pointers.
std::vector<Warning> close_phase(Session& s, const PhaseStart& at, std::vector<Warning>& warnings,
                                 std::uint64_t* bytes, std::uint64_t* packets, double* elapsed_s);

// Resolves and checks the target (lw::Error with exit 2 for forbidden ones).
IpAddr checked_target(const Config& c);

// The load packet size: --packet-size, lowered to the interface MTU (warning).
int effective_packet_size(const Config& c, const Route& r, std::vector<Warning>& w);

// Resolve, route, reserve the port, open socket and capture, find a closed
// port. Throws lw::Error on any failure (privileges, filtered target, ...).
// `any_peer`: the capture also takes TCP replies from hosts other than the
// target (hops: markers addressed to routers).
std::unique_ptr<Session> open_session(const Config& c, const std::atomic<bool>& stop,
                                      bool any_peer = false);

// Fills the endpoint fields every result document carries.
void describe_endpoints(const Session& s, const Config& c, CapacityResult& r);

// How long to wait for replies after a train: generous against the measured
// RTT (20 RTTs), bounded by --reply-timeout, and never under 3 RTTs.
Nanos reply_wait(const Session& s, const Config& c);

// The wait for one train's replies, `wait` (reply_wait) or longer where the
// path's queues have grown since discovery: twice the longest time a reply
// took so far (`longest_rtt`, late ones included: Prober::longest_rtt) plus
// 10 ms, but never over `timeout` (--reply-timeout) nor `room` (what is left
// of the phase's time once the train is sent; the time cap holds). Pure.
Nanos loaded_reply_wait(Nanos wait, Nanos longest_rtt, Nanos timeout, Nanos room);
// The same for a train of `span` sent now through the session's prober,
// within `t_cap`.
Nanos loaded_reply_wait(Session& s, const Config& c, Nanos wait, Nanos span, Nanos t_cap);

}  // namespace lw
