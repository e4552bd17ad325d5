#pragma once
// The capacity train (LinkWidth §3.3, Figure 6 with one hop): a SYN head marker,
// N RST load packets of L bytes, a SYN tail marker, all in one 5-tuple so that
// per-flow load balancers keep the train on one path. Markers are told apart by
// sequence number, not by port.
#include <cstdint>

#include "plan/probe.hpp"

namespace lw {

struct FlowId {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
};

struct CapacityTrainParams {
  FlowId flow;
  int load_packets = 32;        // N
  std::uint16_t packet_size = 1500;  // L, IP bytes of each load packet
  int drain_packets = 2;        // MTU RSTs sent right before the head marker
  bool warmup = true;           // a SYN sent ahead of the train
  Nanos warmup_lead = 50 * kUs; // how long before the drain/head the warm-up SYN goes
  int markers = 2;              // head + tail; >2 puts extra markers evenly in the load
  std::uint8_t ttl = 64;
  // Spacing between consecutive packets from the head marker on: 0 sends the
  // train back to back (capacity); a gap g offers the rate L·8/g (the paced
  // trains of the avail-bw search, LinkWidth §3.4 / pathload's streams).
  Nanos gap = 0;
  // Spacing of the drain packets and of the head after the last of them: 0 sends
  // them back to back (at line rate); under a --max-rate cap, min_gap_for_rate.
  Nanos drain_gap = 0;
};

// The gap that offers `rate_bps` with `packet_size`-byte packets.
Nanos gap_for_rate(double rate_bps, int packet_size);
// The same, rounded up: the smallest gap that stays at or under `rate_bps`.
Nanos min_gap_for_rate(double rate_bps, int packet_size);

// Spaces a train so that no packet follows the previous one faster than
// `max_rate_bps` (the pacer refuses anything else): gap and drain_gap at least
// min_gap_for_rate(max_rate_bps, packet_size), the warm-up SYN far enough
// ahead. Larger gaps (a paced train below the cap) stay as they are.
void apply_rate_cap(CapacityTrainParams& p, double max_rate_bps);

// The highest rate the schedule asks for between two consecutive packets:
// max over i of 8 * ip_len[i-1] / (offset[i] - offset[i-1]), bits/s; infinity
// for two packets planned at the same instant (back to back = line rate), 0 for
// fewer than two packets. The pacer refuses trains above --max-rate with it.
double planned_peak_rate(const Train& t);

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

// Text carried in the payload of every load RST so that an operator who sees the
// packets can find out what they are (see README, "Probe packets").
extern const char kProbeSignature[];

}  // namespace lw
