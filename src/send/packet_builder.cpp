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
  if (p.ip_len < LIBNET_IPV4_H + LIBNET_TCP_H) throw Error("send", "probe shorter than 40 bytes");
  const std::uint32_t payload_len = p.payload_len();
  std::vector<std::uint8_t> payload(payload_len, 0);
  const std::size_t sig = std::min<std::size_t>(payload_len, std::strlen(kProbeSignature));
  if (sig > 0) std::memcpy(payload.data(), kProbeSignature, sig);

  libnet_clear_packet(l_);
  const std::uint16_t win = (p.flags & kSyn) ? 1024 : 0;
  if (libnet_build_tcp(p.sport, p.dport, p.seq, p.ack, p.flags, win, 0, 0,
                       static_cast<std::uint16_t>(LIBNET_TCP_H + payload_len),
                       payload_len ? payload.data() : nullptr, payload_len, l_, 0) == -1) {
    throw Error("send", std::string("libnet_build_tcp: ") + libnet_geterror(l_));
  }
  if (libnet_build_ipv4(p.ip_len, 0, p.ip_id, IP_DF, p.ttl, IPPROTO_TCP, 0, htonl(p.src),
                        htonl(p.dst), nullptr, 0, l_, 0) == -1) {
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
  return out;
}

}  // namespace lw
