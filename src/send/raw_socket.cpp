#include "send/raw_socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "linkwidth/error.hpp"

namespace lw {

RawSocket::RawSocket(const std::string& interface, int sndbuf_bytes) {
  fd_ = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
  if (fd_ < 0) {
    const int e = errno;
    if (e == EPERM || e == EACCES) {
      throw Error("send", "raw socket: permission denied (needs root or CAP_NET_RAW: "
                          "sudo setcap cap_net_raw,cap_net_admin+ep linkwidth)",
                  "privilege", ExitCode::kPrivilege);
    }
    throw Error("send", std::string("raw socket: ") + std::strerror(e));
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_IP, IP_HDRINCL, &one, sizeof one);
  if (!interface.empty() &&
      setsockopt(fd_, SOL_SOCKET, SO_BINDTODEVICE, interface.c_str(),
                 static_cast<socklen_t>(interface.size())) < 0) {
    const int e = errno;
    close(fd_);
    throw Error("send", "bind raw socket to " + interface + ": " + std::strerror(e));
  }
  // SO_SNDBUFFORCE needs CAP_NET_ADMIN; fall back to the capped SO_SNDBUF.
  if (setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf_bytes, sizeof sndbuf_bytes) < 0) {
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf_bytes, sizeof sndbuf_bytes);
  }
}

RawSocket::~RawSocket() {
  if (fd_ >= 0) close(fd_);
}

bool RawSocket::send(const std::vector<std::uint8_t>& datagram, std::uint32_t dst) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(dst);
  const ssize_t n = sendto(fd_, datagram.data(), datagram.size(), 0,
                           reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  return n == static_cast<ssize_t>(datagram.size());
}

}  // namespace lw
