#include "send/packet_builder.hpp"

#include <libnet.h>

#include <cstdlib>
#include <cstring>

#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"

namespace lw {

PacketBuilder::PacketBuilder() {
  char errbuf[LIBNET_ERRBUF_SIZE] = {0};
  l_ = libnet_init(LIBNET_NONE, nullptr, errbuf);
  if (!l_) throw Error("send", std::string("libnet_init: ") + errbuf);
}

PacketBuilder::~PacketBuilder() { libnet_destroy(l_); }

std::vector<std::uint8_t> PacketBuilder::build(const Probe& p) {
  if (p.src.family() != p.dst.family()) throw Error("send", "probe mixes IPv4 and IPv6 addresses");
  const bool v6 = p.dst.is_v6();
  if (p.ip_len < bare_tcp_len(p.dst)) {
    throw Error("send", v6 ? "probe shorter than 60 bytes" : "probe shorter than 40 bytes");
  }
  if (v6 && p.flow_label > 0xfffffu) throw Error("send", "flow label wider than 20 bits");
  const std::uint32_t payload_len = p.payload_len();
  std::vector<std::uint8_t> payload(payload_len, 0);
  const std::size_t sig = std::min<std::size_t>(payload_len, std::strlen(kProbeSignature));
  if (sig > 0) std::memcpy(payload.data(), kProbeSignature, sig);

  libnet_clear_packet(l_);
  const std::uint16_t win = (p.flags & kSyn) ? 1024 : 0;
  // Checksum 0: libnet computes it when the packet is coalesced, over the
  // IPv4 or (libnet_do_checksum sees version 6 in the header below it) the
  // IPv6 pseudo-header of RFC 8200 §8.1; tests/unit/test_ipv6.cpp checks
  // both against an independent computation.
  if (libnet_build_tcp(p.sport, p.dport, p.seq, p.ack, p.flags, win, 0, 0,
                       static_cast<std::uint16_t>(LIBNET_TCP_H + payload_len),
                       payload_len ? payload.data() : nullptr, payload_len, l_, 0) == -1) {
    throw Error("send", std::string("libnet_build_tcp: ") + libnet_geterror(l_));
  }
  if (v6) {
    libnet_in6_addr s{}, d{};
    std::memcpy(&s, p.src.bytes6().data(), 16);
    std::memcpy(&d, p.dst.bytes6().data(), 16);
    // IPv6 routers never fragment and there is no DF bit: a datagram above the
    // path MTU comes back as ICMPv6 Packet Too Big (app: path MTU).
    if (libnet_build_ipv6(0, p.flow_label, static_cast<std::uint16_t>(LIBNET_TCP_H + payload_len),
                          IPPROTO_TCP, p.ttl, s, d, nullptr, 0, l_, 0) == -1) {
      throw Error("send", std::string("libnet_build_ipv6: ") + libnet_geterror(l_));
    }
  } else if (libnet_build_ipv4(p.ip_len, 0, p.ip_id, IP_DF, p.ttl, IPPROTO_TCP, 0,
                               htonl(p.src.v4()), htonl(p.dst.v4()), nullptr, 0, l_, 0) == -1) {
    throw Error("send", std::string("libnet_build_ipv4: ") + libnet_geterror(l_));
  }
  std::uint8_t* buf = nullptr;
  std::uint32_t size = 0;
  // libnet_adv_cull_packet() refuses anything but link-layer mode in this libnet;
  // pblock_coalesce is what it calls and fills in the checksums.
  if (libnet_pblock_coalesce(l_, &buf, &size) == -1) {
    throw Error("send", std::string("libnet_pblock_coalesce: ") + libnet_geterror(l_));
  }
  std::vector<std::uint8_t> out(buf, buf + size);
  std::free(buf - l_->aligner);
  if (v6 && out.size() >= 4) {
    // libnet 1.1.6 packs the flow label wrongly (`fl & 0x0FF00 >> 8` keeps the
    // low byte twice: 0xabcde goes out as 0xadede) and drops the traffic
    // class's high nibble: write version, class 0 and the label here. Neither
    // is in the TCP pseudo-header, so the checksum stays right.
    out[0] = 0x60;
    out[1] = static_cast<std::uint8_t>((p.flow_label >> 16) & 0x0fu);
    out[2] = static_cast<std::uint8_t>(p.flow_label >> 8);
    out[3] = static_cast<std::uint8_t>(p.flow_label);
  }
  return out;
}

}  // namespace lw
