#pragma once
// Probes for locating the bottleneck hop (LinkWidth §3.2-3.3, Figures 4-5):
// the TTL sweep that discovers the path in the train's own 5-tuple, and the
// recursive packet train (head markers for hops 1..H, RST load, tail markers
// for hops H..1). Plain data only: no sockets, no clocks.
//
//   FlowId flow{src, dst, sport, dport};
//   std::vector<HopMarker> hops = {{1, 0, MarkerKind::kTtl}, {2, r2, MarkerKind::kAddr},
//                                  {3, dst, MarkerKind::kTarget}};
//   RecursiveTrain rt = make_recursive_train({flow, hops, 40, 1500, 2}, 0, seqs);
//   // rt.head[k], rt.tail[k]: indices of hop k's markers; rt.bits[k]: bits between them.
#include <cstdint>
#include <string>
#include <vector>

#include "linkwidth/run_names.hpp"
#include "plan/capacity_plan.hpp"
#include "plan/probe.hpp"

namespace lw {

// MarkerKind (how a marker draws its reply from hop k: ttl, addr, target) is
// in linkwidth/run_names.hpp with its JSON names.

struct HopMarker {
  int ttl = 0;             // the hop's position on the path (1-based)
  IpAddr addr;  // destination of kAddr markers (ignored otherwise)
  MarkerKind kind = MarkerKind::kTtl;
};

// Which markers a hop starts with. `mode`: "ttl" (every router TTL-limited),
// "addr" (addressed wherever the address is usable), "auto" (addressed where
// the router answered a SYN on its own address, TTL-limited elsewhere). The
// last hop (the target) always gets kTarget.
MarkerKind initial_marker_kind(HopMarkers mode, bool last, bool addressable,
                               bool answers_tcp);

// Auto mode, per hop: the state that decides when a hop whose markers of one
// kind draw nothing switches to the other kind (once; never flapping).
struct MarkerChoice {
  MarkerKind kind = MarkerKind::kTtl;
  int asked = 0;     // trains with the current kind
  int answered = 0;  // of those, trains with at least one reply
  bool switched = false;
  // Records one train; returns true if the hop switched kind just now: after
  // `patience` trains of its kind with no reply at all, a TTL-marked hop goes
  // to kAddr if it answers TCP, an addressed one goes to kTtl.
  bool record(bool got_reply, bool answers_tcp, int patience = 2);
};

// One SYN per TTL in `ttls`, all in `flow`, `spacing` apart: the replies (ICMP
// time exceeded quoting the probe, RST/ACK from the target) name the path.
Train make_ttl_sweep(const FlowId& flow, const std::vector<int>& ttls, Nanos spacing, int train_id,
                     SeqAllocator& seqs);

// One SYN to each address, from flow.sport to flow.dport: does that router
// answer TCP on its own address?
Train make_addr_check(const FlowId& flow, const std::vector<IpAddr>& addrs, Nanos spacing,
                      int train_id, SeqAllocator& seqs);

struct RecursiveTrainParams {
  FlowId flow;
  std::vector<HopMarker> hops;  // hop 1..H in path order; hops.back() is the target
  int load_packets = 40;
  std::uint16_t packet_size = 1500;
  int drain_packets = 2;  // full-TTL RSTs right before the head: empty shapers' token buckets
};

struct RecursiveTrain {
  Train train;
  std::vector<int> head, tail;  // per hop (same order as params.hops): probe indices
  // Per hop: IP bits that cross a link after hop k's head marker up to and
  // including its tail marker. Every one of those packets reaches hop k (head
  // markers of later hops, the load, tail markers of later hops), so at a
  // bottleneck of rate C the two markers leave it bits[k]/C apart.
  std::vector<double> bits;
};

RecursiveTrain make_recursive_train(const RecursiveTrainParams& p, int train_id,
                                    SeqAllocator& seqs);

// Linux rate-limits ICMP errors per destination with a token bucket
// (net.ipv4.icmp_ratelimit = 1000 ms: one token per second, at most 6 saved;
// measured in the lab: 6 of 20 TTL-expired pings answered at 2 ms spacing).
// This models one router's bucket so trains are only sent when it can answer
// them. Times are plain numbers passed in: no clock here.
class IcmpBudget {
 public:
  IcmpBudget(double rate_per_s, double burst) : rate_(rate_per_s), burst_(burst), tokens_(burst) {}
  // Earliest time >= now at which `need` tokens are available.
  Nanos ready_at(double need, Nanos now) const;
  void spend(double n, Nanos now);
  // The router left a reply out: its real bucket is empty (another prober, or
  // an earlier run, spent it), so the model starts again from zero.
  void drain(Nanos now);
  double tokens(Nanos now) const;

 private:
  double rate_, burst_;
  double tokens_;
  Nanos last_ = 0;
  bool started_ = false;
};

}  // namespace lw
