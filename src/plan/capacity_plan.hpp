#pragma once
// The capacity train (LinkWidth §3.3, Figure 6 with one hop): a SYN head marker,
// N RST load packets of L bytes, a SYN tail marker, all in one 5-tuple so that
// per-flow load balancers keep the train on one path. Markers are told apart by
// sequence number, not by port.
#include <cstdint>

#include "plan/probe.hpp"

namespace lw {

struct FlowId {
  IpAddr src;
  IpAddr dst;
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
  // IPv6: the one flow label of the whole run (0 over IPv4). IPv6 ECMP hashes
  // the label with the addresses, so it is part of the flow like the ports.
  std::uint32_t flow_label = 0;
  // How markers to dst draw its replies; plan functions rewrite their trains
  // for it (plan/target_marker.hpp).
  TargetMarker marker = TargetMarker::kClosedSyn;
};

// Appends to `t` a probe of `flow` (addresses, ports, IPv6 flow label) with
// these fields, its index and IP ID its position in the train. The one place
// a train's probe is filled in (capacity, pair and shaper trains).
void push_flow_probe(Train& t, const FlowId& flow, std::uint8_t ttl, std::uint8_t flags,
                     std::uint32_t seq, std::uint16_t ip_len, Role role, Nanos offset);

struct CapacityTrainParams {
  FlowId flow;
  int load_packets = 32;             // N
  std::uint16_t packet_size = 1500;  // L, IP bytes of each load packet
  int drain_packets = 2;             // MTU RSTs sent right before the head marker
  bool warmup = true;                // a SYN sent ahead of the train
  Nanos warmup_lead = 50 * kUs;      // how long before the drain/head the warm-up SYN goes
  int markers = 2;                   // head + tail; >2 puts extra markers evenly in the load
  // Load packets ahead of the second marker when there are more than two
  // (0: the even split). The rest of the markers split the remaining load
  // evenly. A paced train's ratio runs from that marker to the tail
  // (estimate/availbw.cpp), so three markers with it at a fifth of the load
  // time the same span as six evenly spaced ones, for four replies instead
  // of seven.
  int first_segment = 0;
  std::uint8_t ttl = 64;
  // Spacing between consecutive packets from the head marker on: 0 sends the
  // train back to back (capacity); a gap g offers the rate L·8/g (the paced
  // trains of the avail-bw search, LinkWidth §3.4 / pathload's streams).
  Nanos gap = 0;
  // Spacing of the drain packets and of the head after the last of them: 0 sends
  // them back to back (at line rate). apply_rate_cap sets it only when the drain
  // burst would not fit the --max-rate bucket (more than two drain packets).
  Nanos drain_gap = 0;
};

// The gap that offers `rate_bps` with `packet_size`-byte packets.
Nanos gap_for_rate(double rate_bps, int packet_size);
// The same, rounded up: the smallest gap that stays at or under `rate_bps`.
Nanos min_gap_for_rate(double rate_bps, int packet_size);

// --max-rate is a token bucket: `rate_bps` over time, bursts of up to
// kRateBurstBytes: two full-size packets and two SYNs (the warm-up SYN, the
// drain pair and the head marker of a capacity train; or load packets with
// markers riding right behind them). Over IPv6 the two SYNs are 60 bytes each.
constexpr double kRateBurstBytes = 2 * 1500 + 2 * 40;
constexpr double kRateBurstBytes6 = 2 * 1500 + 2 * 60;
inline double rate_burst_bytes(const IpAddr& dst) {
  return dst.is_v6() ? kRateBurstBytes6 : kRateBurstBytes;
}

// Index of the first probe that a bucket of (rate_bps, burst_bytes), full at
// the train's start, could not let go at its planned offset; -1 if the whole
// schedule fits. The pacer refuses trains that do not fit (send/pacer.hpp).
int first_over_rate(const Train& t, double rate_bps, double burst_bytes = kRateBurstBytes);

// Spaces a capacity-style train to fit the bucket of `max_rate_bps`: the gap
// from the head on at least min_gap_for_rate(max_rate_bps, packet_size + 40)
// (40 bytes (IPv6: 60) of slack per gap for markers riding behind load packets), and the
// drain packets spaced only if they do not fit the burst. A slower paced train
// keeps its gap.
void apply_rate_cap(CapacityTrainParams& p, double max_rate_bps);

// For any train: delays packets (and everything after them, keeping the rest
// of the schedule) just enough that first_over_rate(t, rate_bps, burst) is -1.
void space_to_rate(Train& t, double rate_bps, double burst_bytes = kRateBurstBytes);

// The second offered rate of the capacity trains (estimate/capacity.hpp,
// fit_rate_dependence): `fast_bps` is the rate our back-to-back (or
// --max-rate paced) trains were measured to leave at, `capacity_bps` the
// estimate so far (which cross traffic biases low). The slow trains go at
// fast / 2.5, but at least 2 x the estimate so that the path still
// compresses them (and the narrow link stays busy through the whole train),
// and only when that is still 1.5x apart from the fast rate: 0 otherwise
// (one rate, as before). Being slower than trains we already send, they
// stay within every rate cap.
double slow_train_rate(double fast_bps, double capacity_bps);
// Whether the `measured`-th measured train (0-based; lengths alternate short,
// long) goes at the slow rate: pairs of trains cycle fast, ..., slow.
bool slow_train_turn(int measured);
constexpr int kSlowTrainCycle = 2;  // every kSlowTrainCycle-th pair is slow

// Hands out unique marker sequence numbers for one run (step 2 keeps them
// distinct even if a middlebox adds 1 to what it acknowledges).
class SeqAllocator {
 public:
  explicit SeqAllocator(std::uint32_t base) : next_(base) {}
  std::uint32_t next() {
    std::uint32_t s = next_;
    next_ += 2;
    return s;
  }

 private:
  std::uint32_t next_;
};

Train make_capacity_train(const CapacityTrainParams& p, int train_id, SeqAllocator& seqs);

// The paper's TOPP train (LinkWidth §3.5, Figure 6), as published: a SYN head
// marker, m pairs of RST load packets, a SYN tail marker. The gap inside a pair
// (Δr_i) sets the offered rate; the gap between pairs (Δr_t) is fixed.
struct PairTrainParams {
  FlowId flow;
  int pairs = 10;                    // m = npackets / 2
  std::uint16_t packet_size = 1500;  // IP bytes of each load packet
  Nanos intra_gap = 0;               // Δr_i, computed per rate
  Nanos inter_gap = 100 * kUs;       // Δr_t, user input
  std::uint8_t ttl = 64;
};
Train make_pair_train(const PairTrainParams& p, int train_id, SeqAllocator& seqs);

struct PairGaps {
  Nanos intra_gap = 0;
  Nanos inter_gap = 0;
  bool reachable = true;  // false: O is too fast for this Δr_t (Δr_i clamped to 0)
};
// §3.5.1: the Δr_i that makes the head-to-tail span R_o = m·Δr_i + (m-1)·Δr_t
// offer trainLen·8 / R_o = rate.
PairGaps pair_gaps_for_rate(double rate_bps, int pairs, int packet_size, Nanos inter_gap);

// Text carried in the payload of every load RST so that an operator who sees the
// packets can find out what they are (see README, "Probe packets").
extern const char kProbeSignature[];

}  // namespace lw
