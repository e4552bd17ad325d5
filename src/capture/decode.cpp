#include "capture/decode.hpp"

#include <pcap/dlt.h>

namespace lw {

namespace {

std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

constexpr std::uint8_t kTcp = 6;
constexpr std::uint8_t kIcmp = 1;

// Parses the quoted datagram inside an ICMP error: IP header plus >= 8 bytes.
void decode_quote(const std::uint8_t* q, std::size_t len, IcmpQuote& out) {
  if (len < 20 || (q[0] >> 4) != 4) return;
  const std::size_t ihl = std::size_t{q[0] & 0x0fu} * 4;
  if (ihl < 20 || len < ihl + 8) return;
  out.present = true;
  out.ttl = q[8];
  out.proto = q[9];
  out.ip_id = be16(q + 4);
  out.src = be32(q + 12);
  out.dst = be32(q + 16);
  const std::uint8_t* t = q + ihl;
  out.sport = be16(t);
  out.dport = be16(t + 2);
  out.seq = be32(t + 4);
}

}  // namespace

const char* decode_status_name(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kTruncated:
      return "truncated";
    case DecodeStatus::kNotIpv4:
      return "not-ipv4";
    case DecodeStatus::kBadHeader:
      return "bad-header";
    case DecodeStatus::kUnsupported:
      return "unsupported";
  }
  return "?";
}

DecodeStatus decode_ipv4(const std::uint8_t* d, std::size_t len, Decoded& out) {
  if (len < 1) return DecodeStatus::kTruncated;
  if ((d[0] >> 4) != 4) return DecodeStatus::kNotIpv4;
  if (len < 20) return DecodeStatus::kTruncated;
  const std::size_t ihl = std::size_t{d[0] & 0x0fu} * 4;
  if (ihl < 20) return DecodeStatus::kBadHeader;
  if (len < ihl) return DecodeStatus::kTruncated;
  out.ip_len = be16(d + 2);
  if (out.ip_len < ihl) return DecodeStatus::kBadHeader;
  out.ip_id = be16(d + 4);
  const std::uint16_t frag = be16(d + 6);
  out.ttl = d[8];
  out.proto = d[9];
  out.src = be32(d + 12);
  out.dst = be32(d + 16);
  if ((frag & 0x1fff) != 0) return DecodeStatus::kUnsupported;  // not a first fragment
  // Bytes actually present for the transport header (capture may be snapped).
  const std::size_t avail = (len < out.ip_len ? len : out.ip_len) - ihl;
  const std::uint8_t* t = d + ihl;
  if (out.proto == kTcp) {
    if (avail < 20) return DecodeStatus::kTruncated;
    const std::size_t doff = std::size_t{static_cast<std::uint8_t>(t[12] >> 4)} * 4;
    if (doff < 20 || out.ip_len < ihl + doff) return DecodeStatus::kBadHeader;
    out.sport = be16(t);
    out.dport = be16(t + 2);
    out.seq = be32(t + 4);
    out.ack = be32(t + 8);
    out.tcp_flags = t[13];
    return DecodeStatus::kOk;
  }
  if (out.proto == kIcmp) {
    if (avail < 8) return DecodeStatus::kTruncated;
    out.icmp_type = t[0];
    out.icmp_code = t[1];
    if (out.icmp_type == 3 && out.icmp_code == 4) out.icmp_mtu = be16(t + 6);
    // Errors (unreachable 3, time exceeded 11, parameter problem 12) quote our datagram.
    if (out.icmp_type == 3 || out.icmp_type == 11 || out.icmp_type == 12) {
      decode_quote(t + 8, avail - 8, out.quote);
    }
    return DecodeStatus::kOk;
  }
  return DecodeStatus::kUnsupported;
}

DecodeStatus decode_frame(int dlt, const std::uint8_t* d, std::size_t len, Decoded& out) {
  switch (dlt) {
    case DLT_EN10MB: {
      std::size_t off = 12;
      if (len < off + 2) return DecodeStatus::kTruncated;
      std::uint16_t type = be16(d + off);
      while (type == 0x8100 || type == 0x88a8) {  // VLAN tags
        off += 4;
        if (len < off + 2) return DecodeStatus::kTruncated;
        type = be16(d + off);
      }
      if (type != 0x0800) return DecodeStatus::kNotIpv4;
      return decode_ipv4(d + off + 2, len - off - 2, out);
    }
    case DLT_LINUX_SLL: {
      if (len < 16) return DecodeStatus::kTruncated;
      if (be16(d + 14) != 0x0800) return DecodeStatus::kNotIpv4;
      return decode_ipv4(d + 16, len - 16, out);
    }
    case DLT_RAW:
    case DLT_IPV4:
      return decode_ipv4(d, len, out);
    default:
      return DecodeStatus::kNotIpv4;
  }
}

}  // namespace lw
