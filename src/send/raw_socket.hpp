#pragma once
// The raw socket we inject prebuilt datagrams through: IPv4 with IP_HDRINCL,
// or IPv6 with IPPROTO_RAW (which on Linux means "header included": the kernel
// sends our 40-byte header, flow label and hop limit as built, and never
// fragments; a datagram above the interface MTU fails with EMSGSIZE).
#include "linkwidth/ip_addr.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lw {

class RawSocket {
 public:
  // Opens the socket, binds it to `interface` and sizes its send buffer to hold
  // `sndbuf_bytes` of queued packets (a whole train waits in the qdisc when our
  // own uplink is the bottleneck; sendto must not block mid-train).
  // `family` 4 or 6: the one family of every datagram this socket sends.
  RawSocket(const std::string& interface, int sndbuf_bytes, int family = 4);
  ~RawSocket();
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  // Returns false (with errno kept) if the kernel refused the datagram.
  bool send(const std::vector<std::uint8_t>& datagram, const IpAddr& dst);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int family_ = 4;
};

}  // namespace lw
