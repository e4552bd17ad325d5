#include "send/raw_socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "linkwidth/error.hpp"

namespace lw {

RawSocket::RawSocket(const std::string& interface, int sndbuf_bytes, int family)
    : family_(family) {
  if (family != 4 && family != 6) throw Error("send", "raw socket: address family must be 4 or 6");
  fd_ = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_RAW, IPPROTO_RAW);
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
  if (family == 4) {
    setsockopt(fd_, IPPROTO_IP, IP_HDRINCL, &one, sizeof one);
  } else {
#ifdef IPV6_HDRINCL
    // Implied by IPPROTO_RAW; said again where the headers know the option.
    setsockopt(fd_, IPPROTO_IPV6, IPV6_HDRINCL, &one, sizeof one);
#endif
  }
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

bool RawSocket::send(const std::vector<std::uint8_t>& datagram, const IpAddr& dst) {
  if (dst.family() != family_) {
    errno = EAFNOSUPPORT;
    return false;
  }
  if (family_ == 6) {
    sockaddr_in6 sa6{};
    sa6.sin6_family = AF_INET6;
    std::memcpy(sa6.sin6_addr.s6_addr, dst.bytes6().data(), 16);
    sa6.sin6_scope_id = dst.scope_id();  // a link-local target's zone
    const ssize_t n6 = sendto(fd_, datagram.data(), datagram.size(), 0,
                              reinterpret_cast<const sockaddr*>(&sa6), sizeof sa6);
    return n6 == static_cast<ssize_t>(datagram.size());
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(dst.v4());
  const ssize_t n = sendto(fd_, datagram.data(), datagram.size(), 0,
                           reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  return n == static_cast<ssize_t>(datagram.size());
}

}  // namespace lw
