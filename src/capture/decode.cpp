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
IpAddr v4_at(const std::uint8_t* p) { return IpAddr(be32(p)); }

constexpr std::uint16_t kEtherIpv4 = 0x0800;
constexpr std::uint16_t kEtherIpv6 = 0x86DD;

// Walks IPv6 extension headers from `off` (the byte after the fixed header)
// while `nh` names one we can skip; stops at the first other next-header
// value (the transport). `avail` bounds every read. Fragments other than the
// first, ESP (50: encrypted, nothing to read) and chains longer than 8 are
// kUnsupported.
DecodeStatus skip_extensions(const std::uint8_t* d, std::size_t avail, std::uint8_t& nh,
                             std::size_t& off) {
  for (int i = 0; i < 8; ++i) {
    switch (nh) {
      case 0:    // hop-by-hop options
      case 43:   // routing
      case 60: {  // destination options
        if (avail < off + 2) return DecodeStatus::kTruncated;
        const std::size_t l = (std::size_t{d[off + 1]} + 1) * 8;
        if (avail < off + l) return DecodeStatus::kTruncated;
        nh = d[off];
        off += l;
        break;
      }
      case 44: {  // fragment
        if (avail < off + 8) return DecodeStatus::kTruncated;
        if ((be16(d + off + 2) & 0xfff8u) != 0) return DecodeStatus::kUnsupported;
        nh = d[off];
        off += 8;
        break;
      }
      case 51: {  // authentication header: length in 4-byte units minus 2
        if (avail < off + 2) return DecodeStatus::kTruncated;
        const std::size_t l = (std::size_t{d[off + 1]} + 2) * 4;
        if (avail < off + l) return DecodeStatus::kTruncated;
        nh = d[off];
        off += l;
        break;
      }
      case 50:  // ESP
      case 59:  // no next header
        return DecodeStatus::kUnsupported;
      default:
        return DecodeStatus::kOk;
    }
  }
  return DecodeStatus::kUnsupported;
}

void quote_transport(const std::uint8_t* t, IcmpQuote& out) {
  out.sport = be16(t);
  out.dport = be16(t + 2);
  out.seq = be32(t + 4);
}

// The quoted IPv4 datagram inside an ICMP error: IP header plus >= 8 bytes.
void decode_quote4(const std::uint8_t* q, std::size_t len, IcmpQuote& out) {
  if (len < 20 || (q[0] >> 4) != 4) return;
  const std::size_t ihl = std::size_t{q[0] & 0x0fu} * 4;
  if (ihl < 20 || len < ihl + 8) return;
  out.present = true;
  out.ttl = q[8];
  out.proto = q[9];
  out.ip_id = be16(q + 4);
  out.src = v4_at(q + 12);
  out.dst = v4_at(q + 16);
  quote_transport(q + ihl, out);
}

// The quoted IPv6 datagram inside an ICMPv6 error: fixed header, any
// extension headers, then >= 8 bytes of the transport header.
void decode_quote6(const std::uint8_t* q, std::size_t len, IcmpQuote& out) {
  if (len < 40 || (q[0] >> 4) != 6) return;
  std::uint8_t nh = q[6];
  std::size_t off = 40;
  if (skip_extensions(q, len, nh, off) != DecodeStatus::kOk || len < off + 8) return;
  out.present = true;
  out.flow_label = be32(q) & 0xfffffu;
  out.ttl = q[7];
  out.proto = nh;
  out.src = IpAddr::v6_from(q + 8);
  out.dst = IpAddr::v6_from(q + 24);
  quote_transport(q + off, out);
}

DecodeStatus decode_tcp(const std::uint8_t* t, std::size_t avail, std::size_t ip_payload,
                        Decoded& out) {
  if (avail < 20) return DecodeStatus::kTruncated;
  const std::size_t doff = std::size_t{static_cast<std::uint8_t>(t[12] >> 4)} * 4;
  if (doff < 20 || ip_payload < doff) return DecodeStatus::kBadHeader;
  out.sport = be16(t);
  out.dport = be16(t + 2);
  out.seq = be32(t + 4);
  out.ack = be32(t + 8);
  out.tcp_flags = t[13];
  return DecodeStatus::kOk;
}

}  // namespace

const char* decode_status_name(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kTruncated:
      return "truncated";
    case DecodeStatus::kNotIp:
      return "not-ip";
    case DecodeStatus::kBadHeader:
      return "bad-header";
    case DecodeStatus::kUnsupported:
      return "unsupported";
  }
  return "?";
}

const char* icmp_kind_name(IcmpKind k) {
  switch (k) {
    case IcmpKind::kNone:
      return "none";
    case IcmpKind::kUnreachable:
      return "unreachable";
    case IcmpKind::kTimeExceeded:
      return "time_exceeded";
    case IcmpKind::kTooBig:
      return "too_big";
    case IcmpKind::kParamProblem:
      return "parameter_problem";
    case IcmpKind::kOther:
      return "other";
  }
  return "?";
}

DecodeStatus decode_ipv4(const std::uint8_t* d, std::size_t len, Decoded& out) {
  if (len < 1) return DecodeStatus::kTruncated;
  if ((d[0] >> 4) != 4) return DecodeStatus::kNotIp;
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
  out.src = v4_at(d + 12);
  out.dst = v4_at(d + 16);
  if ((frag & 0x1fff) != 0) return DecodeStatus::kUnsupported;  // not a first fragment
  // Bytes actually present for the transport header (capture may be snapped).
  const std::size_t avail = (len < out.ip_len ? len : out.ip_len) - ihl;
  const std::uint8_t* t = d + ihl;
  if (out.proto == kProtoTcp) return decode_tcp(t, avail, out.ip_len - ihl, out);
  if (out.proto == kProtoIcmp) {
    if (avail < 8) return DecodeStatus::kTruncated;
    out.icmp_type = t[0];
    out.icmp_code = t[1];
    switch (out.icmp_type) {
      case 3:
        out.icmp_kind = out.icmp_code == 4 ? IcmpKind::kTooBig : IcmpKind::kUnreachable;
        break;
      case 11:
        out.icmp_kind = IcmpKind::kTimeExceeded;
        break;
      case 12:
        out.icmp_kind = IcmpKind::kParamProblem;
        break;
      default:
        break;
    }
    if (out.icmp_type == 3 && out.icmp_code == 4) out.icmp_mtu = be16(t + 6);
    // Errors (unreachable 3, time exceeded 11, parameter problem 12) quote our datagram.
    if (out.icmp_kind != IcmpKind::kNone) decode_quote4(t + 8, avail - 8, out.quote);
    return DecodeStatus::kOk;
  }
  return DecodeStatus::kUnsupported;
}

DecodeStatus decode_ipv6(const std::uint8_t* d, std::size_t len, Decoded& out) {
  if (len < 1) return DecodeStatus::kTruncated;
  if ((d[0] >> 4) != 6) return DecodeStatus::kNotIp;
  if (len < 40) return DecodeStatus::kTruncated;
  const std::size_t payload = be16(d + 4);
  // A zero payload length announces a jumbogram (RFC 2675): not ours.
  if (payload == 0 || payload > 65535 - 40) return DecodeStatus::kUnsupported;
  out.ip_len = static_cast<std::uint16_t>(40 + payload);
  out.flow_label = be32(d) & 0xfffffu;
  out.ttl = d[7];
  out.src = IpAddr::v6_from(d + 8);
  out.dst = IpAddr::v6_from(d + 24);
  const std::size_t avail = len < out.ip_len ? len : out.ip_len;
  std::uint8_t nh = d[6];
  std::size_t off = 40;
  const DecodeStatus ext = skip_extensions(d, avail, nh, off);
  out.proto = nh;
  if (ext != DecodeStatus::kOk) return ext;
  const std::uint8_t* t = d + off;
  const std::size_t t_avail = avail - off;
  if (nh == kProtoTcp) return decode_tcp(t, t_avail, out.ip_len - off, out);
  if (nh == kProtoIcmp6) {
    if (t_avail < 8) return DecodeStatus::kTruncated;
    out.icmp_type = t[0];
    out.icmp_code = t[1];
    switch (out.icmp_type) {  // RFC 4443 §3; types >= 128 are informational
      case 1:
        out.icmp_kind = IcmpKind::kUnreachable;
        break;
      case 2: {
        out.icmp_kind = IcmpKind::kTooBig;
        const std::uint32_t mtu = be32(t + 4);
        out.icmp_mtu = static_cast<std::uint16_t>(mtu > 65535u ? 65535u : mtu);
        break;
      }
      case 3:
        out.icmp_kind = IcmpKind::kTimeExceeded;
        break;
      case 4:
        out.icmp_kind = IcmpKind::kParamProblem;
        break;
      default:
        if (out.icmp_type < 128) out.icmp_kind = IcmpKind::kOther;
        break;
    }
    if (out.icmp_kind != IcmpKind::kNone) decode_quote6(t + 8, t_avail - 8, out.quote);
    return DecodeStatus::kOk;
  }
  return DecodeStatus::kUnsupported;
}

DecodeStatus decode_ip(const std::uint8_t* d, std::size_t len, Decoded& out) {
  if (len < 1) return DecodeStatus::kTruncated;
  if ((d[0] >> 4) == 6) return decode_ipv6(d, len, out);
  return decode_ipv4(d, len, out);
}

DecodeStatus decode_frame(int dlt, const std::uint8_t* d, std::size_t len, Decoded& out) {
  auto by_type = [&](std::uint16_t type, std::size_t off) {
    if (type == kEtherIpv4) return decode_ipv4(d + off, len - off, out);
    if (type == kEtherIpv6) return decode_ipv6(d + off, len - off, out);
    return DecodeStatus::kNotIp;
  };
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
      return by_type(type, off + 2);
    }
    case DLT_LINUX_SLL: {
      if (len < 16) return DecodeStatus::kTruncated;
      return by_type(be16(d + 14), 16);
    }
    case DLT_RAW:
      return decode_ip(d, len, out);
    case DLT_IPV4:
      return decode_ipv4(d, len, out);
    case DLT_IPV6:
      return decode_ipv6(d, len, out);
    default:
      return DecodeStatus::kNotIp;
  }
}

}  // namespace lw
