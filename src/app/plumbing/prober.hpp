#pragma once
// Wires send -> capture -> match for one train at a time. Owns the raw socket,
// the capture and the packet builder for a run; counts what it sent.
//
// A run opens one Prober, after route lookup and port reservation: its
// constructor checks privileges first (a clear message naming what is missing),
// opens the socket and the capture, then drops every capability and any root
// identity of the process (app/privileges.hpp). Nothing after it needs them;
// a second Prober in the same process would fail with a privilege error. It
// also enforces the hard caps of Config in one place: the pacer refuses trains
// above --max-rate and run() refuses a train that would pass --max-bytes.
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "app/plumbing/config.hpp"
#include "app/plumbing/net.hpp"
#include "app/plumbing/privileges.hpp"
#include "capture/live_capture.hpp"
#include "match/match.hpp"
#include "nlohmann/json.hpp"
#include "plan/probe.hpp"
#include "send/pacer.hpp"
#include "send/packet_builder.hpp"
#include "send/raw_socket.hpp"

namespace lw {

struct TrainRun {
  std::vector<SendRecord> sent;
  TrainOutcome outcome;
  Nanos start_mono = 0;  // when the pacer started
  Nanos end_mono = 0;    // when we stopped waiting for replies
};

class Prober {
 public:
  // `any_peer`: capture our port's TCP with every host, not only the target
  // (markers addressed to routers on the path draw RST/ACKs from them).
  Prober(const Route& route, const IpAddr& target, std::uint16_t sport,
         const std::atomic<bool>& stop, const Config& c, bool any_peer = false);

  // Sends the train on its schedule and waits until every probe in `wait_for`
  // (with `any`: one of them) has a reply, or `reply_timeout` has passed since
  // the last send. For `busy_wait` from when the replies are due (the end of
  // sending, or the head's send + the RTT of set_rtt() if later) it polls the
  // capture without sleeping; before and after, it sleeps in poll().
  // With `settle` > 0 it stops waiting `settle` after the first reply among
  // `wait_for` (discovery: the rest answer about then or not at all).
  // With `quiet` > 0 it also stops once replies have come and none has for
  // max(quiet, 3 x the longest gap between them so far) (a long stream whose
  // tail a shaper's full queue dropped).
  TrainRun run(const Train& train, const std::vector<int>& wait_for, Nanos reply_timeout,
               bool any = false, Nanos busy_wait = 0, Nanos settle = 0, Nanos quiet = 0);

  // Pipelined trains (long round trips): send() paces a train out and
  // returns without waiting for its replies; collect() waits until every
  // train sent since the last collect() has a reply to each probe of its
  // `wait_for`, or `reply_timeout` has passed since the last send, and
  // returns their runs in send order. The busy windows are run()'s, one per
  // train; between sends, idle_until() sleeps except in them. run() refuses
  // to run while trains are in flight.
  // send() returns when the pacer started the train (TrainRun::start_mono).
  Nanos send(const Train& train, const std::vector<int>& wait_for, Nanos busy_wait);
  std::vector<TrainRun> collect(Nanos reply_timeout);
  void idle_until(Nanos mono);
  // The earliest time from `t` at which a train of `span` is sent while no
  // reply of a train in flight is due (each expected from one RTT after its
  // head for its time at the bottleneck, +-1 ms + RTT/100): our own sending
  // then never overlaps the replies we time (a half-duplex or shared access
  // link, a busy CPU, the lab's delay element).
  Nanos quiet_start(Nanos t, Nanos span) const;
  bool in_flight() const { return !flight_.empty(); }

  // With --save-pcap: a JSON note in the file (capture/run_record.hpp) that
  // lets `linkwidth analyze` tell the run's phases and trains apart.
  void note(const nlohmann::json& j);

  // The path's round trip (from discovery): when replies are due. Each run
  // lowers it to the smallest reply time it saw (from a probe's capture to
  // its reply: ICMP from a near router too); 0 = unknown.
  void set_rtt(Nanos rtt) { rtt_ = rtt > 0 ? rtt : 0; }
  Nanos rtt() const { return rtt_; }
  // The longest time any reply took from its probe's send, late replies
  // included (0 = none yet): queues that fill under load (our own uplink's,
  // a remote one behind TCP) can hold replies far longer than the round trip
  // of discovery, and a wait sized on that one took them for lost (a 157 ms
  // queue at 94% load behind a 100 ms wait: "the target stopped answering").
  Nanos longest_rtt() const { return longest_rtt_; }
  // Replies that came after their train's wait had ended (found among the
  // packets a later train drained as stale), and the longest such delay.
  int late_replies() const { return late_replies_; }
  Nanos longest_late_rtt() const { return longest_late_rtt_; }

  std::uint64_t packets_sent() const { return packets_; }
  std::uint64_t bytes_sent() const { return bytes_; }
  CaptureStats capture_stats() { return capture_.stats(); }
  const IpAddr& self() const { return route_.source; }
  bool stopped() const { return stop_.load(); }
  double max_rate_bps() const { return max_rate_bps_; }
  // What the constructor's privilege drop left (verified).
  const PrivilegeDrop& privileges() const { return privileges_; }

 private:
  // Runs the privilege check before any member opens a socket.
  struct PrivilegeGate {
    explicit PrivilegeGate(const IpAddr& target);
  };

  struct InFlight {
    Train train;
    std::vector<int> wait_for;
    Nanos busy_wait = 0;
    TrainRun run;
    Nanos sent_at = 0;
    bool done = false;
  };
  // Builds the train's packets, checks --max-bytes, sends it on its schedule
  // and counts it (start_mono and sent filled).
  TrainRun transmit(const Train& train);
  void learn_rtt(const TrainOutcome& o);
  // A train we stopped waiting for with replies still missing: kept until
  // the next drain of stale packets, which may hold them (late_replies()).
  // Kept for kLateHorizon after we stopped waiting, at most kMaxUnanswered
  // of them: a late reply may come in the idle before the next train or
  // while a later train is waiting for its own.
  struct Unanswered {
    Train train;
    std::vector<SendRecord> sent;
    TrainOutcome outcome;
    Nanos ended = 0;  // CLOCK_MONOTONIC: when we stopped waiting
  };
  static constexpr Nanos kLateHorizon = 3 * kSec;
  static constexpr std::size_t kMaxUnanswered = 16;
  void keep_if_unanswered(const Train& train, const std::vector<int>& wait_for,
                          const TrainRun& run);
  // Counts the replies among `packets` to trains kept unanswered, then
  // forgets the trains past the horizon or answered in full.
  void find_late(const std::vector<Decoded>& packets);
  // Drains the packets that came since the last train (replies too late for
  // theirs, or strays) and forgets them, after counting the late replies.
  void drain_stale();
  // How early or late a reply may come against the smallest RTT seen (a
  // timer that wakes late, the RTT's own jitter): 1 ms + RTT/100.
  Nanos reply_jitter() const { return kMs + rtt_ / 100; }
  std::pair<Nanos, Nanos> spin_window(const InFlight& f) const;
  // Re-matches the trains in flight whose replies are not all in (when
  // `fresh` packets came); true when every train's are.
  bool update_flight(bool fresh, Nanos now);
  Nanos sleep_for(Nanos now, Nanos limit) const;

  Route route_;
  IpAddr target_;
  const std::atomic<bool>& stop_;
  std::uint64_t max_bytes_;
  double max_rate_bps_;
  PrivilegeGate gate_;
  RawSocket socket_;
  LiveCapture capture_;
  PacketBuilder builder_;
  Pacer pacer_;
  std::vector<Decoded> captured_;
  std::vector<InFlight> flight_;
  std::uint64_t packets_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint32_t notes_ = 0;
  Nanos rtt_ = 0;
  Nanos longest_rtt_ = 0;
  Nanos longest_late_rtt_ = 0;
  int late_replies_ = 0;
  std::vector<Unanswered> unanswered_;
  bool saving_ = false;  // --save-pcap: notes go into the file
  PrivilegeDrop privileges_;
};

// The pcap filter of one run: our TCP flow and the ICMP errors sent to us.
// IPv6: ICMPv6 errors only (type < 128, not neighbour discovery), and every
// packet to us whose fixed header is followed by an extension header (BPF's
// `tcp`/`icmp6` see the transport only right behind the fixed header; the
// decoder walks the chain and the matcher keeps what is ours).
std::string capture_filter(const IpAddr& self, const IpAddr& target, std::uint16_t sport,
                           bool any_peer = false);

}  // namespace lw
