#pragma once
// The policer probe's stream. A policer is a token bucket that drops what
// exceeds it instead of queueing it: nothing is delayed, so the capacity
// trains (and the shaper probe's small SYN markers, which find a few bytes of
// tokens between drops) come back at the rate we sent them, and the path
// reads as fast as our own sending. Only full-size packets meet it as the
// load does, and only their loss shows it. The stream: RST load at `gap`
// spacing, long enough to empty a bucket of `load_packets` packets, with
// `bucket_markers` full-size SYN markers at geometric byte positions among it
// (where the losses begin: the bucket), then a chirp of `chirp_markers`
// full-size SYN markers alone, each gap 2^(1/per_octave) times the one
// before, from `gap` on: once the bucket is empty, markers sent faster than
// the policed rate R pass only as tokens accrue (about R/r of them), slower
// ones all pass (estimate/policer.hpp).
#include <vector>

#include "plan/capacity_plan.hpp"

namespace lw {

struct PolicerStreamParams {
  FlowId flow;
  int load_packets = 700;
  std::uint16_t packet_size = 1500;
  int bucket_markers = 12;       // positions
  int markers_per_position = 2;
  int chirp_markers = 64;
  int per_octave = 8;
  Nanos gap = 0;  // spacing of the load and the chirp's first gap (>= 1 ns)
  std::uint8_t ttl = 64;
};

// Load packets ahead of each bucket marker: geometric from 3 packets to
// load_packets - 1, strictly increasing (fewer markers when the load is short).
std::vector<int> policer_bucket_positions(int load_packets, int markers);

// The stream as a Train: a bare warm-up SYN, then the load and the markers;
// every marker in Train::markers (the load's positions' first, position by
// position, then the chirp's), and
// Train::bits_from_head[k] the IP bits of the load and markers sent before
// marker k (not the warm-up's).
Train make_policer_train(const PolicerStreamParams& p, int train_id, SeqAllocator& seqs);

}  // namespace lw
