#pragma once
// Where probes go and leave from: name resolution, the routing-table choice of
// source address and interface, refusal of targets no probe should be sent to.
// Both families: a run is IPv4 or IPv6 as its target is.
#include <cstdint>
#include <string>

#include "linkwidth/ip_addr.hpp"

namespace lw {

// IPv4/IPv6 literal or host name -> address. `family` 4 or 6 (-4/-6) asks
// for that family only; 0 takes the resolver's first answer (as ping and curl
// do). A literal of the other family than `family` is a usage error.
// Throws Error("resolve").
IpAddr resolve_target(const std::string& target, int family = 0);
// The IPv4-only form (host order).
std::uint32_t resolve_ipv4(const std::string& target);

// Empty string if fine, else the reason the address is never a probe target
// (loopback, multicast, broadcast, unspecified, IPv6 link-local without a
// scope, documentation prefixes, ...).
std::string forbidden_target_reason(const IpAddr& addr);

// The same for this host's interfaces: one of its own addresses (traffic to it
// never leaves the host), or the directed broadcast or network address of a
// subnet it is on (IPv4 prefixes up to /30), or the subnet-router anycast
// address of one of its IPv6 prefixes (up to /126). Empty string if fine.
std::string local_target_reason(const IpAddr& addr);

struct Route {
  IpAddr source;
  std::string interface;
  int mtu = 1500;
};

// Source and interface the kernel would use towards `dst`, with overrides.
// Throws Error("route") if there is no route or the override does not exist.
Route find_route(const IpAddr& dst, const std::string& interface_override,
                 const std::string& source_override);

// Binds a TCP socket to (source, port) and keeps it open so no local
// connection takes our source port during the run. port 0 = let the kernel pick.
class PortReservation {
 public:
  PortReservation(const IpAddr& source, int port);
  ~PortReservation();
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace lw
