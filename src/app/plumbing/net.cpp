#include "app/plumbing/net.hpp"

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

namespace {

// The address inside a sockaddr of either family; nullopt for others.
std::optional<IpAddr> from_sockaddr(const sockaddr* sa) {
  if (!sa) return std::nullopt;
  if (sa->sa_family == AF_INET) {
    return IpAddr(ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    const IpAddr a = IpAddr::v6_from(s6->sin6_addr.s6_addr);
    return a.is_link_local() ? a.with_scope(s6->sin6_scope_id) : a;
  }
  return std::nullopt;
}

// `a` with `port` as a sockaddr of its family; returns its length.
socklen_t to_sockaddr(const IpAddr& a, std::uint16_t port, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (a.is_v6()) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(s6->sin6_addr.s6_addr, a.bytes6().data(), 16);
    s6->sin6_scope_id = a.scope_id();
    return sizeof(sockaddr_in6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  s4->sin_addr.s_addr = htonl(a.v4());
  return sizeof(sockaddr_in);
}

bool in_prefix6(const IpAddr& a, std::initializer_list<std::uint8_t> prefix, int bits) {
  const auto& b = a.bytes6();
  int i = 0;
  for (std::uint8_t p : prefix) {
    const int left = bits - 8 * i;
    if (left <= 0) break;
    const std::uint8_t mask = left >= 8 ? 0xff : static_cast<std::uint8_t>(0xff << (8 - left));
    if ((b[i] & mask) != (p & mask)) return false;
    ++i;
  }
  return true;
}

int prefix_len(const sockaddr* mask) {
  if (!mask) return 0;
  const std::uint8_t* m = nullptr;
  int n = 0;
  if (mask->sa_family == AF_INET) {
    m = reinterpret_cast<const std::uint8_t*>(
        &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr.s_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    m = reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr.s6_addr;
    n = 16;
  } else {
    return 0;
  }
  int bits = 0;
  for (int i = 0; i < n; ++i) {
    for (int k = 7; k >= 0; --k) {
      if (!(m[i] >> k & 1)) return bits;
      ++bits;
    }
  }
  return bits;
}

}  // namespace

std::string format_scoped(const IpAddr& a) {
  if (a.scope_id() == 0) return a.str();
  char name[IF_NAMESIZE] = {};
  const char* n = if_indextoname(a.scope_id(), name);
  return a.str() + "%" + (n ? std::string(n) : std::to_string(a.scope_id()));
}

std::uint32_t zone_index(const std::string& zone) {
  if (zone.empty() || zone.size() >= IF_NAMESIZE) return 0;
  if (const unsigned idx = if_nametoindex(zone.c_str())) return idx;
  if (zone.find_first_not_of("0123456789") != std::string::npos) return 0;
  char name[IF_NAMESIZE] = {0};
  const unsigned long idx = std::stoul(zone);
  if (idx == 0 || idx > 0xffffffffUL || !if_indextoname(static_cast<unsigned>(idx), name)) return 0;
  return static_cast<std::uint32_t>(idx);
}

IpAddr resolve_target(const std::string& target, int family) {
  if (const auto pct = target.find('%'); pct != std::string::npos) {
    // A scoped literal (RFC 4007 §11): fe80::1%eth0 or fe80::1%2. Never a
    // host name: '%' is not in one.
    const std::string text = target.substr(0, pct), zone = target.substr(pct + 1);
    const auto lit = IpAddr::parse(text);
    if (!lit || !lit->is_v6()) {
      throw UsageError("'" + target + "' is neither a host name nor an IPv6 address with a zone.");
    }
    if (family == 4) throw UsageError("-4 given, but " + target + " is an IPv6 address.");
    if (!lit->is_link_local()) {
      throw UsageError("'" + target + "': a zone (%interface) goes only with a link-local "
                       "address (fe80::/10); give " + text + " without it.");
    }
    const std::uint32_t idx = zone_index(zone);
    if (idx == 0) {
      throw UsageError("unknown zone '" + zone + "' in " + target +
                       ": no interface of that name or index on this host.");
    }
    return lit->with_scope(idx);
  }
  if (const auto lit = IpAddr::parse(target)) {
    if (family != 0 && lit->family() != family) {
      throw UsageError("-" + std::to_string(family) + " given, but " + target + " is an IPv" +
                       std::to_string(lit->family()) + " address.");
    }
    return *lit;
  }
  addrinfo hints{};
  hints.ai_family = family == 4 ? AF_INET : family == 6 ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(target.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    // A name that does not exist is a bad command line (exit 2); a resolver
    // that cannot answer now is a runtime failure (exit 1). A name without an
    // address of the asked family (-4/-6) is a bad command line too.
    const bool usage = rc == EAI_NONAME || rc == EAI_ADDRFAMILY || rc == EAI_NODATA;
    std::string why = gai_strerror(rc);
    if (family != 0 && (rc == EAI_ADDRFAMILY || rc == EAI_NODATA || rc == EAI_NONAME)) {
      why = "no IPv" + std::to_string(family) + " address (" + why + ")";
    }
    throw Error("resolve", "cannot resolve host '" + target + "': " + why, "unknown_host",
                usage ? ExitCode::kUsage : ExitCode::kRuntime);
  }
  std::optional<IpAddr> out;
  for (addrinfo* i = res; i && !out; i = i->ai_next) out = from_sockaddr(i->ai_addr);
  freeaddrinfo(res);
  if (!out) throw Error("resolve", "cannot resolve host '" + target + "'", "unknown_host");
  return *out;
}

std::uint32_t resolve_ipv4(const std::string& target) { return resolve_target(target, 4).v4(); }

std::string forbidden_target_reason(const IpAddr& addr) {
  if (addr.is_v6()) {
    const auto& b = addr.bytes6();
    if (addr.is_zero()) return "the unspecified address";
    if (in_prefix6(addr, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128)) {
      return "the loopback address";
    }
    if (b[0] == 0xff) return "a multicast address";
    if (addr.is_link_local() && addr.scope_id() == 0) {
      return "a link-local address without a zone (name the interface: " + addr.str() +
             "%<interface>)";
    }
    if (in_prefix6(addr, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96)) {
      return "an IPv4-mapped address (::ffff:0:0/96; give the IPv4 address)";
    }
    if (in_prefix6(addr, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96)) {
      return "in ::/96 (IPv4-compatible, deprecated)";
    }
    if (in_prefix6(addr, {0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64)) return "in 100::/64 (discard-only)";
    if (in_prefix6(addr, {0x20, 0x01, 0x0d, 0xb8}, 32)) {
      return "a documentation address (2001:db8::/32)";
    }
    if (in_prefix6(addr, {0x3f, 0xff}, 20)) return "a documentation address (3fff::/20)";
    return "";
  }
  const std::uint32_t a = addr.v4();
  const std::uint32_t top = a >> 24;
  if (a == 0) return "the unspecified address";
  if (top == 0) return "in 0.0.0.0/8 (this network)";
  if (top == 127) return "a loopback address";
  if (top >= 224 && top <= 239) return "a multicast address";
  if (a == 0xffffffffu) return "the broadcast address";
  if (top >= 240) return "a reserved (240.0.0.0/4) address";
  return "";
}

std::string local_target_reason(const IpAddr& addr) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return "";
  std::string why;
  for (ifaddrs* i = ifs; i && why.empty(); i = i->ifa_next) {
    const auto a = from_sockaddr(i->ifa_addr);
    if (!a || a->family() != addr.family()) continue;
    // A scoped target is compared with its own interface's addresses only.
    if (addr.scope_id() != 0 && if_nametoindex(i->ifa_name) != addr.scope_id()) continue;
    if (*a == addr) {
      why = std::string("an address of this host (") + i->ifa_name + ")";
      break;
    }
    const int prefix = prefix_len(i->ifa_netmask);
    if (addr.is_v6()) {
      // The all-zero interface identifier is the subnet-router anycast
      // address (RFC 4291 §2.6.1): a router of this subnet, not a target.
      if (prefix == 0 || prefix > 126) continue;
      auto net = a->bytes6();
      for (int bit = prefix; bit < 128; ++bit) net[bit / 8] &= static_cast<std::uint8_t>(~(0x80 >> (bit % 8)));
      if (IpAddr::v6(net) == addr) {
        why = "the subnet-router anycast address of " + IpAddr::v6(net).str() + "/" +
              std::to_string(prefix) + " on " + i->ifa_name;
      }
      continue;
    }
    if (prefix == 0 || prefix > 30) continue;
    const std::uint32_t mask = 0xffffffffu << (32 - prefix);
    const std::uint32_t v = a->v4();
    const std::string subnet = format_ipv4(v & mask) + "/" + std::to_string(prefix);
    if (addr.v4() == (v | ~mask)) {
      why = "the broadcast address of " + subnet + " on " + i->ifa_name;
    } else if (addr.v4() == (v & mask)) {
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

// Address -> interface owning it, or interface -> its first address of
// `family` (IPv6: not a link-local one: probes need a global source).
bool lookup_interfaces(const IpAddr& addr, const std::string& ifname, int family,
                       std::string* name_out, IpAddr* addr_out) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    const auto a = from_sockaddr(i->ifa_addr);
    if (!a || a->family() != family) continue;
    if (!ifname.empty()) {
      if (ifname != i->ifa_name) continue;
      if (a->is_v6() && (a->bytes6()[0] == 0xfe && (a->bytes6()[1] & 0xc0) == 0x80)) continue;
    } else if (*a != addr) {
      continue;
    }
    if (name_out) *name_out = i->ifa_name;
    if (addr_out) *addr_out = *a;
    found = true;
  }
  freeifaddrs(ifs);
  return found;
}

}  // namespace

Route find_route(const IpAddr& dst, const std::string& iface, const std::string& src) {
  Route r;
  const int fam = dst.family();
  if (dst.scope_id() != 0) {
    // fe80::1%eth0: the zone names the interface; the kernel picks the source.
    char name[IF_NAMESIZE] = {0};
    if (!if_indextoname(dst.scope_id(), name)) {
      throw Error("route", "the interface of zone " + std::to_string(dst.scope_id()) + " of " +
                  format_ip(dst) + " is gone", "no_interface");
    }
    if (!iface.empty() && iface != name) {
      throw UsageError("--interface " + iface + " and the target's zone (" + name +
                       ") name different interfaces.");
    }
    r.interface = name;
  }
  if (!src.empty()) {
    const auto a = IpAddr::parse(src);
    if (!a) throw UsageError("--source '" + src + "' is not an IP address.");
    if (a->family() != fam) {
      throw UsageError("--source " + src + " is an IPv" + std::to_string(a->family()) +
                       " address but the target is IPv" + std::to_string(fam) + ".");
    }
    r.source = a->is_link_local() ? a->with_scope(dst.scope_id()) : *a;
    // Never send with someone else's address: only one of this host's own.
    if (r.source.is_zero() || !lookup_interfaces(r.source, "", fam, nullptr, nullptr)) {
      throw UsageError("--source " + src + " is not an address of this host.");
    }
  }
  if (!iface.empty() && dst.scope_id() == 0) {
    if (if_nametoindex(iface.c_str()) == 0) {
      throw Error("route", "interface '" + iface + "' does not exist", "no_interface");
    }
    r.interface = iface;
    if (r.source.is_zero() && !lookup_interfaces(IpAddr(), iface, fam, nullptr, &r.source)) {
      throw Error("route",
                  "interface '" + iface + "' has no IPv" + std::to_string(fam) + " address",
                  "no_interface");
    }
  }
  if (r.source.is_zero() || r.interface.empty()) {
    // Ask the routing table: a connected UDP socket sends nothing.
    int fd = socket(fam == 6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) throw Error("route", std::string("socket: ") + std::strerror(errno));
    if (!iface.empty()) {
      setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, iface.c_str(),
                 static_cast<socklen_t>(iface.size()));
    }
    sockaddr_storage sa{};
    const socklen_t sl = to_sockaddr(dst, 9, sa);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sl) != 0) {
      const int e = errno;
      close(fd);
      throw Error("route", "no route to " + format_ip(dst) + ": " + std::strerror(e), "no_route");
    }
    sockaddr_storage me{};
    socklen_t len = sizeof me;
    getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len);
    close(fd);
    const IpAddr mine = from_sockaddr(reinterpret_cast<sockaddr*>(&me)).value_or(IpAddr());
    if (r.source.is_zero()) r.source = mine;
    if (r.interface.empty() && !lookup_interfaces(mine, "", fam, &r.interface, nullptr)) {
      throw Error("route", "cannot find the interface of source " + format_ip(mine),
                  "no_interface");
    }
  }
  r.mtu = interface_mtu(r.interface);
  return r;
}

PortReservation::PortReservation(const IpAddr& source, int port) {
  fd_ = socket(source.is_v6() ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw Error("net", std::string("socket: ") + std::strerror(errno));
  if (source.is_v6()) {
    int one = 1;
    setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  sockaddr_storage sa{};
  socklen_t sl = to_sockaddr(source, static_cast<std::uint16_t>(port), sa);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sl) != 0) {
    const int e = errno;
    close(fd_);
    throw Error("net",
                "cannot reserve source port " + std::to_string(port) + ": " + std::strerror(e),
                "port_in_use");
  }
  sl = sizeof sa;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &sl);
  port_ = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

PortReservation::~PortReservation() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace lw
