#pragma once
// The shaper probe's stream (ShaperProbe, Kanuparthy & Dovrolis, IMC 2011,
// single-ended): a warm-up SYN, then RST load at a constant rate long enough
// to empty a token bucket, with SYN markers between load packets. The markers
// sit closer together at the start (quadratic spacing): a small bucket empties
// after a few packets and the burst phase needs two markers in it, while the
// sustained phase is long and needs few. Their count bounds the replies the
// stream asks of the target (--max-replies).
#include <vector>

#include "plan/capacity_plan.hpp"

namespace lw {

// Markers per stream, head and tail included.
constexpr int kShaperMarkers = 40;

struct ShaperStreamParams {
  FlowId flow;
  int load_packets = 1000;
  std::uint16_t packet_size = 1500;
  int markers = kShaperMarkers;
  int shift_at = 0;  // see shaper_marker_positions
  Nanos gap = 0;  // spacing from the head on (0: back to back); apply_rate_cap sets it
  std::uint8_t ttl = 64;
};

// Load packets ahead of each marker: 0 for the head, load_packets for the
// tail, strictly increasing, quadratic in the marker's rank (at most
// load_packets + 1 markers). With `shift_at` > 0 (where an earlier stream
// saw the shift, in load packets) a quarter of the markers go before it and
// the rest evenly after it: the sustained phase gets the points.
std::vector<int> shaper_marker_positions(int load_packets, int markers, int shift_at = 0);

// The stream as a Train: markers in Train::markers with bits_from_head, role
// kMarker; load packets role kLoad. Every packet leaves `gap` after the one
// before it (load and markers alike, so the markers do not thin the rate).
Train make_shaper_train(const ShaperStreamParams& p, int train_id, SeqAllocator& seqs);

// Load packets of a stream that carries `bytes` of load, at least 8.
int shaper_load_packets(double bytes, int packet_size);

}  // namespace lw
