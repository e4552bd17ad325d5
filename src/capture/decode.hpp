#pragma once
// Decodes captured bytes into a length-checked, host-order record. Raw pointer
// arithmetic stays in decode.cpp; everything else sees only `Decoded`.
#include <cstddef>
#include <cstdint>

#include "linkwidth/time.hpp"

namespace lw {

enum class DecodeStatus {
  kOk,
  kTruncated,    // shorter than the headers it announces
  kNotIpv4,      // another ethertype / IP version
  kBadHeader,    // IHL < 5, total length < header, ...
  kUnsupported,  // IPv4 but neither TCP nor ICMP, or a fragment
};

const char* decode_status_name(DecodeStatus s);

// The first 8 bytes of the transport header quoted inside an ICMP error
// (RFC 792): enough for ports and the TCP sequence number.
struct IcmpQuote {
  bool present = false;
  std::uint32_t src = 0, dst = 0;
  std::uint8_t proto = 0;
  std::uint8_t ttl = 0;
  std::uint16_t ip_id = 0;
  std::uint16_t sport = 0, dport = 0;
  std::uint32_t seq = 0;
};

struct Decoded {
  Nanos ts = 0;  // capture timestamp (CLOCK_REALTIME, ns)
  std::uint32_t src = 0, dst = 0;
  std::uint8_t proto = 0;
  std::uint8_t ttl = 0;
  std::uint16_t ip_id = 0;
  std::uint16_t ip_len = 0;
  // TCP
  std::uint16_t sport = 0, dport = 0;
  std::uint32_t seq = 0, ack = 0;
  std::uint8_t tcp_flags = 0;
  // ICMP
  std::uint8_t icmp_type = 0, icmp_code = 0;
  std::uint16_t icmp_mtu = 0;  // next-hop MTU of "fragmentation needed"
  IcmpQuote quote;
};

// `data` starts at the IPv4 header.
DecodeStatus decode_ipv4(const std::uint8_t* data, std::size_t len, Decoded& out);

// `data` starts at the link-layer header of the given pcap DLT.
DecodeStatus decode_frame(int dlt, const std::uint8_t* data, std::size_t len, Decoded& out);

}  // namespace lw
