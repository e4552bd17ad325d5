#pragma once
// A probe written down as plain data: what to send, not how or when it leaves.
// Addresses are IpAddr (IPv4 or IPv6; one family per probe); no sockets, no
// clocks here.
#include <cstdint>
#include <string>
#include <vector>

#include "linkwidth/ip_addr.hpp"
#include "linkwidth/run_names.hpp"
#include "linkwidth/time.hpp"

namespace lw {

// TCP flag bits (RFC 793 order).
enum TcpFlag : std::uint8_t {
  kFin = 0x01,
  kSyn = 0x02,
  kRst = 0x04,
  kPsh = 0x08,
  kAck = 0x10,
};

enum class Role : std::uint8_t {
  kWarmup,  // SYN ahead of the train: wakes the send path and the target's reply path
  kDrain,   // back-to-back RSTs right before the head: empty a shaper's token bucket
  kMarker,  // SYN to a closed port: draws an RST/ACK whose arrival time we measure
  kLoad,    // RST: the target drops it silently; it only occupies the link
  kCloser,  // RST with seq = ISN + 1 right after a SYN to an open port: resets the
            // half-open connection that SYN made (plan/target_marker.hpp)
};

const char* role_name(Role r);

// TargetMarker (what the markers addressed to the target are) is in
// linkwidth/run_names.hpp with its JSON names.

struct Probe {
  IpAddr src;
  IpAddr dst;
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
  std::uint8_t flags = 0;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  // Total IP datagram length in bytes, header included (IPv6: the 40-byte
  // header plus the payload length), as every rate in this program counts.
  std::uint16_t ip_len = 40;
  std::uint8_t ttl = 64;  // IPv6: the hop limit
  std::uint16_t ip_id = 0;  // IPv4 only
  // IPv6 only: one label for the whole run (ECMP hashes it with the 5-tuple).
  std::uint32_t flow_label = 0;
  Role role = Role::kLoad;
  int train = 0;
  int index = 0;       // position in the train
  Nanos offset = 0;    // planned departure, relative to the train's t0
  // Sequence number the reply acknowledges (markers only): the target's RST/ACK
  // carries ack = seq + 1 + payload length.
  std::uint32_t expected_ack() const;
  // A listening port's SYN/ACK acknowledges seq + 1 whatever the SYN carried
  // (the payload of a SYN without a Fast Open cookie is dropped).
  std::uint32_t expected_synack_ack() const { return seq + 1u; }
  // A bare ACK (no SYN, no RST): the target's RST carries seq = our ack number,
  // the marker's tag (RFC 793, "Reset Generation").
  bool is_bare_ack() const { return (flags & (kAck | kSyn | kRst)) == kAck; }
  // TCP payload bytes: ip_len minus the IP header (20 or 40) and 20 bytes of TCP.
  std::uint16_t payload_len() const {
    const int n = ip_len - bare_tcp_len(dst);
    return static_cast<std::uint16_t>(n > 0 ? n : 0);
  }
};

struct Train {
  int id = 0;
  std::vector<Probe> probes;
  // Indices (into probes) of the measurement markers, in send order.
  std::vector<int> markers;
  // IP-layer bits that cross a link between the end of the head marker and the
  // end of marker k (bits_from_head[0] == 0). Dispersion between the replies to
  // marker 0 and marker k at a bottleneck of rate C is bits_from_head[k] / C.
  std::vector<double> bits_from_head;
  std::uint64_t total_bytes() const;
};

// Text of an address of either family (dotted quad or RFC 5952).
inline std::string format_ip(const IpAddr& a) { return a.str(); }
// The older name, kept for the IPv4-era call sites: prints either family.
inline std::string format_ipv4(const IpAddr& a) { return a.str(); }

}  // namespace lw
