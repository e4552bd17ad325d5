#pragma once
// Decodes captured bytes into a length-checked, host-order record. Raw pointer
// arithmetic stays in decode.cpp; everything else sees only `Decoded`.
//
//   Decoded d;
//   if (decode_frame(DLT_EN10MB, bytes, caplen, d) == DecodeStatus::kOk) ... d.src, d.seq ...
//
// IPv4 and IPv6 both land in the same record: addresses are IpAddr, `ttl` is
// the hop limit over IPv6 (no ip_id there), and ICMP errors of either family
// are classified into one IcmpKind (the raw type and code stay beside it).
#include <cstddef>
#include <cstdint>

#include "linkwidth/ip_addr.hpp"
#include "linkwidth/time.hpp"

namespace lw {

enum class DecodeStatus {
  kOk,
  kTruncated,    // shorter than the headers it announces
  kNotIp,        // another ethertype / link type / IP version
  kBadHeader,    // IHL < 5, total length < header, ...
  kUnsupported,  // neither TCP nor ICMP(v6), a non-first fragment, ESP, a jumbogram
};

const char* decode_status_name(DecodeStatus s);

constexpr std::uint8_t kProtoTcp = 6;
constexpr std::uint8_t kProtoIcmp = 1;
constexpr std::uint8_t kProtoIcmp6 = 58;
inline bool is_icmp_proto(std::uint8_t p) { return p == kProtoIcmp || p == kProtoIcmp6; }

// ICMP errors of both families by meaning: ICMPv4 3 / ICMPv6 1 unreachable,
// ICMPv4 11 / ICMPv6 3 time exceeded, ICMPv4 3 code 4 / ICMPv6 2 "too big",
// ICMPv4 12 / ICMPv6 4 parameter problem.
enum class IcmpKind : std::uint8_t { kNone, kUnreachable, kTimeExceeded, kTooBig, kParamProblem, kOther };

const char* icmp_kind_name(IcmpKind k);

// The start of our datagram quoted inside an ICMP error (RFC 792: IP header
// plus 8 bytes; RFC 4443: as much as fits in 1280): enough for ports and the
// TCP sequence number.
struct IcmpQuote {
  bool present = false;
  IpAddr src, dst;
  std::uint8_t proto = 0;
  std::uint8_t ttl = 0;  // hop limit when it was quoted
  std::uint16_t ip_id = 0;
  std::uint32_t flow_label = 0;
  std::uint16_t sport = 0, dport = 0;
  std::uint32_t seq = 0;
};

struct Decoded {
  Nanos ts = 0;  // capture timestamp (CLOCK_REALTIME, ns)
  IpAddr src, dst;
  std::uint8_t proto = 0;  // transport: 6, 1 or 58 (after any IPv6 extension headers)
  std::uint8_t ttl = 0;    // IPv4 TTL or IPv6 hop limit
  std::uint16_t ip_id = 0;  // IPv4 only
  std::uint16_t ip_len = 0;  // total IP length, header included (IPv6: 40 + payload length)
  std::uint32_t flow_label = 0;  // IPv6 only
  // TCP
  std::uint16_t sport = 0, dport = 0;
  std::uint32_t seq = 0, ack = 0;
  std::uint8_t tcp_flags = 0;
  // ICMP / ICMPv6
  std::uint8_t icmp_type = 0, icmp_code = 0;
  IcmpKind icmp_kind = IcmpKind::kNone;
  // Next-hop MTU of "fragmentation needed" / "packet too big" (ICMPv6 carries
  // 32 bits; values above 65535 are clamped: no datagram of ours is larger).
  std::uint16_t icmp_mtu = 0;
  IcmpQuote quote;
};

// `data` starts at the IPv4 header (kNotIp for another version).
DecodeStatus decode_ipv4(const std::uint8_t* data, std::size_t len, Decoded& out);
// `data` starts at the IPv6 header (kNotIp for another version). Hop-by-hop,
// routing, destination-options, fragment (first fragment only) and AH
// extension headers are skipped, each length-checked; at most 8 of them.
DecodeStatus decode_ipv6(const std::uint8_t* data, std::size_t len, Decoded& out);
// Either, by the version nibble.
DecodeStatus decode_ip(const std::uint8_t* data, std::size_t len, Decoded& out);

// `data` starts at the link-layer header of the given pcap DLT.
DecodeStatus decode_frame(int dlt, const std::uint8_t* data, std::size_t len, Decoded& out);

}  // namespace lw
