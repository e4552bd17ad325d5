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
// do). A literal of the other family than `family` is a usage error. A
// link-local literal may carry a zone, fe80::1%eth0 or fe80::1%2 (RFC 4007):
// the result then holds the interface index as its scope_id; an unknown or
// empty zone, or a zone on another address, is a usage error.
// Throws Error("resolve").
IpAddr resolve_target(const std::string& target, int family = 0);
// The IPv4-only form (host order).
std::uint32_t resolve_ipv4(const std::string& target);
// Interface name or decimal index -> the index of an interface of this host;
// 0 when there is none.
std::uint32_t zone_index(const std::string& zone);
// The address as a user writes it: with its zone for a scoped one
// (fe80::1%eth0; the decimal index when the interface has no name any more).
std::string format_scoped(const IpAddr& a);

// Empty string if fine, else the reason the address is never a probe target
// (loopback, multicast, broadcast, unspecified, IPv6 link-local without a
// zone, documentation prefixes, ...).
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

// Source and interface the kernel would use towards `dst`, with overrides. A
// scoped `dst` (link-local) goes out of its zone's interface (an --interface
// naming another one is a usage error); a link-local source carries the zone.
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
