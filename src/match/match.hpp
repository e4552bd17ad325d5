#pragma once
// Joins the probes of one train with what the capture saw: our own outgoing
// copies (by sequence number) and the replies, by what each kind of marker
// draws (plan/target_marker.hpp): a closed port's RST/ACK acknowledges
// seq + 1 + payload, a listening port's SYN/ACK seq + 1, the RST to a bare ACK
// carries our ack number as its seq; ICMP errors by the quoted sequence
// number. No estimation here. One family per train: `self` and the probes'
// addresses are all IPv4 or all IPv6.
#include <cstdint>
#include <vector>

#include "capture/decode.hpp"
#include "plan/probe.hpp"
#include "send/pacer.hpp"

namespace lw {

// kRst: an RST without ACK, the reply to a bare-ACK marker.
enum class ReplyKind : std::uint8_t { kNone, kRstAck, kSynAck, kIcmp, kOther, kRst };

// A reply from the host a marker was addressed to (RST/ACK, SYN/ACK or RST),
// whatever the marker kind.
inline bool is_tcp_answer(ReplyKind k) {
  return k == ReplyKind::kRstAck || k == ReplyKind::kSynAck || k == ReplyKind::kRst;
}

const char* reply_kind_name(ReplyKind k);

struct ProbeOutcome {
  Nanos sent = 0;      // user-space send time (CLOCK_REALTIME): the offered schedule
  Nanos left = 0;      // when the capture saw it leave (after our own qdisc); 0 = not seen
  Nanos reply = 0;     // arrival of the first reply; 0 = none
  int replies = 0;     // >1 means duplicated replies
  ReplyKind kind = ReplyKind::kNone;
  IpAddr reply_from;  // source address of the reply
  std::uint8_t reply_ttl = 0;  // TTL / hop limit of the reply
  std::uint16_t reply_ip_id = 0;
  std::uint8_t icmp_type = 0, icmp_code = 0;  // raw, of the reply's family
  IcmpKind icmp_kind = IcmpKind::kNone;       // the same by meaning (capture/decode.hpp)
  std::uint16_t icmp_mtu = 0;
};

struct TrainOutcome {
  std::vector<ProbeOutcome> probes;  // parallel to Train::probes
  int markers_lost = 0;
  int duplicate_replies = 0;
  bool reordered = false;  // some marker's reply arrived before an earlier marker's
  bool unsent = false;     // the pacer could not send every packet
};

// `self` is our source address; packets of other flows are ignored.
TrainOutcome match_train(const Train& train, const std::vector<SendRecord>& sent,
                         const std::vector<Decoded>& captured, const IpAddr& self);

}  // namespace lw
