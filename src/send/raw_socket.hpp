#pragma once
// The raw IPv4 socket we inject prebuilt datagrams through (IP_HDRINCL).
#include <cstdint>
#include <string>
#include <vector>

namespace lw {

class RawSocket {
 public:
  // Opens the socket, binds it to `interface` and sizes its send buffer to hold
  // `sndbuf_bytes` of queued packets (a whole train waits in the qdisc when our
  // own uplink is the bottleneck; sendto must not block mid-train).
  RawSocket(const std::string& interface, int sndbuf_bytes);
  ~RawSocket();
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  // Returns false (with errno kept) if the kernel refused the datagram.
  bool send(const std::vector<std::uint8_t>& datagram, std::uint32_t dst_host_order);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace lw
