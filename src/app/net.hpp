#pragma once
// Where probes go and leave from: name resolution, the routing-table choice of
// source address and interface, refusal of targets no probe should be sent to.
#include <cstdint>
#include <string>

namespace lw {

// IPv4 literal or host name -> host-order address. Throws Error("resolve").
std::uint32_t resolve_ipv4(const std::string& target);

// Empty string if fine, else the reason the address is never a probe target
// (loopback, multicast, broadcast, unspecified, ...).
std::string forbidden_target_reason(std::uint32_t addr);

// The same for this host's interfaces: one of its own addresses (traffic to it
// never leaves the host), or the directed broadcast or network address of a
// subnet it is on (prefixes up to /30). Empty string if fine.
std::string local_target_reason(std::uint32_t addr);

struct Route {
  std::uint32_t source = 0;
  std::string interface;
  int mtu = 1500;
};

// Source and interface the kernel would use towards `dst`, with overrides.
// Throws Error("route") if there is no route or the override does not exist.
Route find_route(std::uint32_t dst, const std::string& interface_override,
                 const std::string& source_override);

// Binds a TCP socket to (source, port) and keeps it open so no local
// connection takes our source port during the run. port 0 = let the kernel pick.
class PortReservation {
 public:
  PortReservation(std::uint32_t source, int port);
  ~PortReservation();
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace lw
