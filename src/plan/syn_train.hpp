#pragma once
// A train of full-size SYNs, each drawing an RST/ACK from the closed port
// (Linux acknowledges seq + 1 + payload length): the verification probe for
// trains whose RST load may have been dropped on the way. A stateful firewall
// or NAT passes SYNs (they may open a connection) where it drops RSTs that
// belong to none, so the spread of these replies shows the narrow link even
// when the RST load never reaches it. `drain` SYNs go first (they empty a
// shaper's token bucket, like the RST drain packets of a capacity train), then
// `markers` SYNs back to back (2 = a packet pair), spaced only as far as the
// --max-rate bucket requires.
#include "plan/capacity_plan.hpp"

namespace lw {

struct SynTrainParams {
  FlowId flow;
  int markers = 5;
  int drain = 2;
  std::uint16_t packet_size = 1500;  // IP bytes of every SYN (payload = size - 40)
  double max_rate_bps = 0;           // 0 = no cap
  std::uint8_t ttl = 64;
};

Train make_syn_train(const SynTrainParams& p, int train_id, SeqAllocator& seqs);

}  // namespace lw
