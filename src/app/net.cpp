#include "app/net.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "linkwidth/error.hpp"
#include "plan/probe.hpp"

namespace lw {

std::uint32_t resolve_ipv4(const std::string& target) {
  in_addr a{};
  if (inet_pton(AF_INET, target.c_str(), &a) == 1) return ntohl(a.s_addr);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(target.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    // A name that does not exist is a bad command line (exit 2); a resolver
    // that cannot answer now is a runtime failure (exit 1).
    throw Error("resolve", "cannot resolve host '" + target + "': " + gai_strerror(rc),
                "unknown_host", rc == EAI_NONAME ? ExitCode::kUsage : ExitCode::kRuntime);
  }
  const auto* sin = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
  const std::uint32_t out = ntohl(sin->sin_addr.s_addr);
  freeaddrinfo(res);
  return out;
}

std::string forbidden_target_reason(std::uint32_t a) {
  const std::uint32_t top = a >> 24;
  if (a == 0) return "the unspecified address";
  if (top == 0) return "in 0.0.0.0/8 (this network)";
  if (top == 127) return "a loopback address";
  if (top >= 224 && top <= 239) return "a multicast address";
  if (a == 0xffffffffu) return "the broadcast address";
  if (top >= 240) return "a reserved (240.0.0.0/4) address";
  return "";
}

std::string local_target_reason(std::uint32_t addr) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return "";
  std::string why;
  for (ifaddrs* i = ifs; i && why.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const std::uint32_t a =
        ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if (a == addr) {
      why = std::string("an address of this host (") + i->ifa_name + ")";
      break;
    }
    if (!i->ifa_netmask) continue;
    const std::uint32_t mask =
        ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
    int prefix = 0;
    for (std::uint32_t m = mask; m & 0x80000000u; m <<= 1) ++prefix;
    if (prefix == 0 || prefix > 30) continue;
    const std::string subnet = format_ipv4(a & mask) + "/" + std::to_string(prefix);
    if (addr == (a | ~mask)) {
      why = "the broadcast address of " + subnet + " on " + i->ifa_name;
    } else if (addr == (a & mask)) {
      why = "the network address of " + subnet + " on " + i->ifa_name;
    }
  }
  freeifaddrs(ifs);
  return why;
}

namespace {

int interface_mtu(const std::string& ifname) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return 1500;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  int mtu = 1500;
  if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) mtu = ifr.ifr_mtu;
  close(fd);
  return mtu;
}

// Address -> interface owning it, and interface -> its first IPv4 address.
bool lookup_interfaces(std::uint32_t addr, const std::string& ifname, std::string* name_out,
                       std::uint32_t* addr_out) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const std::uint32_t a =
        ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if (!ifname.empty() ? ifname == i->ifa_name : a == addr) {
      if (name_out) *name_out = i->ifa_name;
      if (addr_out) *addr_out = a;
      found = true;
    }
  }
  freeifaddrs(ifs);
  return found;
}

}  // namespace

Route find_route(std::uint32_t dst, const std::string& iface, const std::string& src) {
  Route r;
  if (!src.empty()) {
    in_addr a{};
    if (inet_pton(AF_INET, src.c_str(), &a) != 1) {
      throw UsageError("--source '" + src + "' is not an IPv4 address.");
    }
    r.source = ntohl(a.s_addr);
    // Never send with someone else's address: only one of this host's own.
    if (r.source == 0 || !lookup_interfaces(r.source, "", nullptr, nullptr)) {
      throw UsageError("--source " + src + " is not an address of this host.");
    }
  }
  if (!iface.empty()) {
    if (if_nametoindex(iface.c_str()) == 0) {
      throw Error("route", "interface '" + iface + "' does not exist", "no_interface");
    }
    r.interface = iface;
    if (r.source == 0 && !lookup_interfaces(0, iface, nullptr, &r.source)) {
      throw Error("route", "interface '" + iface + "' has no IPv4 address", "no_interface");
    }
  }
  if (r.source == 0 || r.interface.empty()) {
    // Ask the routing table: a connected UDP socket sends nothing.
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) throw Error("route", std::string("socket: ") + std::strerror(errno));
    if (!iface.empty()) {
      setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, iface.c_str(),
                 static_cast<socklen_t>(iface.size()));
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(9);
    sa.sin_addr.s_addr = htonl(dst);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      const int e = errno;
      close(fd);
      throw Error("route", "no route to " + format_ipv4(dst) + ": " + std::strerror(e), "no_route");
    }
    sockaddr_in me{};
    socklen_t len = sizeof me;
    getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len);
    close(fd);
    if (r.source == 0) r.source = ntohl(me.sin_addr.s_addr);
    if (r.interface.empty() &&
        !lookup_interfaces(ntohl(me.sin_addr.s_addr), "", &r.interface, nullptr)) {
      throw Error("route",
                  "cannot find the interface of source " + format_ipv4(ntohl(me.sin_addr.s_addr)),
                  "no_interface");
    }
  }
  r.mtu = interface_mtu(r.interface);
  return r;
}

PortReservation::PortReservation(std::uint32_t source, int port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw Error("net", std::string("socket: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(source);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    const int e = errno;
    close(fd_);
    throw Error("net",
                "cannot reserve source port " + std::to_string(port) + ": " + std::strerror(e),
                "port_in_use");
  }
  socklen_t len = sizeof sa;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
}

PortReservation::~PortReservation() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace lw
